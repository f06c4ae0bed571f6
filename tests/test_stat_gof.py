"""Goodness of fit, pooling, zero check and the exact multinomial test."""

import numpy as np
import pytest
from scipy import stats

from exactspec import stat_tests as st
from exactspec.stat_tests.binning import pool_bins


def zipf(V):
    p = 1.0 / np.arange(1, V + 1)
    return p / p.sum()


def test_pearson_hand_computed():
    r = st.assert_chisquare_gof(counts=[60, 40], p=[0.5, 0.5], false_fail_rate=0.01)
    assert r.statistic == pytest.approx(4.0)
    assert r.p_value == pytest.approx(stats.chi2.sf(4.0, 1))
    assert r.passed and r.n == 100 and r.details["df"] == 1


def test_pearson_matches_scipy_unpooled():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(12))
    n = int(np.ceil(20 / p.min())) + 100
    c = rng.multinomial(n, p)
    r = st.assert_chisquare_gof(counts=c, p=p, false_fail_rate=0.01)
    ref = stats.chisquare(c, n * p)
    assert r.details["n_bins"] == 12
    assert r.statistic == pytest.approx(ref.statistic, rel=1e-10)
    assert r.details["p_value_chi2_plain"] == pytest.approx(ref.pvalue, rel=1e-8)
    assert r.p_value >= ref.pvalue - 1e-15  # the tail correction is never less conservative


def test_g_matches_scipy_power_divergence():
    rng = np.random.default_rng(1)
    p = np.array([0.1, 0.2, 0.3, 0.4])
    c = rng.multinomial(1000, p)
    r = st.assert_chisquare_gof(counts=c, p=p, false_fail_rate=0.01, method="g")
    ref = stats.power_divergence(c, 1000 * p, lambda_="log-likelihood")
    assert r.statistic == pytest.approx(ref.statistic, rel=1e-10)
    assert r.details["p_value_chi2_plain"] == pytest.approx(ref.pvalue, rel=1e-8)
    q = 1 + 5 / 6000
    assert r.p_value == pytest.approx(stats.chi2.sf(ref.statistic / q, 3), rel=1e-10)


def test_samples_and_counts_agree():
    rng = np.random.default_rng(2)
    p = zipf(300)
    s = rng.choice(300, 5000, p=p)
    a = st.assert_chisquare_gof(s, p, 0.01)
    b = st.assert_chisquare_gof(counts=np.bincount(s, minlength=300), p=p, false_fail_rate=0.01)
    assert a.statistic == b.statistic and a.p_value == b.p_value


def test_pooling_properties():
    p = zipf(5000)
    p[[7, 100, 4000]] = 0
    p /= p.sum()
    n, m = 30000, 20.0
    bin_of, pb = pool_bins(p, n, m)
    assert np.all(bin_of[p == 0] == -1) and np.all(bin_of[p > 0] >= 0)
    assert np.all(n * pb >= m * (1 - 1e-9))
    assert pb.sum() == pytest.approx(1.0)
    big = np.flatnonzero(n * p >= m)
    assert len(set(bin_of[big])) == big.size  # frequent tokens never pooled
    assert np.all(np.bincount(bin_of[big], minlength=pb.size)[bin_of[big]] == 1)


def test_pooling_independent_of_samples_and_merges_remainder():
    p = np.array([0.9, 0.05, 0.03, 0.02])
    bin_of, pb = pool_bins(p, 200, 20)  # expected 180, 10, 6, 4: rare total 20
    assert bin_of.tolist() == [0, 1, 1, 1] and pb.size == 2
    bin_of, pb = pool_bins(p, 300, 20)  # expected 270, 15, 9, 6: rare 30 -> one bin
    assert pb.size == 2
    bin_of, pb = pool_bins(np.array([0.95, 0.03, 0.02]), 300, 20)  # rare 15 < 20 -> joins token 0
    assert pb.size == 1


def test_zero_probability_hard_fail_names_token():
    p = np.array([0.5, 0.0, 0.5])
    s = np.array([0, 2, 1, 1, 0, 2, 1] + [0, 2] * 50)
    r = st.assert_within_support(s, p)
    assert not r.passed and r.p_value == 0.0 and r.statistic == 3
    assert "token 1 x3" in r.message
    g = st.assert_chisquare_gof(s, p, 0.01)
    assert not g.passed and "token 1 x3" in g.message
    ok = st.assert_within_support(np.array([0, 2, 2]), p)
    assert ok.passed and ok.false_fail_rate == 0.0
    assert ok.details["detectable_zero_mass"] == pytest.approx(1 - 0.001 ** (1 / 3))


def test_point_mass_p():
    r = st.assert_chisquare_gof(np.zeros(50, dtype=int), np.array([1.0, 0.0]), 0.01)
    assert r.passed


def test_detects_gross_error_and_reports_worst_bin():
    rng = np.random.default_rng(3)
    p = np.full(10, 0.1)
    q = p.copy()
    q[3] += 0.05
    q[4] -= 0.05
    r = st.assert_chisquare_gof(rng.choice(10, 20000, p=q), p, 1e-6)
    assert not r.passed and r.details["worst_bin_tokens"][0] in (3, 4)


def test_exact_multinomial_hand_case():
    r = st.assert_multinomial_exact(counts=[2, 0], p=[0.5, 0.5], false_fail_rate=0.01)
    assert r.details["mode"] == "exact" and r.p_value == pytest.approx(0.5)
    r = st.assert_multinomial_exact(
        counts=[3, 0, 0], p=[1 / 3] * 3, false_fail_rate=0.01, statistic="prob"
    )
    # P(3,0,0)=1/27 each; the 3 extreme outcomes are the least likely
    assert r.p_value == pytest.approx(3 / 27)


def test_exact_vs_monte_carlo_agree():
    p = np.array([0.4, 0.3, 0.2, 0.1])
    c = [2, 3, 7, 3]
    ex = st.assert_multinomial_exact(counts=c, p=p, false_fail_rate=0.01)
    mc = st.assert_multinomial_exact(
        counts=c, p=p, false_fail_rate=0.01, max_enumerate=0, n_sim=40000, rng=5
    )
    assert ex.details["mode"] == "exact" and mc.details["mode"] == "monte_carlo"
    assert mc.p_value == pytest.approx(ex.p_value, abs=0.01)


def test_exact_test_zero_check():
    r = st.assert_multinomial_exact(counts=[1, 2, 0], p=[0.0, 0.5, 0.5], false_fail_rate=0.01)
    assert not r.passed and "token 0 x1" in r.message


def test_pearson_null_variance_formula():
    rng = np.random.default_rng(4)
    pb = np.array([0.5, 0.3, 0.15, 0.05])
    n = 50
    X = rng.multinomial(n, pb, size=200000)
    var = (((X - n * pb) ** 2) / (n * pb)).sum(1).var()
    from exactspec.stat_tests.gof import pearson_pvalue

    _, _, info = pearson_pvalue(1.0, pb, n)
    assert info["null_variance"] == pytest.approx(var, rel=0.03)


def test_large_vocab_is_fast():
    import time

    rng = np.random.default_rng(5)
    p = zipf(150_000)
    s = rng.choice(150_000, 100_000, p=p)
    t = time.perf_counter()
    r = st.assert_chisquare_gof(s, p, 1e-3)
    assert time.perf_counter() - t < 1.0 and r.details["n_bins"] > 1000


def test_to_dict_is_json():
    import json

    r = st.assert_within_support(np.array([0, 1]), np.array([0.5, 0.5]))
    d = r.to_dict()
    assert json.loads(json.dumps(d, allow_nan=False))["detectable_tv"] is None
    assert set(d) >= {
        "name",
        "statistic",
        "p_value",
        "n",
        "false_fail_rate",
        "false_pass_rate",
        "detectable_tv",
        "passed",
        "message",
    }
    with pytest.raises(Exception):
        r.passed = False  # frozen


def test_guarded_gof_with_no_observation_is_a_skipped_pass_and_never_an_error():
    from exactspec.stat_tests import lr_gof_or_zero

    empty = lr_gof_or_zero(
        "residual_1", np.zeros(3, dtype=np.int64), np.array([0.2, 0.3, 0.5]), 1e-6, 1e-3, 20.0
    )
    assert (
        empty.passed and empty.n == 0 and empty.details["skipped"] and empty.false_fail_rate == 0.0
    )
    few = lr_gof_or_zero("x", np.array([0, 0, 1]), np.array([0.5, 0.5, 0.0]), 1e-6, 1e-3, 20.0)
    assert not few.passed  # one sample, on a token of probability 0: the hard check fails it
