"""Two-sample chi-square homogeneity test when the reference is known only via samples.

Bins are formed from the *pooled* sample (p-free): categories sorted by pooled count and
merged greedily until the smaller sample's expected count reaches min_expected.  Under
H0 the pooled counts carry no information about how they split between the samples, so
conditioning on them (and hence on the bins) leaves the usual chi-square null intact.

Power: the noncentrality is n_eff * w**2 with n_eff = n_a*n_b/(n_a+n_b) and
w**2 = sum_b (a_b - b_b)**2 / pi_b (pi = pooled proportions), and w >= 2*TV_binned(a, b),
so `min_discrepancy_chisquare_gof(n_eff, bins, ...)` is the binned TV detected w.p. >= 1 - false_pass_rate
(`min_discrepancy_two_sample_chisquare`; `min_num_samples_two_sample_chisquare` plans equal sample sizes).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from ..reference.validation import check_error_rates, check_int_array, check_positive_number

from .binning import pool_bins
from .power import min_discrepancy_chisquare_gof, min_num_samples_chisquare_gof
from .result import TestResult


def assert_two_sample_chisquare(
    samples_a=None,
    samples_b=None,
    false_fail_rate=None,
    *,
    false_pass_rate: float = 0.001,
    min_expected: float = 20.0,
    name: str = "two_sample_chisquare",
) -> TestResult:
    """Chi-square homogeneity of two token samples on pooled-sample bins."""
    a_, be = check_error_rates(false_fail_rate, false_pass_rate)
    m = check_positive_number(min_expected, "min_expected")
    xa = check_int_array(samples_a, "samples_a", lo=0)
    xb = check_int_array(samples_b, "samples_b", lo=0)
    na, nb = xa.size, xb.size
    if na == 0 or nb == 0:
        raise ValueError(
            f"samples_a/samples_b: both samples must be non-empty (n_a={na}, n_b={nb})"
        )
    V = int(max(xa.max(), xb.max())) + 1
    ca, cb = np.bincount(xa, minlength=V), np.bincount(xb, minlength=V)
    pooled = ca + cb
    N = na + nb
    n_eff = na * nb / N
    if np.count_nonzero(pooled) == 1:
        msg = f"{name}: PASS: both samples consist of the single token {int(np.argmax(pooled))}"
        return TestResult(name, 0.0, 1.0, N, a_, be, float("nan"), True, msg, {"n_bins": 1})
    bin_of, bin_prob = pool_bins(pooled / N, min(na, nb), m)
    B = bin_prob.size
    if B < 2:
        raise ValueError(
            f"samples_a/samples_b: too few samples (n_a={na}, n_b={nb}) for 2 bins "
            f"at min_expected={m:g}"
        )
    pos = bin_of >= 0
    oa = np.bincount(bin_of[pos], weights=ca[pos], minlength=B)
    ob = np.bincount(bin_of[pos], weights=cb[pos], minlength=B)
    tot = oa + ob
    ea, eb = tot * na / N, tot * nb / N
    stat = float(np.sum((oa - ea) ** 2 / ea) + np.sum((ob - eb) ** 2 / eb))
    df = B - 1
    pval = float(stats.chi2.sf(stat, df))
    d = min_discrepancy_two_sample_chisquare(na, nb, B, a_, be)
    passed = bool(pval >= a_)
    msg = (
        f"{name}: {'PASS' if passed else 'FAIL'}: chi2={stat:.4g} df={df} p={pval:.3g} "
        f"(false_fail_rate={a_:.3g}, n_a={na}, n_b={nb}, {B} bins); detects binned TV >= {d:.3g} "
        f"w.p. >= {1 - be:g}"
    )
    return TestResult(
        name,
        stat,
        pval,
        N,
        a_,
        be,
        d,
        passed,
        msg,
        {
            "df": df,
            "n_bins": B,
            "n_a": na,
            "n_b": nb,
            "n_eff": n_eff,
            "min_bin_expected": float(min(ea.min(), eb.min())),
            "detectable_metric": "TV between the two laws on the pooled-sample bins",
        },
    )


def min_discrepancy_two_sample_chisquare(
    n_a: int, n_b: int, n_bins: int, false_fail_rate: float, false_pass_rate: float = 0.001
) -> float:
    """Binned TV between the two laws that `assert_two_sample_chisquare` with n_a + n_b samples on n_bins pooled
    bins detects w.p. >= 1 - false_pass_rate: chi-square planning at n_eff = n_a n_b / (n_a + n_b)."""
    return min_discrepancy_chisquare_gof(
        n_a * n_b / (n_a + n_b), n_bins, false_fail_rate, false_pass_rate
    )


def min_num_samples_two_sample_chisquare(
    discrepancy: float, n_bins: int, false_fail_rate: float, false_pass_rate: float = 0.001
) -> int:
    """Samples per side (equal sizes, so n_eff = n / 2) for `assert_two_sample_chisquare` to detect binned TV
    >= discrepancy on n_bins pooled bins w.p. >= 1 - false_pass_rate."""
    return 2 * min_num_samples_chisquare_gof(discrepancy, n_bins, false_fail_rate, false_pass_rate)
