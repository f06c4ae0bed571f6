"""What a PIT Kolmogorov-Smirnov test rules out about per-token deviations, proven at finite n.

Setting: n PIT values pooled from `units` independent completions (each contributes at most n / units
values; padded positions are exact uniforms), each within `slack` of an exact randomized PIT value. The test
rejects when D > kstwo.isf(false_fail_rate, n) + slack (`pit_uniformity_test`).

**Monotone deviations.** At one position with reference law p (categories in descending p, the tail last)
and candidate law q, the PIT value's CDF is G(t) = t + sum over categories before t of (q - p). When q/p is
monotone along that order (temperature too low or too high, a top-k/top-p/min-p truncation the reference
does not apply, a pull toward the argmax such as greedy drafts verified as sampled), G - t is concave (or
convex), zero at both ends, with extremum +-TV(p, q); so |G(1/2) - 1/2| >= TV / 2 (the tent under a concave
function). If the direction is the same at every position, the pooled empirical CDF at 1/2 has mean
1/2 +- tv_mean / 2, where tv_mean is the mean per-token TV over the pooled values (a padded value counts 0).
McDiarmid over the completions (each moves F_n(1/2) by <= 1 / units) gives

    P(reject) >= 1 - false_pass_rate   whenever   tv_mean >= 2 * (crit + 2 slack + sqrt(ln(1/false_pass_rate) / (2 units)))

(crit = kstwo.isf(false_fail_rate, n); one slack widens the critical value, the other bounds how far the
rounded values' statistic can fall below the exact one's).

**No test does better in general.** If the direction of the deviation changes with the context, a candidate
with per-token TV eps at every position can have PIT values whose joint law is exactly the null's (a fair
mixture of +eps and -eps deviations is p itself): nothing is ruled out about such deviations at any n. The
proof sits in proofs/ARGUMENT.md (C14), with machine checks.
"""
from __future__ import annotations

import math

from scipy import stats

from ..reference.validation import check_error_rates


def detectable_mean_token_tv(n_values: int, units: int, false_fail_rate: float, false_pass_rate: float = 0.001,
                             slack: float = 0.0) -> float:
    """Smallest mean per-token TV (monotone deviations, one direction) that the PIT KS test rejects with
    probability >= 1 - false_pass_rate, for n_values PIT values from `units` independent completions."""
    a, be = check_error_rates(false_fail_rate, false_pass_rate)
    if not (isinstance(n_values, int) and isinstance(units, int) and n_values >= 2 and 1 <= units <= n_values):
        raise ValueError(f"n_values, units: need integers 1 <= units <= n_values, n_values >= 2; got {n_values}, {units}")
    crit = float(stats.kstwo.isf(a, n_values))
    return 2.0 * (crit + 2.0 * float(slack) + math.sqrt(math.log(1.0 / be) / (2.0 * units)))


def units_for_mean_token_tv(target_tv: float, values_per_unit: float, false_fail_rate: float,
                            false_pass_rate: float = 0.001, slack: float = 0.0, limit: int = 10**9) -> int | None:
    """Fewest completions (each giving `values_per_unit` PIT values) at which `detectable_mean_token_tv` <=
    target_tv; None when no number up to `limit` does (the slack alone may exceed target / 2)."""
    if not (0.0 < target_tv <= 1.0 and values_per_unit >= 1.0):
        raise ValueError(f"target_tv must be in (0, 1] and values_per_unit >= 1, got {target_tv}, {values_per_unit}")

    def reaches(units: int) -> bool:
        n = max(2, int(units * values_per_unit))
        return detectable_mean_token_tv(n, min(units, n), false_fail_rate, false_pass_rate, slack) <= target_tv

    hi = 2
    while not reaches(hi):
        hi *= 2
        if hi > limit:
            return None
    lo = hi // 2
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reaches(mid) else (mid, hi)
    return hi


__all__ = ["detectable_mean_token_tv", "units_for_mean_token_tv"]
