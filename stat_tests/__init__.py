"""stat_tests: calibrated statistical tests with stated false-fail and false-pass rates.

Every test returns a `TestResult` carrying its false-fail rate (field `false_fail_rate`: the false-fail probability under
exactness), false_pass_rate and detectable_tv (a deviation of at least that total variation, on the
test's bins, is caught with probability >= 1 - false_pass_rate).  See README.md in this package for
the design, the calibration regime and the measured figures.

Key measured figures (benchmarks/results/stat_calibration.json, 2 CPUs):
* calibration, 2,000 seeds, 13 tests at false_fail_rate 0.01 / 0.001: every rejection rate within
  the Clopper-Pearson 99% interval of nominal (e.g. Pearson V=150,000 pooled: 0.0070 /
  0.0005; exact multinomial is conservative: 0.0080 / 0.0000);
* tail: with min_expected=20 the asymptotic chi-square tail runs up to 1.6x nominal at
  false_fail_rate <= 1e-4 (and up to 16x at 8e-9 with <= 4 bins) -- hence method="lr" below;
* power at the planned n (false_fail_rate 1e-3, promised 0.9, least-favourable deviations of TV
  0.01/0.02/0.05): measured 0.89-0.93 for GoF (V=10, pooled V=1000), N-law, two-sample;
* cost at n=100,000: chisquare_gof 0.3 ms (V=10) to 20 ms (V=150,000).

The conformance suite runs `chisquare_gof(method="lr")` (= `assert_multinomial_lr`): a likelihood-ratio test
whose false-fail rate is a theorem at every level (exact tail for <= 3 bins, Agrawal's bound otherwise).
"""
from .binomial import clopper_pearson, rare_event_test, rejection_rate
from .budget import ErrorBudget
from .exact import multinomial_exact_test
from .gof import chisquare_gof, zero_probability_check
from .guarded import lr_gof_or_zero, pit_ks_or_fail
from .lr_gof import assert_multinomial_lr, min_discrepancy_multinomial_lr, min_num_samples_multinomial_lr
from .lr_tail import lr_critical_value, lr_pvalue, lr_tail_bound
from .permutation import permutation_homogeneity, pooled_bins
from .pit import pit_uniformity_test, pit_values
from .power import chisquare_power, detectable_tv, required_samples
from .result import TestResult
from .coupling import CouplingBound, assert_coupled_within, coupling_bound, min_num_seeds_coupling
from .rounds import mean_tokens_test, tokens_per_round_test
from .sequential import DriftStream, drift_bound, drift_test, min_discrepancy_drift, min_num_samples_drift
from .two_sample import two_sample_chisquare

__all__ = [
    "TestResult", "chisquare_gof", "multinomial_exact_test", "zero_probability_check",
    "pit_values", "pit_uniformity_test", "tokens_per_round_test", "mean_tokens_test",
    "two_sample_chisquare", "required_samples", "detectable_tv", "chisquare_power",
    "ErrorBudget", "clopper_pearson", "rejection_rate", "permutation_homogeneity", "pooled_bins", "plan_gof", "lr_gof_or_zero", "pit_ks_or_fail", "assert_multinomial_lr", "min_discrepancy_multinomial_lr",
    "min_num_samples_multinomial_lr", "lr_pvalue", "lr_tail_bound", "lr_critical_value",
    "rare_event_test",
    "DriftStream", "drift_test", "drift_bound", "min_discrepancy_drift", "min_num_samples_drift",
    "CouplingBound", "assert_coupled_within", "coupling_bound", "min_num_seeds_coupling",
]


def plan_gof(p, epsilon_tv, false_fail_rate, false_pass_rate=0.001, min_expected=20.0, tail="chi2", max_bins=None):
    """(n, n_bins) for `chisquare_gof` against p: iterate n -> bins(n) -> n to a fixed
    point, since pooling makes the bin count depend on n (tail="lr_bound" for method="lr").
    With ``max_bins`` the test pools at min_expected = max(min_expected, n / max_bins). The one planner of
    every conformance level (`conformance.core.planning`). Pearson and G need two bins of min_expected, so n
    starts where p's mode leaves that much outside it; the LR test does not (it falls back to the mode against
    the rest, an exact two-bin tail)."""
    import numpy as np

    from ..reference.validation import as_prob_vector
    from .binning import pool_bins

    pp = as_prob_vector(p, "p")
    floor = 0 if tail == "lr_bound" else int(np.ceil(2 * min_expected / max(1e-12, 1 - pp.max())))
    n = max(required_samples(epsilon_tv, 2, false_fail_rate, false_pass_rate, tail=tail), floor)
    for _ in range(200):  # n only grows, so the result detects epsilon_tv on the bins it is tested with
        me = min_expected if max_bins is None else max(min_expected, n / max_bins)
        bins = max(2, pool_bins(pp, n, me)[1].size)
        n_new = required_samples(epsilon_tv, bins, false_fail_rate, false_pass_rate, tail=tail)
        if n_new <= n:
            return n, bins
        n = n_new
    raise RuntimeError("plan_gof: the sample size did not reach a fixed point")
