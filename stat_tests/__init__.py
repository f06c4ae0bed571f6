"""stat_tests: calibrated statistical tests with stated false-fail and false-pass rates.

Every test returns a `TestResult` carrying its false-fail rate (field `alpha`: the false-fail probability under
exactness), beta and detectable_tv (a deviation of at least that total variation, on the
test's bins, is caught with probability >= 1 - beta).  See README.md in this package for
the design, the calibration regime and the measured figures.

Key measured figures (benchmarks/results/stat_calibration.json, 2 CPUs):
* calibration, 2,000 seeds, 13 tests at false_fail_rate 0.01 / 0.001: every rejection rate within
  the Clopper-Pearson 99% interval of nominal (e.g. Pearson V=150,000 pooled: 0.0070 /
  0.0005; exact multinomial is conservative: 0.0080 / 0.0000);
* tail: with min_expected=20 the chi-square tail runs up to 1.6x nominal at
  false_fail_rate <= 1e-4 -- use ErrorBudget(tail_safety=2), larger min_expected or the exact test;
* power at the planned n (false_fail_rate 1e-3, promised 0.9, least-favourable deviations of TV
  0.01/0.02/0.05): measured 0.89-0.93 for GoF (V=10, pooled V=1000), N-law, two-sample;
* cost at n=100,000: chisquare_gof 0.3 ms (V=10) to 20 ms (V=150,000).
"""
from .budget import ErrorBudget
from .exact import multinomial_exact_test
from .gof import chisquare_gof, zero_probability_check
from .pit import pit_uniformity_test, pit_values
from .power import chisquare_power, detectable_tv, required_samples
from .result import TestResult
from .rounds import mean_tokens_test, tokens_per_round_test
from .two_sample import two_sample_chisquare

__all__ = [
    "TestResult", "chisquare_gof", "multinomial_exact_test", "zero_probability_check",
    "pit_values", "pit_uniformity_test", "tokens_per_round_test", "mean_tokens_test",
    "two_sample_chisquare", "required_samples", "detectable_tv", "chisquare_power",
    "ErrorBudget", "plan_gof",
]


def plan_gof(p, epsilon_tv, false_fail_rate, beta=0.001, min_expected=20.0):
    """(n, n_bins) for `chisquare_gof` against p: iterate n -> bins(n) -> n to a fixed
    point, since pooling makes the bin count depend on n."""
    import numpy as np

    from exactspec.reference.validation import as_prob_vector
    from .binning import pool_bins

    pp = as_prob_vector(p, "p")
    bins = max(2, int(np.count_nonzero(pp)))
    n = required_samples(epsilon_tv, bins, false_fail_rate, beta)
    for _ in range(50):
        b = max(2, pool_bins(pp, n, min_expected)[1].size)
        n_new = required_samples(epsilon_tv, b, false_fail_rate, beta)
        if b == bins and n_new == n:
            break
        bins, n = b, max(n_new, int(np.ceil(2 * min_expected / max(1e-12, 1 - pp.max()))))
    return n, bins
