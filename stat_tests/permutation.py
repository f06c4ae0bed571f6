"""Permutation homogeneity test of two samples of categories (tokens, token tuples), exact at any n.

Bins come from the POOLED sample only: categories sorted by pooled count (descending), ties by the
category's own value, never by which sample it was first seen in; categories whose pooled count reaches
``min_pooled`` keep their bin, the rest are merged greedily in that order. The statistic is Pearson's
chi-square of the 2 x B table. Under H0 (both samples i.i.d. from one law, independent of each other) the
pooled sample is exchangeable, so every split of it into the two sample sizes is equally likely; the
permuted tables are drawn as multivariate-hypergeometric splits of the pooled bin counts (the same law as
relabelling the records at random), which depends on the pooled counts only: reordering the records or
swapping the two samples cannot change the p-value.

Monte-Carlo p-value with Besag & Clifford's sequential stopping (Biometrika 1991): draw until
``h`` permuted statistics reach the observed one (p = h / L after L draws) or ``M = ceil(h / level) - 1``
draws (p = (1 + e) / (1 + M)). Both are valid p-values at any n (P(p <= u) <= u), and p <= level exactly
when the M draws give fewer than h exceedances, so the test's false-fail rate is <= level: a theorem, no
asymptotics. Under H0 it stops after about h / p draws.

A strong deviation needs no permutations: `hoeffding_pvalue` bounds the permutation tail of the largest
per-bin deviation analytically (Hoeffding's inequality holds for sampling without replacement, with
Serfling's finite-population factor; a union bound over bins). The check spends level/2 on that bound and
level/2 on the permutation test and reports p = min(1, 2 min(p_bound, p_permutation)), valid by
Bonferroni; the permutations run only when the bound does not already reject, so a failing engine costs
at most ``2h / level`` draws per check, and usually none.

Power (the only approximate statement, the project's chi-square planning): the exact permutation test of
Pearson's statistic is asymptotically the chi-square test, so at level/4 it detects binned TV
``min_discrepancy_chisquare_gof(n_eff, B, level/4, false_pass_rate/2)`` w.p. >= 1 - false_pass_rate/2
(`min_discrepancy_permutation_homogeneity`, `min_num_samples_permutation_homogeneity`); `choose_h` makes the Monte-Carlo step at
level/2 lose at most false_pass_rate/2 more (a binomial bound: P(Binomial(M, level/4) >= h) <= false_pass_rate/2).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Hashable, Sequence

import numpy as np
from scipy import stats

from ..reference.validation import check_error_rates, check_positive_number
from .power import min_discrepancy_chisquare_gof, min_num_samples_chisquare_gof
from .result import TestResult

_CHUNK = 1 << 15


def pooled_bins(
    sample_a: Sequence[Hashable], sample_b: Sequence[Hashable], min_pooled: float
) -> tuple[np.ndarray, np.ndarray, list[list]]:
    """(counts of a per bin, counts of b per bin, categories of each bin) on bins from the pooled sample."""
    ca, cb = Counter(sample_a), Counter(sample_b)
    pooled = ca + cb
    order = sorted(pooled, key=lambda cat: (-pooled[cat], _sort_key(cat)))
    bins: list[list] = []
    filling = 0
    for cat in order:
        if pooled[cat] >= min_pooled or not bins or filling >= min_pooled:
            bins.append([cat])
            filling = pooled[cat]
        else:
            bins[-1].append(cat)
            filling += pooled[cat]
    if (
        len(bins) > 1
        and filling < min_pooled
        and len(bins[-1])
        and pooled[bins[-1][0]] < min_pooled
    ):
        bins[-2].extend(bins.pop())  # a short rare remainder joins the previous bin
    a = np.array([sum(ca[c] for c in cats) for cats in bins], dtype=np.int64)
    b = np.array([sum(cb[c] for c in cats) for cats in bins], dtype=np.int64)
    return a, b, bins


def _sort_key(cat: Any) -> tuple:
    """A total order on categories (ints, tuples of ints, None for END) independent of the samples."""
    if isinstance(cat, tuple):
        return (1, tuple(_sort_key(c) for c in cat))
    return (0, -1 if cat is None else int(cat))


def pearson_statistic(counts_a: np.ndarray, pooled: np.ndarray, n_a: int, n_b: int) -> np.ndarray:
    """Pearson's chi-square of 2 x B tables given sample a's counts (rows of `counts_a`) and pooled counts."""
    n = n_a + n_b
    expected = pooled * (n_a / n)
    return (n * n / (n_a * n_b)) * np.sum((counts_a - expected) ** 2 / pooled, axis=-1)


def choose_h(level: float, false_pass_rate: float, minimum: int = 20) -> int:
    """Smallest h >= minimum with P(Binomial(ceil(h/level) - 1, level/2) >= h) <= false_pass_rate/2 (`level`: the
    permutation test's own share)."""
    h = int(minimum)
    while stats.binom.sf(h - 1, math.ceil(h / level) - 1, level / 2) > false_pass_rate / 2:
        h += 1
    return h


def hoeffding_pvalue(counts_a: np.ndarray, counts_b: np.ndarray) -> float:
    """Valid permutation p-value bound for D = max_b |a_b / n_s - pooled_b / N| (n_s the smaller sample):
    P(D >= d) <= 2 B exp(-2 n_s d^2 / (1 - (n_s - 1) / N)) (Hoeffding 1963, Serfling 1974)."""
    pooled = counts_a + counts_b
    n_a, n_b = int(counts_a.sum()), int(counts_b.sum())
    small, n_small = (counts_a, n_a) if n_a <= n_b else (counts_b, n_b)
    n = n_a + n_b
    d = float(np.max(np.abs(small / n_small - pooled / n)))
    finite = 1.0 - (n_small - 1) / n
    return float(min(1.0, 2 * pooled.size * math.exp(-2.0 * n_small * d * d / finite)))


def permutation_pvalue(
    counts_a: np.ndarray, counts_b: np.ndarray, level: float, h: int, rng: np.random.Generator
) -> dict:
    """Sequential Monte-Carlo permutation p-value of Pearson's statistic (see the module docstring)."""
    pooled = counts_a + counts_b
    n_a, n_b = int(counts_a.sum()), int(counts_b.sum())
    small, n_small = (counts_a, n_a) if n_a <= n_b else (counts_b, n_b)
    observed = float(pearson_statistic(small[None, :], pooled, n_small, n_a + n_b - n_small)[0])
    tol = 1e-9 * max(1.0, observed)
    max_draws = math.ceil(h / level) - 1
    exceed = drawn = 0
    while drawn < max_draws and exceed < h:
        size = min(_CHUNK, max_draws - drawn)
        split = rng.multivariate_hypergeometric(pooled, n_small, size=size, method="marginals")
        hits = np.flatnonzero(
            pearson_statistic(split, pooled, n_small, n_a + n_b - n_small) >= observed - tol
        )
        if exceed + hits.size >= h:  # stop at the draw that makes the h-th exceedance
            drawn += int(hits[h - exceed - 1]) + 1
            exceed = h
            break
        exceed += hits.size
        drawn += size
    stopped = exceed >= h
    p_value = h / drawn if stopped else (1 + exceed) / (1 + max_draws)
    return {
        "statistic": observed,
        "p_value": float(min(1.0, p_value)),
        "draws": drawn,
        "exceedances": exceed,
        "stopped_early": stopped,
        "max_draws": max_draws,
        "h": h,
    }


def assert_permutation_homogeneity(
    sample_a: Sequence[Hashable],
    sample_b: Sequence[Hashable],
    false_fail_rate: float,
    *,
    false_pass_rate: float = 0.001,
    min_expected: float = 10.0,
    max_bins: int = 60,
    rng: int | np.random.Generator = 0,
    name: str = "permutation_homogeneity",
) -> TestResult:
    """Do `sample_a` and `sample_b` come from one law? Exact permutation test on pooled-sample bins."""
    level, be = check_error_rates(false_fail_rate, false_pass_rate)
    m = check_positive_number(min_expected, "min_expected")
    if int(max_bins) != max_bins or max_bins < 2:
        raise ValueError(f"max_bins must be an integer >= 2, got {max_bins!r}")
    n_a, n_b = len(sample_a), len(sample_b)
    if n_a == 0 or n_b == 0:
        raise ValueError(
            f"sample_a/sample_b: both samples must be non-empty (n_a={n_a}, n_b={n_b})"
        )
    n = n_a + n_b
    min_pooled = max(m * n / min(n_a, n_b), n / max_bins)
    a, b, bins = pooled_bins(sample_a, sample_b, min_pooled)
    n_eff = n_a * n_b / n
    details = {
        "n_a": n_a,
        "n_b": n_b,
        "n_eff": n_eff,
        "n_bins": len(bins),
        "min_pooled_count": min_pooled,
        "bins": [[_show(c) for c in cats[:5]] for cats in bins[:20]],
        "counts_a": a.tolist()[:20],
        "counts_b": b.tolist()[:20],
        "detectable_metric": "TV between the two laws on the pooled-sample bins (chi-square planning)",
    }
    if len(bins) == 1:
        msg = f"{name}: PASS: both samples fall in one pooled bin ({n_a} + {n_b} samples): nothing to compare"
        return TestResult(name, 0.0, 1.0, n, level, be, float("nan"), True, msg, details)
    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    bound = hoeffding_pvalue(a, b)
    if bound <= level / 2:
        mc = {
            "statistic": float(pearson_statistic(a[None, :], a + b, n_a, n_b)[0]),
            "p_value": 1.0,
            "draws": 0,
        }
    else:
        mc = permutation_pvalue(a, b, level / 2, choose_h(level / 2, be), g)
    p_value = float(min(1.0, 2 * min(bound, mc["p_value"])))
    tv = min_discrepancy_permutation_homogeneity(n_a, n_b, len(bins), level, be)
    passed = bool(p_value > level)
    worst = int(np.argmax(np.abs(a / n_a - b / n_b)))
    msg = (
        f"{name}: {'PASS' if passed else 'FAIL'}: chi2={mc['statistic']:.4g} p={p_value:.3g} "
        f"(Hoeffding bound {bound:.3g}, {mc['draws']} permutations; false_fail_rate={level:.3g}, n_a={n_a}, "
        f"n_b={n_b}, {len(bins)} bins); "
        f"detects binned TV >= {tv:.3g} w.p. >= {1 - be:g}"
    )
    if not passed:
        msg += (
            f"; most different bin {[_show(c) for c in bins[worst][:3]]}: "
            f"{a[worst] / n_a:.3f} (first) vs {b[worst] / n_b:.3f} (second)"
        )
    details.update(
        mc,
        p_value=p_value,
        p_value_permutation=mc["p_value"],
        p_value_hoeffding=bound,
        worst_bin=worst,
    )
    return TestResult(name, mc["statistic"], p_value, n, level, be, tv, passed, msg, details)


def _show(cat: Any) -> Any:
    """A category as JSON: END (None) as "<end>", tuples as lists."""
    if isinstance(cat, tuple):
        return [_show(c) for c in cat]
    return "<end>" if cat is None else int(cat)


def min_discrepancy_permutation_homogeneity(
    n_a: int, n_b: int, n_bins: int, false_fail_rate: float, false_pass_rate: float = 0.001
) -> float:
    """Binned TV between the two laws that `assert_permutation_homogeneity` with n_a + n_b samples on n_bins
    pooled bins detects w.p. >= 1 - false_pass_rate: chi-square planning at n_eff = n_a n_b / (n_a + n_b), level
    false_fail_rate / 4 and false_pass_rate / 2 (the other half is the Monte-Carlo step's, see `choose_h`)."""
    n_eff = n_a * n_b / (n_a + n_b)
    return min_discrepancy_chisquare_gof(n_eff, n_bins, false_fail_rate / 4, false_pass_rate / 2)


def min_num_samples_permutation_homogeneity(
    discrepancy: float, n_bins: int, false_fail_rate: float, false_pass_rate: float = 0.001
) -> int:
    """Samples per side (equal sizes, so n_eff = n / 2) for `assert_permutation_homogeneity` to detect binned TV
    >= discrepancy on n_bins pooled bins w.p. >= 1 - false_pass_rate."""
    return 2 * min_num_samples_chisquare_gof(
        discrepancy, n_bins, false_fail_rate / 4, false_pass_rate / 2
    )
