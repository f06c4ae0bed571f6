"""The proven-tail goodness-of-fit test as a triple (after TFP's statistical_testing.py):

* `assert_multinomial_lr`        the test: counts vs p on p-only bins, false-fail rate <= false_fail_rate (a theorem:
                                 exact tail for <= 3 bins, Agrawal's bound otherwise, see `lr_tail`);
* `min_discrepancy_multinomial_lr`  the binned TV it detects with n samples w.p. >= 1 - false_pass_rate;
* `min_num_samples_multinomial_lr`  the n it needs to detect a given binned TV w.p. >= 1 - false_pass_rate.

The false-pass side is planned with the noncentral chi-square approximation (as every planner here), against
the bound's critical value, which is never below the exact test's.
"""

from __future__ import annotations

from .gof import assert_chisquare_gof
from .power import min_discrepancy_chisquare_gof, min_num_samples_chisquare_gof
from .result import TestResult


def assert_multinomial_lr(
    samples=None,
    p=None,
    false_fail_rate=None,
    *,
    counts=None,
    false_pass_rate: float = 0.001,
    min_expected: float = 20.0,
    name: str = "multinomial_lr",
) -> TestResult:
    """Zero-probability hard check, then the likelihood-ratio test with a proven tail (see module doc)."""
    return assert_chisquare_gof(
        samples,
        p,
        false_fail_rate,
        counts=counts,
        false_pass_rate=false_pass_rate,
        min_expected=min_expected,
        method="lr",
        name=name,
    )


def min_discrepancy_multinomial_lr(
    n: float, n_bins: int, false_fail_rate: float, false_pass_rate: float = 0.001
) -> float:
    """Smallest binned TV detected w.p. >= 1 - false_pass_rate by `assert_multinomial_lr` on n samples, n_bins bins."""
    return min_discrepancy_chisquare_gof(
        n, n_bins, false_fail_rate, false_pass_rate, tail="lr_bound"
    )


def min_num_samples_multinomial_lr(
    discrepancy: float, n_bins: int, false_fail_rate: float, false_pass_rate: float = 0.001
) -> int:
    """Samples `assert_multinomial_lr` needs to detect binned TV >= discrepancy w.p. >= 1 - false_pass_rate."""
    return min_num_samples_chisquare_gof(
        discrepancy, n_bins, false_fail_rate, false_pass_rate, tail="lr_bound"
    )
