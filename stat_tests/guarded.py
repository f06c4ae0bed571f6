"""The two forms every conformance level runs its goodness-of-fit tests in, so that a degenerate sample is a
verdict of the test and never an error of the suite:

* `lr_gof_or_zero`: the likelihood-ratio test with a proven tail (`assert_chisquare_gof(method="lr")`); with too few
  samples for two bins, the exact zero-probability check alone (hard: false-fail rate 0);
* `pit_ks_or_fail`: the randomized PIT's KS test (exact finite-n law); a token of probability 0 under its own
  row, where `pit_values` refuses, fails the test.

They are forms of tests, not tests of their own: their power functions are those of the tests they run
(`min_discrepancy_multinomial_lr` / `min_num_samples_multinomial_lr`, `min_discrepancy_within_support` when only
the hard check runs, `min_discrepancy_pit_uniform` / `min_num_samples_pit_uniform`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .gof import assert_chisquare_gof, assert_within_support
from .pit import assert_pit_uniform
from .result import TestResult


def lr_gof_or_zero(
    name: str,
    counts: np.ndarray,
    law: np.ndarray,
    false_fail_rate: float,
    false_pass_rate: float,
    min_expected: float,
) -> TestResult:
    """`assert_chisquare_gof(method="lr")` of `counts` against `law`; with too few samples for two bins, the hard
    zero-probability check only (its stated false-fail rate is then 0 when it passes); with none, a pass that
    says there was nothing to test (details["skipped"])."""
    if int(np.sum(counts)) == 0:
        return TestResult(
            name,
            0.0,
            1.0,
            0,
            0.0,
            false_pass_rate,
            float("nan"),
            True,
            f"{name}: no observation reached this test: nothing to test",
            {"skipped": True},
        )
    try:
        return assert_chisquare_gof(
            counts=counts,
            p=law,
            false_fail_rate=false_fail_rate,
            false_pass_rate=false_pass_rate,
            min_expected=min_expected,
            method="lr",
            name=name,
        )
    except ValueError as error:
        zr = assert_within_support(counts=counts, p=law, false_pass_rate=false_pass_rate, name=name)
        return TestResult(
            name,
            zr.statistic,
            zr.p_value,
            int(counts.sum()),
            false_fail_rate if zr.passed else 0.0,
            false_pass_rate,
            float("nan"),
            zr.passed,
            f"{zr.message} (chi-square skipped: {error})",
            zr.details,
        )


def pit_ks_or_fail(
    name: str,
    draw_values: Callable[[], np.ndarray],
    n: int,
    false_fail_rate: float,
    false_pass_rate: float,
) -> TestResult:
    """The KS test of the randomized PIT values `draw_values()` (n of them) against U(0, 1); a token of
    probability 0 under its own row, where `pit_values` refuses, is a failure of the test."""
    try:
        return assert_pit_uniform(
            draw_values(), false_fail_rate, false_pass_rate=false_pass_rate, method="ks", name=name
        )
    except ValueError as error:
        return TestResult(
            name,
            float("inf"),
            0.0,
            n,
            false_fail_rate,
            false_pass_rate,
            float("nan"),
            False,
            f"{name}: FAIL: {error}",
            {},
        )
