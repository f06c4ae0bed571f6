"""Coupling certificates: the TV between two laws, bounded by how often one seed gives two different outputs.

Setting: an engine samples a completion as a function of its seed. Seeds S_1, S_2, ... are drawn uniformly
without replacement from a seed space of size N; the reference and the candidate are each asked for the
completion of every S_i, and a *mismatch* is a seed at which the two differ. With S uniform on the space,
(reference(S), candidate(S)) is a coupling of the two output laws, so (coupling inequality)

    TV(candidate law, reference law) <= P(reference(S) != candidate(S)) =: pi.

Without replacement, given the first i draws with k mismatches, the next is a mismatch with probability
>= (pi N - k) / (N - i) >= pi - n / N, so the mismatch indicators dominate Bernoulli(pi - n / N) draws: a
Clopper-Pearson upper bound on the Bernoulli rate, plus n / N, bounds pi.

**Optional stopping.** A run may look after every batch. The certificate for k mismatches is issued only once
n >= n_k, the fewest seeds at which the Clopper-Pearson bound at confidence 1 - beta_k reaches the target, with
beta_k = beta * 6 / (pi^2 (k + 1)^2) (sum over k <= beta). If pi >= target, certifying with k mismatches means
at most k mismatches among the first n_k seeds, which has probability <= beta_k; summed over k, <= beta,
whatever the stopping rule. proofs/ARGUMENT.md, C16.

Per-token deviations follow: with d_t the TV of the first t tokens' laws (<= pi for every t), the expected TV
of the candidate's t-th conditional law from the reference's, at the candidate's own prefixes, is
<= d_t + d_(t-1) <= 2 pi (a triangle inequality through the law "candidate prefix, reference next token").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats

from ..reference.validation import check_error_rates
from .result import TestResult


def spent_rate(false_pass_rate: float, mismatches: int) -> float:
    """beta_k = beta * 6 / (pi^2 (k + 1)^2): the share of the false-pass rate spent on certifying with k mismatches."""
    return false_pass_rate * 6.0 / (math.pi**2 * (mismatches + 1) ** 2)


def mismatch_upper_bound(
    mismatches: int, seeds: int, false_pass_rate: float, seed_space: int | None = None
) -> float:
    """Upper bound on the mismatch probability pi from k mismatches in n seeds, at confidence 1 - beta_k
    (Clopper-Pearson; + n / N for sampling without replacement from a space of N seeds)."""
    if not (
        isinstance(seeds, int)
        and isinstance(mismatches, int)
        and 0 <= mismatches <= seeds
        and seeds >= 1
    ):
        raise ValueError(
            f"mismatches, seeds: need integers 0 <= mismatches <= seeds, seeds >= 1; got {mismatches}, {seeds}"
        )
    _, be = check_error_rates(0.01, false_pass_rate)
    beta_k = spent_rate(be, mismatches)
    bound = (
        1.0
        if mismatches == seeds
        else float(stats.beta.ppf(1.0 - beta_k, mismatches + 1, seeds - mismatches))
    )
    return min(1.0, bound + (seeds / seed_space if seed_space else 0.0))


def min_discrepancy_coupled_within(
    seeds: int, false_pass_rate: float, mismatches: int = 0, seed_space: int | None = None
) -> float:
    """The expected per-token TV that k mismatches in `seeds` seeds certify (`coupling_bound(...).token_tv`): the
    smallest target `assert_coupled_within` reaches with that many seeds. The false-pass rate is the only rate:
    the certificate is an upper bound (no false-fail rate: a mismatch disproves the coupling, never exactness)."""
    return coupling_bound(mismatches, seeds, false_pass_rate, seed_space).token_tv


def min_num_samples_coupled_within(
    discrepancy: float,
    false_pass_rate: float,
    mismatches: int = 0,
    seed_space: int | None = None,
    limit: int = 10**8,
) -> int | None:
    """Fewest seeds at which k mismatches still certify an expected per-token TV <= discrepancy, i.e. a
    whole-completion TV <= discrepancy / 2 (None past limit)."""
    if not 0.0 < discrepancy < 2.0:
        raise ValueError(f"discrepancy must be in (0, 2), got {discrepancy!r}")
    target_tv = discrepancy / 2.0  # the whole-completion TV: token_tv = 2 x completion_tv
    lo, hi = max(1, mismatches), max(2, mismatches + 1)
    while mismatch_upper_bound(mismatches, hi, false_pass_rate, seed_space) > target_tv:
        lo, hi = hi, hi * 2
        if hi > limit:
            return None
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        lo, hi = (
            (lo, mid)
            if mismatch_upper_bound(mismatches, mid, false_pass_rate, seed_space) <= target_tv
            else (mid, hi)
        )
    return (
        hi if mismatch_upper_bound(mismatches, lo, false_pass_rate, seed_space) > target_tv else lo
    )


@dataclass(frozen=True)
class CouplingBound:
    """What k mismatches in n seeds rule out: the whole-completion TV and the expected per-token TV."""

    mismatches: int
    seeds: int
    completion_tv: (
        float  # upper bound on TV of whole completions (probability >= 1 - false_pass_rate)
    )
    token_tv: float  # upper bound on the expected per-token TV at every position: 2 x completion_tv (capped at 1)


def coupling_bound(
    mismatches: int, seeds: int, false_pass_rate: float, seed_space: int | None = None
) -> CouplingBound:
    """The bounds of `mismatch_upper_bound`, as whole-completion and per-token TV."""
    pi = mismatch_upper_bound(mismatches, seeds, false_pass_rate, seed_space)
    return CouplingBound(mismatches, seeds, pi, min(1.0, 2.0 * pi))


def assert_coupled_within(
    mismatches: int,
    seeds: int,
    target_token_tv: float,
    false_pass_rate: float,
    seed_space: int | None = None,
    name: str = "coupling",
) -> TestResult:
    """Does the coupling certify an expected per-token TV <= target_token_tv? `passed` is True when it does.
    Never a failure of exactness: a mismatch disproves only the coupling (the law tests then decide).
    Seeds needed for a target: `min_num_samples_coupled_within`; what n seeds certify: `min_discrepancy_coupled_within`."""
    bound = coupling_bound(mismatches, seeds, false_pass_rate, seed_space)
    reached = bound.token_tv <= target_token_tv
    needed = min_num_samples_coupled_within(
        target_token_tv, false_pass_rate, mismatches, seed_space
    )
    message = (
        f"{name}: {mismatches} mismatches in {seeds} random seeds: whole-completion TV <= "
        f"{bound.completion_tv:.3g}, expected per-token TV <= {bound.token_tv:.3g} (probability >= "
        f"{1 - false_pass_rate:g}); "
        + ("reaches" if reached else f"short of (about {needed} seeds would reach)")
        + f" the target {target_token_tv:g}"
    )
    return TestResult(
        name,
        float(mismatches),
        float("nan"),
        seeds,
        0.0,
        false_pass_rate,
        bound.token_tv,
        reached,
        message,
        {
            "mismatches": mismatches,
            "seeds": seeds,
            "completion_tv": bound.completion_tv,
            "token_tv": bound.token_tv,
            "seeds_needed": needed,
            "seed_space": seed_space,
        },
    )


__all__ = [
    "CouplingBound",
    "assert_coupled_within",
    "coupling_bound",
    "min_discrepancy_coupled_within",
    "min_num_samples_coupled_within",
    "mismatch_upper_bound",
    "spent_rate",
]
