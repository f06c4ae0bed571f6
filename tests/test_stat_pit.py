"""Randomised PIT and uniformity tests."""

import numpy as np
import pytest
from scipy import stats

from exactspec import stat_tests as st
from exactspec.reference.sampling import inverse_cdf


def test_pit_id_hand_case():
    w = np.random.default_rng(7).random(1)[0]
    u = st.pit_values(np.array([1]), np.array([[0.2, 0.3, 0.5]]), np.random.default_rng(7), "id")
    assert u[0] == pytest.approx(0.2 + w * 0.3)


def test_pit_prob_ordering_hand_case_with_ties():
    w = np.random.default_rng(8).random(2)
    P = np.array([[0.2, 0.3, 0.5], [0.25, 0.25, 0.5]])
    u = st.pit_values(np.array([1, 1]), P, np.random.default_rng(8), "prob")
    assert u[0] == pytest.approx(0.5 + w[0] * 0.3)  # order: 2, 1, 0
    assert u[1] == pytest.approx(0.75 + w[1] * 0.25)  # order: 2, 0 (tie, lower id), 1


def test_pit_uniform_under_prefix_dependence():
    rng = np.random.default_rng(9)
    V, n = 20, 4000
    T = rng.dirichlet(np.full(V, 0.5), size=V)
    x = np.empty(n, dtype=int)
    prev = 0
    rows = np.empty((n, V))
    for t in range(n):
        rows[t] = T[prev]
        x[t] = rng.choice(V, p=T[prev])
        prev = x[t]
    for o in ("id", "prob"):
        u = st.pit_values(x, rows, rng, o)
        assert st.assert_pit_uniform(u, 1e-3).passed
        assert st.assert_pit_uniform(u, 1e-3, method="chisquare").passed


def test_pit_detects_temperature_error_with_prob_ordering():
    rng = np.random.default_rng(10)
    n, V = 2000, 100
    logits = rng.normal(0, 2, (n, V))
    P = np.exp(logits)
    P /= P.sum(1, keepdims=True)
    Q = np.exp(logits / 1.3)
    Q /= Q.sum(1, keepdims=True)
    x = inverse_cdf(Q, rng.random(n))
    r = st.assert_pit_uniform(st.pit_values(x, P, rng, "prob"), 1e-4)
    assert not r.passed


def test_ks_matches_scipy_and_detectable():
    u = np.random.default_rng(11).random(500)
    r = st.assert_pit_uniform(u, 0.01)
    ref = stats.kstest(u, "uniform")
    assert r.statistic == ref.statistic and r.p_value == ref.pvalue
    assert np.isnan(r.detectable_tv) and 0 < r.details["detectable_kolmogorov"] < 1


def test_chisquare_uniformity_bins():
    u = (np.arange(1000) + 0.5) / 1000
    r = st.assert_pit_uniform(u, 0.01, method="chisquare", bins=10)
    assert r.statistic == pytest.approx(0.0) and r.details["n_bins"] == 10


def test_pit_zero_probability_token_raises():
    with pytest.raises(ValueError, match="tokens"):
        st.pit_values(np.array([0]), np.array([[0.0, 1.0]]), 0)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(tokens=np.array([0, 1]), probs=np.array([[0.5, 0.5]])), "tokens"),
        (dict(tokens=np.array([2]), probs=np.array([[0.5, 0.5]])), "tokens"),
        (dict(tokens=np.array([0]), probs=np.array([0.5, 0.5])), "probs"),
        (dict(tokens=np.array([0]), probs=np.array([[0.5, 0.6]])), "probs"),
        (dict(tokens=np.array([0]), probs=np.array([[np.nan, 1.0]])), "probs"),
        (dict(tokens=np.array([0]), probs=np.array([[-0.5, 1.5]])), "probs"),
        (dict(tokens=np.array([0]), probs=np.array([[0.5, 0.5]]), ordering="alpha"), "ordering"),
    ],
)
def test_pit_values_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        st.pit_values(rng=0, **kwargs)


@pytest.mark.parametrize(
    "u,kwargs,match",
    [
        (np.array([0.1, 1.2]), dict(false_fail_rate=0.01), "u"),
        (np.array([0.1, np.nan]), dict(false_fail_rate=0.01), "u"),
        (np.ones((2, 2)) / 2, dict(false_fail_rate=0.01), "u"),
        (np.array([0.5]), dict(false_fail_rate=0.01), "u"),
        (
            np.random.default_rng(0).random(30),
            dict(false_fail_rate=0.01, method="chisquare"),
            "bins",
        ),
        (
            np.random.default_rng(0).random(30),
            dict(false_fail_rate=0.01, method="chisquare", bins=3),
            "u",
        ),
        (np.array([0.1, 0.2]), dict(false_fail_rate=1.5), "false_fail_rate"),
        (np.array([0.1, 0.2]), dict(false_fail_rate=0.01, method="ad"), "method"),
    ],
)
def test_pit_uniformity_errors(u, kwargs, match):
    with pytest.raises(ValueError, match=match):
        st.assert_pit_uniform(u, **kwargs)


# --- the KS slack and the rare-event count (stat_tests.pit, assert_rare_events) ------------------------------------


def test_a_slack_widens_the_ks_critical_value_and_never_lowers_the_p_value():
    rng = np.random.default_rng(3)
    u = rng.random(2000)
    plain, widened = st.assert_pit_uniform(u, 1e-3), st.assert_pit_uniform(u, 1e-3, slack=1e-3)
    assert widened.details["critical_D"] == pytest.approx(plain.details["critical_D"] + 1e-3)
    assert widened.p_value >= plain.p_value
    with pytest.raises(ValueError, match="slack"):
        st.assert_pit_uniform(u, 1e-3, method="chisquare", slack=1e-3)


def test_rare_event_test_holds_its_rate_under_dependent_trials_and_finds_a_leak():
    """Seeded: events whose conditional probability varies with the past but stays <= 3e-4 (rate bound), 4,000
    runs of 5,000 trials: the rejection rate at level 0.01 is within its Clopper-Pearson interval of <= 0.01; a
    leak at rate 5e-3 is caught in every one of 50 runs (detectable rate stated below it)."""
    from exactspec.stat_tests import clopper_pearson, assert_rare_events

    rng = np.random.default_rng(5)
    rejections = 0
    for _ in range(4000):
        rates = np.where(rng.random(5000) < 0.5, 3e-4, 1e-4)  # varying, never above the bound
        count = int((rng.random(5000) < rates).sum())
        rejections += not assert_rare_events(count, 5000, 3e-4, 0.01).passed
    assert clopper_pearson(rejections, 4000, 0.99)[0] <= 0.01
    leak = assert_rare_events(0, 5000, 3e-4, 1e-4)
    assert leak.details["detectable_rate"] < 5e-3
    assert all(
        not assert_rare_events(int((rng.random(5000) < 5e-3).sum()), 5000, 3e-4, 1e-4).passed
        for _ in range(50)
    )
