"""stat_tests: calibrated statistical tests with stated false-fail and false-pass rates.

Every test returns a `TestResult` carrying its false-fail rate (field `false_fail_rate`: the false-fail probability under
exactness), false_pass_rate and detectable_tv (a deviation of at least that total variation, on the
test's bins, is caught with probability >= 1 - false_pass_rate).

Each test X comes as a triple, after TensorFlow Probability's statistical_testing.py: `assert_X(...)` runs it and
returns the `TestResult`; `min_discrepancy_X(n, ...)` is the smallest deviation it detects with n samples with
probability >= 1 - false_pass_rate; `min_num_samples_X(discrepancy, ...)` the n it needs for that. The
discrepancy is the one the test states (binned TV; a Kolmogorov distance, a mean shift, a rate or a zero-set mass
where its docstring says so). `plan_gof` plans n and the bin count together for a given law.

The conformance suite runs `assert_chisquare_gof(method="lr")` (= `assert_multinomial_lr`): a likelihood-ratio test
whose false-fail rate is a theorem at every level (exact tail for <= 3 bins, Agrawal's bound otherwise).
Design and calibration regime: README.md in this package; measured figures: benchmarks/README.md,
"Statistical tests".
"""

from .binomial import (
    assert_rare_events,
    clopper_pearson,
    min_discrepancy_rare_events,
    min_num_samples_rare_events,
    rejection_rate,
)
from .budget import ErrorBudget
from .coupling import (
    CouplingBound,
    assert_coupled_within,
    coupling_bound,
    min_discrepancy_coupled_within,
    min_num_samples_coupled_within,
)
from .exact import (
    assert_multinomial_exact,
    min_discrepancy_multinomial_exact,
    min_num_samples_multinomial_exact,
)
from .gof import (
    assert_chisquare_gof,
    assert_within_support,
    min_discrepancy_within_support,
    min_num_samples_within_support,
)
from .guarded import lr_gof_or_zero, pit_ks_or_fail
from .lr_gof import (
    assert_multinomial_lr,
    min_discrepancy_multinomial_lr,
    min_num_samples_multinomial_lr,
)
from .lr_tail import lr_critical_value, lr_pvalue, lr_tail_bound
from .permutation import (
    assert_permutation_homogeneity,
    min_discrepancy_permutation_homogeneity,
    min_num_samples_permutation_homogeneity,
    pooled_bins,
)
from .pit import (
    assert_pit_uniform,
    min_discrepancy_pit_uniform,
    min_num_samples_pit_uniform,
    pit_values,
)
from .power import (
    chisquare_power,
    min_discrepancy_chisquare_gof,
    min_num_samples_chisquare_gof,
    plan_gof,
)
from .result import TestResult
from .rounds import (
    assert_mean_tokens,
    assert_tokens_per_round,
    min_discrepancy_mean_tokens,
    min_discrepancy_tokens_per_round,
    min_num_samples_mean_tokens,
    min_num_samples_tokens_per_round,
)
from .sequential import (
    DriftStream,
    assert_drift,
    drift_bound,
    min_discrepancy_drift,
    min_num_samples_drift,
)
from .two_sample import (
    assert_two_sample_chisquare,
    min_discrepancy_two_sample_chisquare,
    min_num_samples_two_sample_chisquare,
)

__all__ = [
    "TestResult",
    "ErrorBudget",
    "chisquare_power",
    "plan_gof",
    # the triples: assert_X / min_discrepancy_X / min_num_samples_X
    "assert_chisquare_gof",
    "min_discrepancy_chisquare_gof",
    "min_num_samples_chisquare_gof",
    "assert_multinomial_lr",
    "min_discrepancy_multinomial_lr",
    "min_num_samples_multinomial_lr",
    "assert_multinomial_exact",
    "min_discrepancy_multinomial_exact",
    "min_num_samples_multinomial_exact",
    "assert_pit_uniform",
    "min_discrepancy_pit_uniform",
    "min_num_samples_pit_uniform",
    "assert_tokens_per_round",
    "min_discrepancy_tokens_per_round",
    "min_num_samples_tokens_per_round",
    "assert_mean_tokens",
    "min_discrepancy_mean_tokens",
    "min_num_samples_mean_tokens",
    "assert_two_sample_chisquare",
    "min_discrepancy_two_sample_chisquare",
    "min_num_samples_two_sample_chisquare",
    "assert_permutation_homogeneity",
    "min_discrepancy_permutation_homogeneity",
    "min_num_samples_permutation_homogeneity",
    "assert_rare_events",
    "min_discrepancy_rare_events",
    "min_num_samples_rare_events",
    "assert_drift",
    "min_discrepancy_drift",
    "min_num_samples_drift",
    "assert_coupled_within",
    "min_discrepancy_coupled_within",
    "min_num_samples_coupled_within",
    "assert_within_support",
    "min_discrepancy_within_support",
    "min_num_samples_within_support",
    # forms the conformance levels run the tests in, and building blocks
    "lr_gof_or_zero",
    "pit_ks_or_fail",
    "pit_values",
    "pooled_bins",
    "clopper_pearson",
    "rejection_rate",
    "lr_pvalue",
    "lr_tail_bound",
    "lr_critical_value",
    "DriftStream",
    "drift_bound",
    "CouplingBound",
    "coupling_bound",
]
