"""Exact intervals for a binomial proportion (how often a test rejected, how often a check passed), and the
one-sided rare-event test (a count against a dominating rate)."""

from __future__ import annotations

import numpy as np
from scipy import stats

from ..reference.validation import check_error_rates
from .result import TestResult
from .search import fewest_samples


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval for k successes in n trials at `confidence`."""
    if not (isinstance(n, int) and n >= 1 and isinstance(k, int) and 0 <= k <= n):
        raise ValueError(
            f"k and n must be integers with 0 <= k <= n and n >= 1, got k={k!r}, n={n!r}"
        )
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def rejection_rate(
    p_values: object, level: float, confidence: float = 0.95
) -> tuple[int, int, float, tuple[float, float]]:
    """(rejections, trials, rate, Clopper-Pearson interval at `confidence`) of tests whose p-values fall below
    `level`: how often a calibrated test rejected."""
    pv = np.asarray(p_values, dtype=np.float64)
    k = int(np.count_nonzero(pv < level))
    return k, int(pv.size), k / pv.size, clopper_pearson(k, int(pv.size), confidence)


def assert_rare_events(
    count: int,
    n: int,
    rate_bound: float,
    false_fail_rate: float,
    false_pass_rate: float = 0.001,
    name: str = "rare_events",
) -> TestResult:
    """Do `count` events in `n` trials exceed what a rate of at most `rate_bound` allows? One-sided binomial tail.

    Valid when each trial's event has conditional probability <= rate_bound given the earlier trials (not only
    for independent trials): the count is then stochastically below Binomial(n, rate_bound) (the standard
    coupling), so P(count >= k) <= P(Bin(n, rate_bound) >= k), a proven bound. Symmetrically, if every trial's
    conditional probability is >= r the test rejects with probability >= P(Bin(n, r) >= critical count), which
    gives ``details['detectable_rate']``: the smallest such r caught with probability >= 1 - false_pass_rate."""
    a, be = check_error_rates(false_fail_rate, false_pass_rate)
    if not (isinstance(n, int) and isinstance(count, int) and 0 <= count <= n):
        raise ValueError(f"count, n: need integers 0 <= count <= n, got {count!r}, {n!r}")
    _check_rate_bound(rate_bound)
    p_value = float(stats.binom.sf(count - 1, n, rate_bound)) if count and n else 1.0
    critical, hi = _critical_and_detectable(n, rate_bound, a, be)
    passed = p_value >= a
    message = (
        f"{name}: {'PASS' if passed else 'FAIL'}: {count} events in {n} trials "
        f"(at most rate {rate_bound:.3g} allowed; p = {p_value:.3g}, false_fail_rate={a:.3g}); detects a rate "
        f">= {hi:.3g} w.p. >= {1 - be:g}"
    )
    return TestResult(
        name,
        float(count),
        p_value,
        n,
        a,
        be,
        float("nan"),
        passed,
        message,
        {
            "rate_bound": rate_bound,
            "critical_count": critical,
            "detectable_rate": hi,
            "detectable_metric": "rate of near-zero tokens per position",
        },
    )


def _check_rate_bound(rate_bound: float) -> None:
    if not 0.0 <= rate_bound < 1.0:
        raise ValueError(f"rate_bound must be in [0, 1), got {rate_bound!r}")


def _critical_and_detectable(n: int, rate_bound: float, a: float, be: float) -> tuple[int, float]:
    """(smallest count with tail <= a under Bin(n, rate_bound), the rate caught with probability >= 1 - be)."""
    # smallest count with tail <= a
    critical = int(stats.binom.isf(a, n, rate_bound)) + 1 if n else 1
    lo, hi = rate_bound, 1.0
    for _ in range(60):  # bisection: P(Bin(n, r) >= critical) >= 1 - be
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if n and stats.binom.sf(critical - 1, n, mid) >= 1 - be else (mid, hi)
    return critical, hi


def min_discrepancy_rare_events(
    n: int, rate_bound: float, false_fail_rate: float, false_pass_rate: float = 0.001
) -> float:
    """The smallest per-trial event rate that `assert_rare_events` with n trials catches with probability
    >= 1 - false_pass_rate (its ``details['detectable_rate']``; a rate, not a TV)."""
    a, be = check_error_rates(false_fail_rate, false_pass_rate)
    if not (isinstance(n, int) and n >= 0):
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    _check_rate_bound(rate_bound)
    return _critical_and_detectable(n, rate_bound, a, be)[1]


def min_num_samples_rare_events(
    discrepancy: float,
    rate_bound: float,
    false_fail_rate: float,
    false_pass_rate: float = 0.001,
    limit: int = 10**9,
) -> int | None:
    """Trials at which `min_discrepancy_rare_events` <= discrepancy (a per-trial event rate above rate_bound),
    found by doubling then bisection; None past `limit`. The binomial lattice makes the detectable rate
    not exactly monotone in n, so an n somewhat below the one returned may also do."""
    _check_rate_bound(rate_bound)
    if not rate_bound < discrepancy < 1.0:
        raise ValueError(
            f"discrepancy must be in (rate_bound, 1) = ({rate_bound!r}, 1), got {discrepancy!r}"
        )
    return fewest_samples(
        lambda n: (
            min_discrepancy_rare_events(n, rate_bound, false_fail_rate, false_pass_rate)
            <= discrepancy
        ),
        1,
        limit,
    )
