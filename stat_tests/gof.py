"""Goodness of fit of token samples against a known discrete distribution p.

Pearson chi-square (or G-test) on bins formed from p and n alone (see `binning`),
preceded by a hard check that no zero-probability token was emitted.

method="lr" (what the conformance suite uses): G with a proven tail (`lr_tail`: exact for <= 3 bins, Agrawal's
bound otherwise), so the false-fail rate holds at every n and level.  The asymptotic methods below are kept for
callers that want them.

Tail calibration of "pearson" / "g" (documented regime): every bin has expected count >= min_expected
(default 20).  The Pearson p-value uses a scaled chi-square a*chi2(nu) matching the
*exact* null mean (df) and variance 2*df + (sum_b 1/p_b - B**2 - 2B + 2)/n of the
statistic whenever that variance exceeds 2*df (rare / unequal bins), and the plain
chi-square otherwise; it is never smaller than the plain asymptotic p-value.  The G
statistic uses Williams' correction G / (1 + (B+1)/(6n)).  Measured calibration down to
false_fail_rate = 1e-5 is in benchmarks/results/stat_calibration.json; below that, raise
min_expected (the discrepancy shrinks like 1/min_expected) or use
`assert_multinomial_exact` when n*V is small.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ..reference.validation import (
    as_prob_vector,
    check_counts,
    check_error_rates,
    check_int_array,
    check_positive_number,
    check_rate,
)

from .binning import pool_bins
from .lr_tail import lr_pvalue
from .power import min_discrepancy_chisquare_gof
from .result import TestResult


#: "pearson" (asymptotic, moment-corrected), "g" (asymptotic, Williams), "lr" (G with a proven tail).
GOF_METHODS = ("pearson", "g", "lr")


def _counts_from(samples, counts, V: int) -> np.ndarray:
    """Per-token counts from token ids or from counts=, refusing an empty sample."""
    if (samples is None) == (counts is None):
        raise ValueError(
            "samples: pass exactly one of samples (token ids) or counts= (per-token counts)"
        )
    if samples is not None:
        c = np.bincount(check_int_array(samples, "samples", lo=0, hi=V), minlength=V)
    else:
        c = check_counts(counts, V, "counts")
    if int(c.sum()) == 0:
        raise ValueError("samples: need at least one sample (n too small)")
    return c


def _zero_result(
    counts: np.ndarray, p: np.ndarray, false_pass_rate: float, name: str
) -> TestResult:
    n = int(counts.sum())
    zero = p == 0
    bad = np.flatnonzero(zero & (counts > 0))
    n_bad = int(counts[bad].sum())
    # A deviation putting mass m on zero-probability tokens is missed w.p. (1-m)^n.
    m_star = min_discrepancy_within_support(n, false_pass_rate) if n > 0 else float("nan")
    details = {
        "detectable_zero_mass": m_star,
        "n_zero_prob_tokens_emitted": int(bad.size),
        "detectable_metric": "mass on zero-probability tokens",
    }
    if bad.size:
        top = bad[np.argsort(-counts[bad], kind="stable")][:5]
        listing = ", ".join(f"token {int(t)} x{int(counts[t])}" for t in top)
        more = f" (+{bad.size - top.size} more tokens)" if bad.size > top.size else ""
        details["offending_tokens"] = {int(t): int(counts[t]) for t in top}
        msg = f"{name}: FAIL: {n_bad} of {n} samples have probability 0 under p: {listing}{more}"
        return TestResult(
            name, float(n_bad), 0.0, n, 0.0, false_pass_rate, float("nan"), False, msg, details
        )
    msg = f"{name}: PASS: no zero-probability token among {n} samples"
    return TestResult(name, 0.0, 1.0, n, 0.0, false_pass_rate, float("nan"), True, msg, details)


def checked_gof_inputs(samples, counts, p, false_fail_rate, false_pass_rate, name: str):
    """The shared start of the goodness-of-fit tests: (p, false_fail_rate, false_pass_rate, counts, zero-check result)."""
    pp = as_prob_vector(p, "p")
    a, be = check_error_rates(false_fail_rate, false_pass_rate)
    c = _counts_from(samples, counts, pp.size)
    return pp, a, be, c, _zero_result(c, pp, be, name)


def assert_within_support(
    samples=None,
    p=None,
    *,
    counts=None,
    false_pass_rate: float = 0.001,
    name: str = "zero_probability_check",
) -> TestResult:
    """Hard check: fail if any token with p == 0 appears (false-fail rate exactly 0).

    The message names the offending tokens and their counts.  ``detectable_tv`` is NaN (no TV statement);
    details['detectable_zero_mass'] is the zero-set mass caught w.p. >= 1 - false_pass_rate
    (`min_discrepancy_within_support`, `min_num_samples_within_support`).
    """
    pp = as_prob_vector(p, "p")
    be = check_rate(false_pass_rate, "false_pass_rate")
    return _zero_result(_counts_from(samples, counts, pp.size), pp, be, name)


def pearson_pvalue(stat: float, bin_prob: np.ndarray, n: int) -> tuple[float, float, dict]:
    """(corrected p-value, plain chi-square p-value, info) for Pearson's statistic."""
    B = bin_prob.size
    df = B - 1
    plain = float(stats.chi2.sf(stat, df))
    var = 2.0 * df + (float(np.sum(1.0 / bin_prob)) - B * B - 2.0 * B + 2.0) / n
    if var > 2.0 * df:
        scale = var / (2.0 * df)
        nu = 2.0 * df * df / var
        corrected = float(stats.chi2.sf(stat / scale, nu))
        return max(corrected, plain), plain, {"null_variance": var, "scale": scale, "nu": nu}
    return plain, plain, {"null_variance": var, "scale": 1.0, "nu": float(df)}


def _binned_statistic(method: str, obs: np.ndarray, exp: np.ndarray, bin_prob: np.ndarray, n: int):
    """(statistic, p-value, plain chi-square p-value, details) of Pearson's X^2, the Williams-corrected G, or
    G with a proven tail ("lr": exact for <= 3 bins, Agrawal's bound otherwise; see `lr_tail`)."""
    if method == "lr":
        pval, stat, how = lr_pvalue(obs, bin_prob)
        return (
            stat,
            pval,
            float(stats.chi2.sf(stat, bin_prob.size - 1)),
            {
                "tail": how,
                "false_fail_rate_is": "proven (exact tail)"
                if how == "exact"
                else "proven (Agrawal bound)",
            },
        )
    if method == "pearson":
        stat = float(np.sum((obs - exp) ** 2 / exp))
        pval, plain, info = pearson_pvalue(stat, bin_prob, n)
        return stat, pval, plain, info
    df = bin_prob.size - 1
    nz = obs > 0
    stat = float(2.0 * np.sum(obs[nz] * np.log(obs[nz] / exp[nz])))
    q = 1.0 + (bin_prob.size + 1.0) / (6.0 * n)
    return (
        stat,
        float(stats.chi2.sf(stat / q, df)),
        float(stats.chi2.sf(stat, df)),
        {"williams_q": q},
    )


def gof_bins(
    pp: np.ndarray, n: int, min_expected: float, method: str
) -> tuple[np.ndarray, np.ndarray]:
    """The p-only bins; for "lr" with fewer than 2 pooled bins, the mode against the rest (its exact two-bin
    tail needs no minimum count)."""
    bin_of_token, bin_prob = pool_bins(pp, n, min_expected)
    if bin_prob.size < 2 and method == "lr":
        bin_of_token = np.where(pp > 0, 1, -1)
        bin_of_token[int(np.argmax(pp))] = 0
        bin_prob = np.array([pp.max(), 1.0 - pp.max()])
    return bin_of_token, bin_prob


def assert_chisquare_gof(
    samples=None,
    p=None,
    false_fail_rate=None,
    *,
    counts=None,
    false_pass_rate: float = 0.001,
    min_expected: float = 20.0,
    method: str = "pearson",
    name: str = "chisquare_gof",
) -> TestResult:
    """Chi-square goodness of fit of token samples (or per-token ``counts=``) to p.

    Runs the zero-probability hard check first (a p == 0 token fails the test outright),
    pools bins from p and n only, then Pearson ("pearson"), likelihood-ratio ("g"), or likelihood-ratio with
    a proven tail ("lr": its false-fail rate is a theorem at every n and level; see `lr_tail`).
    ``detectable_tv`` is the binned-TV deviation detected w.p. >= 1 - false_pass_rate
    (`min_discrepancy_chisquare_gof`; n for a target: `min_num_samples_chisquare_gof`, `plan_gof`).
    """
    m = check_positive_number(min_expected, "min_expected")
    if method not in GOF_METHODS:
        raise ValueError(f"method must be one of {GOF_METHODS}, got {method!r}")
    pp, a, be, c, zr = checked_gof_inputs(
        samples, counts, p, false_fail_rate, false_pass_rate, name
    )
    n = int(c.sum())
    if not zr.passed:
        return TestResult(
            name,
            float("inf"),
            0.0,
            n,
            a,
            be,
            float("nan"),
            False,
            zr.message,
            {**zr.details, "method": method},
        )
    support = int(np.count_nonzero(pp))
    if support == 1:
        msg = f"{name}: PASS: p is a point mass and every one of {n} samples hit it"
        return TestResult(
            name, 0.0, 1.0, n, a, be, 0.0, True, msg, {"method": method, "n_bins": 1, "df": 0}
        )
    bin_of_token, bin_prob = gof_bins(pp, n, m, method)
    B = bin_prob.size
    if B < 2:
        raise ValueError(
            f"samples: n={n} too small: fewer than 2 bins reach min_expected={m:g}; "
            f"need n >= about {int(np.ceil(2 * m / max(1e-300, 1.0 - pp.max())))}"
        )
    pos = bin_of_token >= 0
    obs = np.bincount(bin_of_token[pos], weights=c[pos], minlength=B)
    exp = n * bin_prob
    df = B - 1
    resid = (obs - exp) / np.sqrt(exp)
    stat, pval, plain, info = _binned_statistic(method, obs, exp, bin_prob, n)
    d = min_discrepancy_chisquare_gof(n, B, a, be, tail="lr_bound" if method == "lr" else "chi2")
    passed = bool(pval >= a)
    worst = int(np.argmax(np.abs(resid)))
    details = {
        "method": method,
        "df": df,
        "n_bins": B,
        "min_expected": m,
        "min_bin_expected": float(exp.min()),
        "n_tokens_pooled": int(
            np.count_nonzero(np.bincount(bin_of_token[pos], minlength=B)[bin_of_token[pos]] > 1)
        ),
        "p_value_chi2_plain": plain,
        "worst_bin": worst,
        "worst_bin_std_residual": float(resid[worst]),
        "worst_bin_tokens": np.flatnonzero(bin_of_token == worst)[:10].tolist(),
        "detectable_metric": "TV on the pooled bins (w = 2*TV planning)",
        **info,
    }
    # a theorem (lr_tail): the rate at which an exact implementation fails this check
    if method == "lr":
        details["realised_false_fail_rate_at_most"] = a
    verdict = "PASS" if passed else "FAIL"
    msg = (
        f"{name}: {verdict}: {method} stat={stat:.4g} df={df} p={pval:.3g} "
        f"(false_fail_rate={a:.3g}, n={n}, {B} bins); detects binned TV >= {d:.3g} w.p. >= {1 - be:g}"
    )
    if not passed:
        msg += (
            f"; worst bin {worst} (tokens {details['worst_bin_tokens'][:5]}) z={resid[worst]:+.2f}"
        )
    return TestResult(name, stat, pval, n, a, be, d, passed, msg, details)


def min_discrepancy_within_support(n: int, false_pass_rate: float = 0.001) -> float:
    """Mass on zero-probability tokens that `assert_within_support` with n samples catches w.p. >= 1 -
    false_pass_rate: a deviation putting mass m there is missed w.p. (1 - m)^n. Not a TV on bins (the hard check
    has no false-fail rate and no binned statement)."""
    if not (isinstance(n, (int, np.integer)) and n >= 1):
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    be = check_rate(false_pass_rate, "false_pass_rate")
    return float(1.0 - be ** (1.0 / n))


def min_num_samples_within_support(discrepancy: float, false_pass_rate: float = 0.001) -> int:
    """Fewest samples at which `min_discrepancy_within_support` <= discrepancy (a mass on zero-probability tokens)."""
    if not 0.0 < discrepancy <= 1.0:
        raise ValueError(f"discrepancy must be in (0, 1], got {discrepancy!r}")
    be = check_rate(false_pass_rate, "false_pass_rate")
    if discrepancy == 1.0:
        return 1
    n = max(1, math.ceil(math.log(be) / math.log1p(-discrepancy)))
    # rounding of the logs
    while n > 1 and min_discrepancy_within_support(n - 1, be) <= discrepancy:
        n -= 1
    while min_discrepancy_within_support(n, be) > discrepancy:
        n += 1
    return n
