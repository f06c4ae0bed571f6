"""exactspec's exact NumPy oracle for speculative sampling.

Everything else in exactspec is measured against this package, so it is float64, exact where
exactness is possible (`fractions.Fraction` inputs to the laws give exact rational outputs), and never
imports torch.
"""

from .laws import (
    acceptance_rate,
    emitted_count_law,
    first_token_marginal,
    residual,
    round_distribution,
    unchecked_residual,
)
from .rules import verify, verify_batch, verify_greedy, verify_sampler_match
from .sampling import inverse_cdf, sample_token
from .sequences import speculative_sequence_law, target_sequence_law
from .speedup import (
    expected_tokens,
    expected_tokens_per_position,
    improvement_factor,
    optimal_k,
    tokens_law,
    tokens_law_per_position,
    tokens_mean_variance,
    tokens_variance,
    verification_cost,
)
from .validation import PROB_SUM_TOL
from .warping import SamplingParams, greedy_probs, warp_probs

__all__ = [
    "PROB_SUM_TOL",
    "SamplingParams",
    "acceptance_rate",
    "emitted_count_law",
    "expected_tokens",
    "expected_tokens_per_position",
    "first_token_marginal",
    "greedy_probs",
    "improvement_factor",
    "inverse_cdf",
    "optimal_k",
    "residual",
    "round_distribution",
    "sample_token",
    "speculative_sequence_law",
    "target_sequence_law",
    "tokens_law",
    "tokens_law_per_position",
    "tokens_mean_variance",
    "tokens_variance",
    "unchecked_residual",
    "verification_cost",
    "verify",
    "verify_batch",
    "verify_greedy",
    "verify_sampler_match",
    "warp_probs",
]
