"""Tests on N, the number of tokens emitted per speculative round (N in 1..k+1)."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ..reference.validation import as_prob_vector, check_error_rates, check_int_array
from .gof import assert_chisquare_gof, gof_bins
from .power import min_discrepancy_chisquare_gof, plan_gof
from .result import TestResult
from .search import fewest_samples


def assert_tokens_per_round(
    counts_N=None,
    law=None,
    false_fail_rate=None,
    *,
    false_pass_rate: float = 0.001,
    min_expected: float = 20.0,
    method: str = "pearson",
    name: str = "tokens_per_round",
) -> TestResult:
    """Chi-square of observed N values (ints in 1..k+1) against the exact law
    ``law[n-1] = P(N = n)``; an N with law 0 fails the hard zero check. Power: `min_discrepancy_tokens_per_round`."""
    lw = as_prob_vector(law, "law")
    N = check_int_array(counts_N, "counts_N", lo=1, hi=lw.size + 1)
    try:
        return assert_chisquare_gof(
            N - 1,
            lw,
            false_fail_rate,
            false_pass_rate=false_pass_rate,
            min_expected=min_expected,
            method=method,
            name=name,
        )
    except ValueError as e:  # name the caller's argument, not the internal one
        raise ValueError(str(e).replace("samples", "counts_N")) from None


def assert_mean_tokens(
    N=None,
    expected_mean=None,
    expected_variance=None,
    false_fail_rate=None,
    *,
    false_pass_rate: float = 0.001,
    method: str = "z",
    support: tuple | None = None,
    name: str = "mean_tokens",
) -> TestResult:
    """Two-sided test of mean(N) against the exact mean with the exact variance.

    "z": normal approximation (CLT; fine for false_fail_rate >= 1e-4 with n in the thousands).
    "bernstein": a rigorous (conservative) Bernstein-bound p-value, needs
    ``support=(lo, hi)`` bounding N.  detectable_tv is NaN (a mean test bounds the mean
    shift, not TV); details['detectable_mean_shift'] holds the shift found w.p. >= 1-false_pass_rate
    (`min_discrepancy_mean_tokens`).
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
        shift = _mean_shift(n, var, a, be, "z")
    elif method == "bernstein":
        if support is None or len(support) != 2 or not support[0] < support[1]:
            raise ValueError(
                f"support must be (lo, hi) with lo < hi for method='bernstein', got {support!r}"
            )
        lo, hi = float(support[0]), float(support[1])
        if x.min() < lo or x.max() > hi:
            raise ValueError(f"N has values outside support {support!r}")
        b = max(hi - mu, mu - lo)
        t = abs(diff)
        pval = float(min(1.0, 2.0 * math.exp(-n * t * t / (2.0 * var + 2.0 * b * t / 3.0))))
        shift = _mean_shift(n, var, a, be, "bernstein", b)
    else:
        raise ValueError(f"method must be 'z' or 'bernstein', got {method!r}")
    passed = bool(pval >= a)
    msg = (
        f"{name}: {'PASS' if passed else 'FAIL'}: mean={x.mean():.5g} vs {mu:.5g} z={z:+.3f} "
        f"p={pval:.3g} (false_fail_rate={a:.3g}, n={n}); detects mean shift >= {shift:.3g} w.p. >= {1 - be:g}"
    )
    return TestResult(
        name,
        z,
        pval,
        n,
        a,
        be,
        float("nan"),
        passed,
        msg,
        {
            "method": method,
            "mean": float(x.mean()),
            "expected_mean": mu,
            "expected_variance": var,
            "detectable_mean_shift": float(shift),
            "detectable_metric": "absolute shift of E[N]",
        },
    )


def _mean_shift(
    n: int, var: float, a: float, be: float, method: str, b: float | None = None
) -> float:
    """The shift of E[N] that `assert_mean_tokens` detects w.p. >= 1 - be ("bernstein": b bounds |N - mean|)."""
    if method == "z":
        sd = math.sqrt(var / n)
        return (stats.norm.isf(a / 2) + stats.norm.isf(be)) * sd

    if b is None:
        raise ValueError("method='bernstein' needs b, the bound on |N - mean|")
    bound = b

    # shift s.t. (bound at the threshold) + (Bernstein miss prob) stays controlled
    def thresh(level: float) -> float:
        L = math.log(2.0 / level)
        return (bound * L / 3.0 + math.sqrt((bound * L / 3.0) ** 2 + 2.0 * n * var * L)) / n

    return thresh(a) + thresh(be)


def _mean_inputs(
    expected_mean, expected_variance, method, support
) -> tuple[float, float, float | None]:
    mu, var = float(expected_mean), float(expected_variance)
    if not (math.isfinite(mu) and math.isfinite(var) and var > 0):
        raise ValueError(
            f"expected_mean must be finite and expected_variance positive, got {mu!r}, {var!r}"
        )
    if method == "z":
        return mu, var, None
    if method != "bernstein":
        raise ValueError(f"method must be 'z' or 'bernstein', got {method!r}")
    if support is None or len(support) != 2 or not support[0] < support[1]:
        raise ValueError(
            f"support must be (lo, hi) with lo < hi for method='bernstein', got {support!r}"
        )
    return mu, var, max(float(support[1]) - mu, mu - float(support[0]))


def min_discrepancy_mean_tokens(
    n: int,
    expected_mean: float,
    expected_variance: float,
    false_fail_rate: float,
    false_pass_rate: float = 0.001,
    method: str = "z",
    support: tuple | None = None,
) -> float:
    """The absolute shift of E[N] that `assert_mean_tokens` on n rounds detects w.p. >= 1 - false_pass_rate
    (a mean shift, not a TV: its ``details['detectable_mean_shift']``)."""
    a, be = check_error_rates(false_fail_rate, false_pass_rate)
    if not (isinstance(n, (int, np.integer)) and n >= 2):
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    _, var, b = _mean_inputs(expected_mean, expected_variance, method, support)
    return float(_mean_shift(int(n), var, a, be, method, b))


def min_num_samples_mean_tokens(
    discrepancy: float,
    expected_mean: float,
    expected_variance: float,
    false_fail_rate: float,
    false_pass_rate: float = 0.001,
    method: str = "z",
    support: tuple | None = None,
    limit: int = 10**9,
) -> int | None:
    """Fewest rounds at which `min_discrepancy_mean_tokens` <= discrepancy (a shift of E[N]); None past `limit`."""
    if not (math.isfinite(discrepancy) and discrepancy > 0):
        raise ValueError(f"discrepancy must be a positive number, got {discrepancy!r}")

    def shift(n: int) -> float:
        return min_discrepancy_mean_tokens(
            n, expected_mean, expected_variance, false_fail_rate, false_pass_rate, method, support
        )

    return fewest_samples(lambda n: shift(n) <= discrepancy, 2, limit)  # both shifts fall with n


def min_discrepancy_tokens_per_round(
    n: int,
    law,
    false_fail_rate: float,
    false_pass_rate: float = 0.001,
    min_expected: float = 20.0,
    method: str = "pearson",
) -> float:
    """Binned TV of the law of N that `assert_tokens_per_round` on n rounds detects w.p. >= 1 - false_pass_rate:
    chi-square planning on the bins the test pools from `law` and n (0 for a point mass, as the test reports)."""
    lw = as_prob_vector(law, "law")
    if np.count_nonzero(lw) == 1:
        return 0.0
    bins = gof_bins(lw, int(n), float(min_expected), method)[1].size
    if bins < 2:
        raise ValueError(f"n={n} too small: fewer than 2 bins reach min_expected={min_expected:g}")
    return min_discrepancy_chisquare_gof(
        n, bins, false_fail_rate, false_pass_rate, tail="lr_bound" if method == "lr" else "chi2"
    )


def min_num_samples_tokens_per_round(
    discrepancy: float,
    law,
    false_fail_rate: float,
    false_pass_rate: float = 0.001,
    min_expected: float = 20.0,
    method: str = "pearson",
) -> int:
    """Rounds `assert_tokens_per_round` needs to detect binned TV >= discrepancy w.p. >= 1 - false_pass_rate:
    `plan_gof` on the law of N (bins and n together)."""
    return plan_gof(
        law,
        discrepancy,
        false_fail_rate,
        false_pass_rate,
        min_expected,
        tail="lr_bound" if method == "lr" else "chi2",
    )[0]
