"""The likelihood-ratio test with a proven tail (stat_tests.lr_tail / lr_gof): exact tails equal full enumeration,
the bound dominates the exact tail, the realised size never exceeds the level (where Pearson's asymptotic tail
does: the audit's n = 852, 3-bin example), planning and run-wide seed salts."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from exactspec.stat_tests import (
    assert_multinomial_lr,
    assert_chisquare_gof,
    lr_critical_value,
    lr_pvalue,
    lr_tail_bound,
    min_discrepancy_multinomial_lr,
    min_num_samples_multinomial_lr,
    min_num_samples_chisquare_gof,
)
from exactspec.stat_tests.lr_tail import lr_statistic


def _enumerate(n: int, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every outcome of Multinomial(n, p): counts, probabilities, G."""
    heads = [c for c in itertools.product(range(n + 1), repeat=p.size - 1) if sum(c) <= n]
    x = np.array([list(c) + [n - sum(c)] for c in heads], dtype=np.float64)
    prob = np.exp(stats.multinomial.logpmf(x, n, p))
    g = np.array([lr_statistic(row, p) for row in x])
    return x, prob, g


def _exact_tail(prob: np.ndarray, g: np.ndarray, g_obs: float) -> float:
    return float(prob[g >= g_obs - 1e-9 * max(1.0, g_obs)].sum())


@pytest.mark.parametrize(
    "p", [[0.3, 0.7], [0.02, 0.98], [0.2, 0.3, 0.5], [0.001, 0.5, 0.499], [0.05, 0.15, 0.8]]
)
@pytest.mark.parametrize("n", [7, 60])
def test_exact_tail_equals_enumeration(p, n):
    """For 2 and 3 bins the p-value is the exact tail P(G >= g_obs) (to 1e-12, plus < 1e-19 outside the window)."""
    p = np.asarray(p)
    x, prob, g = _enumerate(n, p)
    for i in np.random.default_rng(n).choice(len(x), 25):
        pv, g_obs, how = lr_pvalue(x[i], p)
        assert how == "exact"
        exact = min(1.0, _exact_tail(prob, g, g_obs))
        assert exact - 1e-12 <= pv <= exact + 1e-12 + 1e-18, (x[i], pv, exact)


@pytest.mark.parametrize("p", [[0.25, 0.25, 0.25, 0.25], [0.01, 0.09, 0.3, 0.6], [0.1] * 5 + [0.5]])
def test_bound_dominates_exact_tail(p):
    """Agrawal's bound is never below the exact tail (the theorem, checked on every outcome of n = 14..20)."""
    p = np.asarray(p)
    n = 20 if p.size == 4 else 14
    _, prob, g = _enumerate(n, p)
    order = np.argsort(-g)
    tails = np.cumsum(prob[order])  # P(G >= g) at each outcome, ties resolved conservatively below
    for gi, tail in zip(g[order][::7], tails[::7]):
        assert lr_tail_bound(gi, p.size) >= _exact_tail(prob, g, gi) * (1 - 1e-12) >= 0
    assert tails[-1] == pytest.approx(1.0)


def test_realised_size_at_the_audits_example():
    """n = 852, 3 bins, min expected 20.4, level 8e-9: the exact size of the "lr" test is <= 8e-9 (computed over
    all 363,378 outcomes), while Pearson's asymptotic test runs at more than 8e-9 (the audit measured 1.34e-7
    for its case)."""
    n, a = 852, 8e-9
    p = np.array([20.4 / n, 0.35, 1 - 0.35 - 20.4 / n])
    x1, x2 = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    keep = x1 + x2 <= n
    x = np.stack([x1[keep], x2[keep], n - x1[keep] - x2[keep]], axis=1).astype(np.float64)
    prob = np.exp(stats.multinomial.logpmf(x, n, p))
    from scipy import special

    g = 2.0 * special.xlogy(x, x / (n * p)).sum(axis=1)
    order = np.argsort(-g, kind="stable")
    tail = np.cumsum(prob[order])
    # the exact p-value of an outcome is the tail at the last outcome tied with it
    g_sorted = g[order]
    last_tie = (
        np.searchsorted(-g_sorted, -g_sorted + 1e-9 * np.maximum(1.0, g_sorted), side="right") - 1
    )
    pvals = tail[last_tie]
    size_lr = float(prob[order][pvals < a].sum())
    assert 0 < size_lr <= a
    pearson = ((x - n * p) ** 2 / (n * p)).sum(axis=1)
    size_pearson = float(prob[stats.chi2.sf(pearson, 2) < a].sum())
    assert size_pearson > a
    for i in np.random.default_rng(0).choice(np.flatnonzero(pvals[np.argsort(order)] < 1e-3), 5):
        assert lr_pvalue(x[i], p)[0] == pytest.approx(
            pvals[np.argsort(order)][i], rel=1e-9, abs=1e-15
        )


def test_rejection_rate_by_simulation():
    """1,500 null draws per law: rejection rate at 1e-2 not significantly above nominal (exact tails: not far below)."""
    rng = np.random.default_rng(3)
    for p, n in (([0.5, 0.3, 0.2], 400), ([0.4, 0.6], 900), (np.full(12, 1 / 12), 600)):
        p = np.asarray(p)
        pv = np.array([lr_pvalue(c, p)[0] for c in rng.multinomial(n, p, size=1500)])
        k = int(np.count_nonzero(pv < 1e-2))
        hi = stats.binomtest(k, pv.size).proportion_ci(0.99, method="exact").high
        assert k / pv.size <= hi and stats.binom.sf(k - 1, pv.size, 1e-2) > 1e-3, (p, k)
        if p.size <= 3:  # exact tail: not far below nominal either
            assert k >= 4, (p, k)


def test_power_at_planned_n():
    """Least-favourable deviation (constant relative shift) of binned TV eps on 4 bins, at the n planned for it
    (level 1e-4, false-pass 0.1): detected in >= 0.9 - 3 sd of 600 draws."""
    p = np.array([0.4, 0.3, 0.2, 0.1])
    eps, a, b = 0.05, 1e-4, 0.1
    n = min_num_samples_multinomial_lr(eps, 4, a, b)
    q = p * (1 + np.array([1, 1, -1, -1]) * eps / 0.7 * np.array([1, 1, 0.7 / 0.3, 0.7 / 0.3]))
    assert np.isclose(q.sum(), 1) and np.isclose(0.5 * np.abs(q - p).sum(), eps)
    rng = np.random.default_rng(5)
    hits = np.mean(
        [
            assert_multinomial_lr(counts=c, p=p, false_fail_rate=a, false_pass_rate=b).passed
            is False
            for c in rng.multinomial(n, q, size=600)
        ]
    )
    assert hits >= 0.9 - 3 * np.sqrt(0.09 / 600), hits
    assert min_discrepancy_multinomial_lr(n, 4, a, b) == pytest.approx(eps, rel=1e-3)


def test_planning_costs_more_than_asymptotic_and_bound_critical_is_exact():
    for bins in (2, 4, 40):
        assert min_num_samples_multinomial_lr(0.05, bins, 8e-9) > min_num_samples_chisquare_gof(
            0.05, bins, 8e-9
        )
    c = lr_critical_value(8e-9, 40)
    assert lr_tail_bound(c, 40) == pytest.approx(8e-9, rel=1e-9)
    assert lr_tail_bound(c * 0.99, 40) > 8e-9


def test_gof_lr_method_reports_its_tail():
    p = np.array([0.5, 0.3, 0.2])
    r = assert_chisquare_gof(counts=np.array([50, 30, 20]), p=p, false_fail_rate=1e-6, method="lr")
    assert r.passed and r.details["tail"] == "exact" and r.p_value == pytest.approx(1.0)
    r = assert_chisquare_gof(
        counts=np.array([900, 30, 20, 50]), p=np.full(4, 0.25), false_fail_rate=1e-6, method="lr"
    )
    assert (
        not r.passed
        and r.details["tail"] == "bound"
        and r.details["false_fail_rate_is"] == "proven (Agrawal bound)"
    )
    with pytest.raises(ValueError, match="method"):
        assert_chisquare_gof(
            counts=np.array([1, 2]), p=np.array([0.5, 0.5]), false_fail_rate=1e-3, method="exact"
        )
    with pytest.raises(ValueError, match="n_bins"):
        lr_tail_bound(3.0, 1)


def test_seed_salt_changes_every_case_seed_and_restores():
    from exactspec.conformance.core.records import case_seed, set_seed_salt

    old = set_seed_salt("")  # this very run may be salted (--exactspec-seed): restore it afterwards
    try:
        base = case_seed("demo", "statistical")
        set_seed_salt("s1")
        salted = case_seed("demo", "statistical")
        assert salted != base and salted == case_seed("demo", "statistical")
        set_seed_salt("s2")
        assert case_seed("demo", "statistical") not in (base, salted)
        set_seed_salt("")
        assert case_seed("demo", "statistical") == base
    finally:
        set_seed_salt(old)
    with pytest.raises(ValueError, match="salt"):
        set_seed_salt(3)


def test_lr_with_too_few_samples_for_two_pooled_bins_tests_the_mode_against_the_rest():
    """Before: the check fell back to the zero-probability test only, so a gross deviation on a concentrated law
    (EAGLE's tokens per round on a near-equal tree: mean 1.84 against 3.995) passed. Now the exact two-bin tail."""
    from exactspec.stat_tests import assert_chisquare_gof

    p = np.array([0.995, 0.003, 0.002])
    moved = assert_chisquare_gof(
        counts=np.array([80, 20, 0]), p=p, false_fail_rate=1e-6, method="lr", min_expected=250
    )
    assert not moved.passed and moved.details["n_bins"] == 2 and moved.details["tail"] == "exact"
    assert assert_chisquare_gof(
        counts=np.array([100, 0, 0]), p=p, false_fail_rate=1e-6, method="lr", min_expected=250
    ).passed
