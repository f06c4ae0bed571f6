"""Sample-size and power planning for chi-square tests, stated in total variation.

Pearson's statistic on B bins under an alternative q is approximately noncentral
chi-square with df = B - 1 and noncentrality n * w**2, where Cohen's
w**2 = sum_b (q_b - p_b)**2 / p_b.  By Cauchy-Schwarz,
(sum_b |q_b - p_b|)**2 <= w**2 * sum_b p_b, i.e. w >= 2 * TV_binned, with equality
when |q_b - p_b| / p_b is constant (the least favourable deviation).  So planning with
w = 2 * epsilon guarantees power 1 - false_pass_rate against every deviation whose TV *measured on
the bins* is >= epsilon.

Pooling caveat: TV_binned <= TV_tokens, and mass moved between tokens that share a bin
is invisible.  The guarantee therefore holds for deviations of TV >= epsilon on the
pooled partition only; a deviation of token-level TV epsilon confined inside pooled
bins can go undetected.  Tokens with expected count >= min_expected are never pooled,
so deviations among frequent tokens are covered at full strength.

The chi-square test's triple (after TFP's statistical_testing.py): `assert_chisquare_gof` (gof.py),
`min_discrepancy_chisquare_gof` and `min_num_samples_chisquare_gof` (here, on a given bin count), and
`plan_gof`, which finds the bin count and n together for a given law p. The other tests' power functions
are built on these two.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import optimize, stats
from statsmodels.stats.power import GofChisquarePower

from ..reference.validation import as_prob_vector, check_error_rates, check_positive_number

from .binning import pool_bins
from .lr_tail import lr_critical_value

#: Which tail a planned test rejects on: "chi2" (asymptotic Pearson) or "lr_bound" (the likelihood-ratio test
#: of `lr_tail`, whose critical value is Agrawal's bound: proven false-fail rate).
TAILS = ("chi2", "lr_bound")


def _check_bins(n_bins) -> int:
    try:
        b = int(n_bins)
    except (TypeError, ValueError):
        raise ValueError(f"n_bins must be an integer >= 2, got {n_bins!r}") from None
    if b != n_bins or b < 2:
        raise ValueError(f"n_bins must be an integer >= 2, got {n_bins!r}")
    return b


@lru_cache(maxsize=4096)
def _noncentrality(df: int, false_fail_rate: float, false_pass_rate: float) -> float:
    """Smallest noncentrality lam with P(ncx2(df, lam) > chi2_{1-false_fail_rate}(df)) >= 1 - false_pass_rate."""
    return noncentrality_at(df, float(stats.chi2.isf(false_fail_rate, df)), false_pass_rate)


@lru_cache(maxsize=4096)
def noncentrality_at(df: int, crit: float, false_pass_rate: float) -> float:
    """Smallest noncentrality lam with P(ncx2(df, lam) > crit) >= 1 - false_pass_rate (a test rejecting above crit)."""
    target = 1.0 - false_pass_rate

    def f(lam: float) -> float:
        return stats.ncx2.sf(crit, df, lam) - target

    hi = max(1.0, crit)
    while f(hi) < 0:
        hi *= 2.0
    lo = 1e-12
    if f(lo) >= 0:
        return lo
    return float(optimize.brentq(f, lo, hi, xtol=1e-12, rtol=1e-13, maxiter=500))


def chisquare_power(n: float, effect_w: float, n_bins: int, false_fail_rate: float) -> float:
    """Power of a chi-square GoF test on n_bins bins (statsmodels GofChisquarePower)."""
    b = _check_bins(n_bins)
    return float(
        GofChisquarePower().power(effect_size=effect_w, nobs=n, alpha=false_fail_rate, n_bins=b)
    )


def min_num_samples_chisquare_gof(
    epsilon_tv: float,
    n_bins: int,
    false_fail_rate: float,
    false_pass_rate: float = 0.001,
    tail: str = "chi2",
) -> int:
    """Smallest n so `assert_chisquare_gof` on n_bins bins detects every binned deviation of TV >= epsilon_tv
    with probability >= 1 - false_pass_rate (plans with w = 2*epsilon; `tail` as in TAILS: "lr_bound" for
    method="lr", i.e. `min_num_samples_multinomial_lr`)."""
    try:
        eps = float(epsilon_tv)
    except (TypeError, ValueError):
        raise ValueError(f"epsilon_tv must be a number in (0, 1], got {epsilon_tv!r}") from None
    if not math.isfinite(eps) or not (0.0 < eps <= 1.0):
        raise ValueError(f"epsilon_tv must be in (0, 1], got {epsilon_tv!r}")
    b = _check_bins(n_bins)
    a, be = check_error_rates(false_fail_rate, false_pass_rate)
    lam = _lam(b, a, be, tail)
    return max(1, int(math.ceil(lam / (4.0 * eps * eps))))


def min_discrepancy_chisquare_gof(
    n: float,
    n_bins: int,
    false_fail_rate: float,
    false_pass_rate: float = 0.001,
    tail: str = "chi2",
) -> float:
    """Smallest binned TV deviation that `assert_chisquare_gof` on n samples and n_bins bins detects with
    probability >= 1 - false_pass_rate (`tail` as in TAILS).  Values > 1 mean: no guarantee."""
    nn = check_positive_number(n, "n")
    b = _check_bins(n_bins)
    a, be = check_error_rates(false_fail_rate, false_pass_rate)
    lam = _lam(b, a, be, tail)
    return 0.5 * math.sqrt(lam / nn)


def _lam(n_bins: int, false_fail_rate: float, false_pass_rate: float, tail: str) -> float:
    """Noncentrality a test on n_bins bins needs for power 1 - false_pass_rate, rejecting on `tail`'s critical value."""
    if tail == "chi2":
        return _noncentrality(n_bins - 1, false_fail_rate, false_pass_rate)
    if tail == "lr_bound":
        return noncentrality_at(
            n_bins - 1, lr_critical_value(false_fail_rate, n_bins), false_pass_rate
        )
    raise ValueError(f"tail must be one of {TAILS}, got {tail!r}")


def plan_gof(
    p,
    epsilon_tv,
    false_fail_rate,
    false_pass_rate=0.001,
    min_expected=20.0,
    tail="chi2",
    max_bins=None,
):
    """(n, n_bins) for `assert_chisquare_gof` against p: iterate n -> bins(n) -> n to a fixed
    point, since pooling makes the bin count depend on n (tail="lr_bound" for method="lr").
    With ``max_bins`` the test pools at min_expected = max(min_expected, n / max_bins). The one planner of
    every conformance level (`conformance.core.planning`). Pearson and G need two bins of min_expected, so n
    starts where p's mode leaves that much outside it; the LR test does not (it falls back to the mode against
    the rest, an exact two-bin tail)."""
    pp = as_prob_vector(p, "p")
    floor = 0 if tail == "lr_bound" else int(np.ceil(2 * min_expected / max(1e-12, 1 - pp.max())))
    n = max(
        min_num_samples_chisquare_gof(epsilon_tv, 2, false_fail_rate, false_pass_rate, tail=tail),
        floor,
    )
    # n only grows, so the result detects epsilon_tv on the bins it is tested with
    for _ in range(200):
        me = min_expected if max_bins is None else max(min_expected, n / max_bins)
        bins = max(2, pool_bins(pp, n, me)[1].size)
        n_new = min_num_samples_chisquare_gof(
            epsilon_tv, bins, false_fail_rate, false_pass_rate, tail=tail
        )
        if n_new <= n:
            return n, bins
        n = n_new
    raise RuntimeError("plan_gof: the sample size did not reach a fixed point")
