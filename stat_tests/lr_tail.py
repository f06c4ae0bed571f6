"""Tails of the multinomial likelihood-ratio statistic G = 2 n KL(p_hat || p) that are theorems, not asymptotics.

Under H0 the counts x over B bins are Multinomial(n, p).  The p-value P(G(X) >= G(x)) is

* **exact** for B = 2 (X_1 ~ Bin(n, p_1), summed over a window) and B = 3 (the chain X_1 ~ Bin(n, p_1),
  X_2 | X_1 ~ Bin(n - X_1, p_2 / (1 - p_1)): a window of X_1, and for each X_1 two binomial CDFs, since G is
  convex in X_2); the probability outside the window is added whole (it is computed exactly and is < 1e-19), so the value is never smaller than the
  exact tail;
* **bounded** for every B by Agrawal (2020, IEEE Trans. Inf. Theory 66(11), "Finite-sample concentration of
  the multinomial in relative entropy", Thm 1.2): the moment generating function of n KL(p_hat || p) is at
  most that of a Gamma(B - 1, 1) variable, so for t = G/2 > d = B - 1
  P(n KL >= t) <= exp(-(t - d)) (t / d)^d  (the Chernoff bound of that gamma).

The p-value used is min(exact, bound) where the exact sum is cheap, else the bound: both are upper bounds of
the same tail, so P(p-value <= a) <= a at every n, every p and every a -- the false-fail rate is proven.

Power is planned as for Pearson (noncentral chi-square, noncentrality n w^2, w >= 2 TV on the bins) but
against the bound's critical value, which is never below the exact test's: the detectable TV stated for a
check is therefore that of the (less powerful) bound test and holds for the exact one too.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import optimize, special, stats

#: Probability left outside the summation window on each side (added to the p-value whole).
WINDOW_TAIL = 1e-20


def lr_statistic(counts: np.ndarray, bin_prob: np.ndarray) -> float:
    """G = 2 sum_b x_b log(x_b / (n p_b)) (0 log 0 = 0)."""
    x = np.asarray(counts, dtype=np.float64)
    n = x.sum()
    return float(2.0 * np.sum(special.xlogy(x, x / (n * bin_prob))))


def lr_tail_bound(g, n_bins: int):
    """Agrawal's bound on P(G >= g) for B = n_bins bins (valid for every n and p); g may be an array."""
    d = int(n_bins) - 1
    if d < 1:
        raise ValueError(f"n_bins must be >= 2, got {n_bins!r}")
    t = 0.5 * np.asarray(g, dtype=np.float64)
    ratio = np.maximum(t, d) / d
    bound = np.where(t <= d, 1.0, np.minimum(1.0, np.exp(-(t - d) + d * np.log(ratio))))
    return float(bound) if bound.ndim == 0 else bound


@lru_cache(maxsize=4096)
def lr_critical_value(false_fail_rate: float, n_bins: int) -> float:
    """Smallest g with lr_tail_bound(g, n_bins) <= false_fail_rate."""
    d = int(n_bins) - 1
    if d < 1:
        raise ValueError(f"n_bins must be >= 2, got {n_bins!r}")
    if not 0.0 < false_fail_rate < 1.0:
        raise ValueError(f"false_fail_rate must be in (0, 1), got {false_fail_rate!r}")
    target = math.log(1.0 / false_fail_rate)
    f = lambda t: (t - d) - d * math.log(t / d) - target  # noqa: E731 -- increasing for t > d
    hi = 2.0 * d + 2.0 * target + 10.0
    while f(hi) < 0:
        hi *= 2.0
    return 2.0 * optimize.brentq(f, d * (1.0 + 1e-12), hi, xtol=1e-12, rtol=1e-14)


def _window(m: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, mass outside [lo, hi]) of Bin(m, r), elementwise."""
    lo = np.maximum(stats.binom.ppf(WINDOW_TAIL, m, r), 0)
    # m - X ~ Bin(m, 1 - r): accurate far tail
    hi = m - np.maximum(stats.binom.ppf(WINDOW_TAIL, m, 1.0 - r), 0)
    outside = stats.binom.cdf(lo - 1, m, r) + stats.binom.cdf(m - hi - 1, m, 1.0 - r)
    return lo.astype(np.int64), hi.astype(np.int64), np.asarray(outside, dtype=np.float64)


def _tie_floor(g_obs: float) -> float:
    """Outcomes with G >= this count as 'at least as extreme' (rounding never drops a tie)."""
    return g_obs - 1e-9 * max(1.0, abs(g_obs))


def _exact_two(g_obs: float, n: int, p: np.ndarray) -> float:
    lo, hi, outside = _window(np.array([n]), np.array([p[0]]))
    x = np.arange(lo[0], hi[0] + 1, dtype=np.float64)
    g = 2.0 * (special.xlogy(x, x / (n * p[0])) + special.xlogy(n - x, (n - x) / (n * p[1])))
    return float(stats.binom.pmf(x, n, p[0])[g >= _tie_floor(g_obs)].sum() + outside[0])


def _bisect(pred, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Elementwise smallest integer x in [lo, hi] with pred(x) True, pred monotone False..True (hi must hold)."""
    lo, hi = lo.copy(), hi.copy()
    while np.any(lo < hi):
        active = lo < hi
        mid = np.where(active, (lo + hi) // 2, lo)
        ok = pred(np.where(active, mid, 0)) | ~active
        hi = np.where(active & ok, mid, hi)
        lo = np.where(active & ~ok, mid + 1, lo)
    return lo


def _exact_three(g_obs: float, n: int, p: np.ndarray) -> float:
    """P(G >= g_obs) for 3 bins: X_1 over a window; given X_1 = a, G is convex in X_2, so the outcomes with
    G < g_obs are an interval [lo, hi] of X_2 and the conditional tail is two binomial CDFs."""
    lo1, hi1, out1 = _window(np.array([n]), np.array([p[0]]))
    x1 = np.arange(lo1[0], hi1[0] + 1)
    m = n - x1
    r = p[1] / (p[1] + p[2])
    floor = _tie_floor(g_obs)

    def g_of(b):
        c = m - b
        return 2.0 * (
            special.xlogy(x1, x1 / (n * p[0]))
            + special.xlogy(b, b / (n * p[1]))
            + special.xlogy(c, c / (n * p[2]))
        )

    centre = np.clip(np.floor(m * r), 0, m).astype(np.int64)
    centre = np.where(
        (centre + 1 <= m) & (g_of(np.minimum(centre + 1, m)) < g_of(centre)), centre + 1, centre
    )
    inside = g_of(centre) < floor  # some X_2 is less extreme than the observation
    # left end: first b in [0, centre] with G(b) < floor; right end: last b in [centre, m] with G(b) < floor
    left = _bisect(lambda b: g_of(b) < floor, np.zeros_like(centre), centre)
    right = _bisect(lambda b: g_of(b) >= floor, centre, m + 1) - 1
    cond = np.where(
        inside, stats.binom.cdf(left - 1, m, r) + stats.binom.cdf(m - right - 1, m, 1.0 - r), 1.0
    )
    return float(out1[0] + np.sum(stats.binom.pmf(x1, n, p[0]) * cond))


def lr_pvalue(counts: np.ndarray, bin_prob: np.ndarray) -> tuple[float, float, str]:
    """(p-value, G, how) with P(p-value <= a | H0) <= a for every a: `how` is "exact" or "bound"."""
    x = np.asarray(counts, dtype=np.float64)
    pb = np.asarray(bin_prob, dtype=np.float64)
    if pb.size < 2 or np.any(pb <= 0):
        raise ValueError("bin_prob must have >= 2 bins, all of positive probability")
    n = int(round(x.sum()))
    g = lr_statistic(x, pb)
    bound = lr_tail_bound(g, pb.size)
    exact = None
    if pb.size == 2:
        exact = _exact_two(g, n, pb)
    elif pb.size == 3:
        exact = _exact_three(g, n, pb)
    if exact is None:
        return bound, g, "bound"
    return float(min(1.0, exact, bound)), g, "exact"
