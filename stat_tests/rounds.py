"""Tests on N, the number of tokens emitted per speculative round (N in 1..k+1)."""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ..reference.validation import as_prob_vector, check_error_rates, check_int_array

from .gof import chisquare_gof
from .result import TestResult


def tokens_per_round_test(counts_N=None, law=None, false_fail_rate=None, *, false_pass_rate: float = 0.001,
                          min_expected: float = 20.0, method: str = "pearson",
                          name: str = "tokens_per_round") -> TestResult:
    """Chi-square of observed N values (ints in 1..k+1) against the exact law
    ``law[n-1] = P(N = n)``; an N with law 0 fails the hard zero check."""
    lw = as_prob_vector(law, "law")
    N = check_int_array(counts_N, "counts_N", lo=1, hi=lw.size + 1)
    try:
        return chisquare_gof(N - 1, lw, false_fail_rate, false_pass_rate=false_pass_rate, min_expected=min_expected,
                             method=method, name=name)
    except ValueError as e:  # name the caller's argument, not the internal one
        raise ValueError(str(e).replace("samples", "counts_N")) from None


def mean_tokens_test(N=None, expected_mean=None, expected_variance=None, false_fail_rate=None, *,
                     false_pass_rate: float = 0.001, method: str = "z", support: tuple | None = None,
                     name: str = "mean_tokens") -> TestResult:
    """Two-sided test of mean(N) against the exact mean with the exact variance.

    "z": normal approximation (CLT; fine for false_fail_rate >= 1e-4 with n in the thousands).
    "bernstein": a rigorous (conservative) Bernstein-bound p-value, needs
    ``support=(lo, hi)`` bounding N.  detectable_tv is NaN (a mean test bounds the mean
    shift, not TV); details['detectable_mean_shift'] holds the shift found w.p. >= 1-false_pass_rate.
    """
    a, be = check_error_rates(false_fail_rate, false_pass_rate)
    x = check_int_array(N, "N", lo=0).astype(np.float64)
    n = x.size
    if n < 2:
        raise ValueError(f"N: n={n} too small (need >= 2)")
    try:
        mu, var = float(expected_mean), float(expected_variance)
    except (TypeError, ValueError):
        raise ValueError("expected_mean and expected_variance must be numbers") from None
    if not math.isfinite(mu):
        raise ValueError(f"expected_mean must be finite, got {expected_mean!r}")
    if not math.isfinite(var) or var <= 0:
        raise ValueError(f"expected_variance must be a positive number, got {expected_variance!r}")
    sd = math.sqrt(var / n)
    diff = float(x.mean() - mu)
    z = diff / sd
    if method == "z":
        pval = float(min(1.0, 2.0 * stats.norm.sf(abs(z))))
        shift = (stats.norm.isf(a / 2) + stats.norm.isf(be)) * sd
    elif method == "bernstein":
        if support is None or len(support) != 2 or not support[0] < support[1]:
            raise ValueError(f"support must be (lo, hi) with lo < hi for method='bernstein', got {support!r}")
        lo, hi = float(support[0]), float(support[1])
        if x.min() < lo or x.max() > hi:
            raise ValueError(f"N has values outside support {support!r}")
        b = max(hi - mu, mu - lo)
        t = abs(diff)
        pval = float(min(1.0, 2.0 * math.exp(-n * t * t / (2.0 * var + 2.0 * b * t / 3.0))))
        # shift s.t. (bound at the threshold) + (Bernstein miss prob) stays controlled
        def thresh(level):
            L = math.log(2.0 / level)
            return (b * L / 3.0 + math.sqrt((b * L / 3.0) ** 2 + 2.0 * n * var * L)) / n
        shift = thresh(a) + thresh(be)
    else:
        raise ValueError(f"method must be 'z' or 'bernstein', got {method!r}")
    passed = bool(pval >= a)
    msg = (f"{name}: {'PASS' if passed else 'FAIL'}: mean={x.mean():.5g} vs {mu:.5g} z={z:+.3f} "
           f"p={pval:.3g} (false_fail_rate={a:.3g}, n={n}); detects mean shift >= {shift:.3g} w.p. >= {1 - be:g}")
    return TestResult(name, z, pval, n, a, be, float("nan"), passed, msg,
                      {"method": method, "mean": float(x.mean()), "expected_mean": mu,
                       "expected_variance": var, "detectable_mean_shift": float(shift),
                       "detectable_metric": "absolute shift of E[N]"})
