"""Fast, deterministic calibration and power checks (the full study is
benchmarks/stat_calibration.py).  Thresholds are binomial quantiles at 1e-4, so a
correct implementation fails them with probability < 1e-4 per assertion and the fixed
seeds make the outcome deterministic."""

import numpy as np
from scipy import stats

from exactspec import stat_tests as st
from exactspec.stat_tests.binning import pool_bins


def zipf(V):
    p = 1.0 / np.arange(1, V + 1)
    return p / p.sum()


def max_rejections(S, false_fail_rate):
    return int(stats.binom.isf(1e-4, S, false_fail_rate))


def test_gof_false_fail_rate():
    S, false_fail_rate = 1000, 0.05
    p = zipf(200)
    for method in ("pearson", "g"):
        rej = sum(
            not st.assert_chisquare_gof(
                counts=np.random.default_rng(i).multinomial(3000, p),
                p=p,
                false_fail_rate=false_fail_rate,
                method=method,
            ).passed
            for i in range(S)
        )
        assert rej <= max_rejections(S, false_fail_rate), (method, rej)
        # not absurdly conservative
        assert rej >= int(stats.binom.ppf(1e-4, S, false_fail_rate * 0.5)), (
            method,
            rej,
        )


def test_pit_and_rounds_false_fail_rate():
    S, false_fail_rate = 600, 0.05
    law = np.array([0.35, 0.25, 0.18, 0.12, 0.10])
    mu = law @ np.arange(1, 6)
    var = law @ np.arange(1, 6) ** 2 - mu**2
    rk = rc = rr = rm = 0
    for i in range(S):
        rng = np.random.default_rng(10_000 + i)
        u = rng.random(500)
        rk += not st.assert_pit_uniform(u, false_fail_rate).passed
        rc += not st.assert_pit_uniform(u, false_fail_rate, method="chisquare").passed
        N = rng.choice(np.arange(1, 6), 500, p=law)
        rr += not st.assert_tokens_per_round(N, law, false_fail_rate).passed
        rm += not st.assert_mean_tokens(N, mu, var, false_fail_rate).passed
    for r in (rk, rc, rr, rm):
        assert r <= max_rejections(S, false_fail_rate)


def test_two_sample_false_fail_rate():
    S, false_fail_rate = 400, 0.05
    p = zipf(300)
    rej = sum(
        not st.assert_two_sample_chisquare(
            np.random.default_rng(i).choice(300, 2000, p=p),
            np.random.default_rng(5000 + i).choice(300, 1500, p=p),
            false_fail_rate,
        ).passed
        for i in range(S)
    )
    assert rej <= max_rejections(S, false_fail_rate)


def test_power_at_planned_n():
    """Least-favourable deviation (w = 2*TV exactly) of binned TV 0.05 at the planned n."""
    S, false_fail_rate, false_pass_rate, eps = 300, 0.01, 0.2, 0.05
    p = np.full(8, 0.125)
    n = st.min_num_samples_chisquare_gof(eps, 8, false_fail_rate, false_pass_rate)
    q = p * (1 + 2 * eps * np.array([1, -1] * 4))
    rng = np.random.default_rng(77)
    rej = sum(
        not st.assert_chisquare_gof(
            counts=rng.multinomial(n, q),
            p=p,
            false_fail_rate=false_fail_rate,
            false_pass_rate=false_pass_rate,
        ).passed
        for _ in range(S)
    )
    assert rej >= int(stats.binom.ppf(1e-4, S, 1 - false_pass_rate)), rej


def test_power_pooled_zipf():
    S, false_fail_rate, false_pass_rate, eps = 200, 0.01, 0.2, 0.05
    p = zipf(500)
    n, B = st.plan_gof(p, eps, false_fail_rate, false_pass_rate)
    bin_of, pb = pool_bins(p, n, 20)
    s = np.where(np.arange(B) % 2 == 0, 1.0, -1.0)
    s -= pb @ s
    c = 2 * eps / (pb @ np.abs(s))
    q = p * (1 + c * s[bin_of])
    q /= q.sum()
    rng = np.random.default_rng(78)
    rej = sum(
        not st.assert_chisquare_gof(
            counts=rng.multinomial(n, q),
            p=p,
            false_fail_rate=false_fail_rate,
            false_pass_rate=false_pass_rate,
        ).passed
        for _ in range(S)
    )
    assert rej >= int(stats.binom.ppf(1e-4, S, 1 - false_pass_rate)), rej
