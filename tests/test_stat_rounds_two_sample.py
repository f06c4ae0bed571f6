"""Tokens-per-round tests and the two-sample homogeneity test."""

import numpy as np
import pytest
from scipy import stats

from exactspec import stat_tests as st

LAW = np.array([0.35, 0.25, 0.18, 0.12, 0.10])


def test_tokens_per_round_hand_case():
    N = np.repeat(np.arange(1, 6), [350, 250, 180, 120, 100])
    r = st.assert_tokens_per_round(N, LAW, 0.01)
    assert r.statistic == pytest.approx(0.0) and r.passed and r.name == "tokens_per_round"
    N2 = np.repeat(np.arange(1, 6), [400, 250, 180, 120, 50])
    r2 = st.assert_tokens_per_round(N2, LAW, 0.01)
    assert r2.statistic == pytest.approx(50**2 / 350 + 50**2 / 100)


def test_tokens_per_round_zero_law_entry_fails():
    r = st.assert_tokens_per_round(np.array([1, 2, 3] * 30), [0.5, 0.5, 0.0], 0.01)
    assert not r.passed and "token 2" in r.message


def test_mean_tokens_hand_case():
    N = np.array([1, 2, 3, 4] * 25)
    r = st.assert_mean_tokens(N, 2.0, 1.25, 0.01)
    z = 0.5 / np.sqrt(1.25 / 100)
    assert r.statistic == pytest.approx(z) and r.p_value == pytest.approx(2 * stats.norm.sf(z))
    assert not r.passed
    b = st.assert_mean_tokens(N, 2.5, 1.25, 0.01, method="bernstein", support=(1, 4))
    assert b.passed and b.p_value == 1.0
    assert (
        b.details["detectable_mean_shift"]
        > st.assert_mean_tokens(N, 2.5, 1.25, 0.01).details["detectable_mean_shift"]
    )


def test_two_sample_matches_scipy_contingency():
    rng = np.random.default_rng(12)
    a = rng.choice(6, 3000, p=[0.3, 0.2, 0.2, 0.1, 0.1, 0.1])
    b = rng.choice(6, 2000, p=[0.3, 0.2, 0.2, 0.1, 0.1, 0.1])
    r = st.assert_two_sample_chisquare(a, b, 0.01)
    table = np.vstack([np.bincount(a, minlength=6), np.bincount(b, minlength=6)])
    ref = stats.chi2_contingency(table, correction=False)
    assert r.details["n_bins"] == 6
    assert r.statistic == pytest.approx(ref.statistic) and r.p_value == pytest.approx(ref.pvalue)
    assert r.details["n_eff"] == pytest.approx(1200.0)


def test_two_sample_pools_and_detects():
    rng = np.random.default_rng(13)
    p = 1 / np.arange(1, 2001)
    p /= p.sum()
    q = p.copy()
    q[:10] *= 1.5
    q /= q.sum()
    r = st.assert_two_sample_chisquare(
        rng.choice(2000, 20000, p=p), rng.choice(2000, 20000, p=q), 1e-4
    )
    assert r.details["min_bin_expected"] >= 20 - 1e-9 and not r.passed


@pytest.mark.parametrize(
    "args,kwargs,match",
    [
        ((np.array([0, 6]), LAW, 0.01), {}, "counts_N"),
        ((np.array([1, 2]), LAW, 0.01), {}, "counts_N"),  # n too small
        ((np.array([1.5, 2]), LAW, 0.01), {}, "counts_N"),
        ((np.array([1, 2] * 100), LAW[:4], 0.01), {}, "law"),
        ((np.array([1, 2] * 100), LAW, 0.0), {}, "false_fail_rate"),
    ],
)
def test_tokens_per_round_errors(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        st.assert_tokens_per_round(*args, **kwargs)


@pytest.mark.parametrize(
    "args,kwargs,match",
    [
        ((np.array([1]), 2.0, 1.0, 0.01), {}, "N"),
        ((np.array([1, 2]), 2.0, 0.0, 0.01), {}, "expected_variance"),
        ((np.array([1, 2]), np.nan, 1.0, 0.01), {}, "expected_mean"),
        ((np.array([1, 2]), 2.0, 1.0, 1.0), {}, "false_fail_rate"),
        ((np.array([1, 2]), 2.0, 1.0, 0.01), dict(method="bernstein"), "support"),
        ((np.array([1, 9]), 2.0, 1.0, 0.01), dict(method="bernstein", support=(1, 5)), "support"),
        ((np.array([1, 2]), 2.0, 1.0, 0.01), dict(method="t"), "method"),
    ],
)
def test_mean_tokens_errors(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        st.assert_mean_tokens(*args, **kwargs)


@pytest.mark.parametrize(
    "a,b,kwargs,match",
    [
        (np.array([], dtype=int), np.array([1, 2]), {}, "samples_a"),
        (np.array([-1, 2]), np.array([1, 2]), {}, "samples_a"),
        (np.array([1, 2]), np.array([[1, 2]]), {}, "samples_b"),
        (np.array([0, 1] * 10), np.array([0, 1] * 10), {}, "samples_a/samples_b"),  # too small
        (np.array([0, 1]), np.array([0, 1]), dict(min_expected=0), "min_expected"),
    ],
)
def test_two_sample_errors(a, b, kwargs, match):
    with pytest.raises(ValueError, match=match):
        st.assert_two_sample_chisquare(a, b, 0.01, **kwargs)
