"""How many tokens to draft next round: fixed, grow/shrink, or the oracle's walltime model on measured costs.

Any rule that looks only at the past (earlier outcomes, timings) keeps the output law exact: each round
emits tokens distributed as the target's whatever k it was given.
"""

from __future__ import annotations

from dataclasses import dataclass

from exactspec.gpu_impl.stats import examined_and_accepted
from exactspec.reference.speedup import expected_tokens_per_position

POLICIES = ("fixed", "grow-shrink", "cost")


def next_k(k: int, n_accepted: list[int], k_max: int) -> int:
    """Grow by one when every row accepted all drafts, shrink by one when none accepted more than half."""
    if all(n >= k for n in n_accepted):
        return min(k + 1, k_max)
    if all(2 * n < k for n in n_accepted):
        return max(k - 1, 1)
    return k


@dataclass
class Costs:
    """Seconds: `target[n]` = one round whose target forward scores n tokens (n = 1: a plain step), `draft` = one drafted token."""

    target: dict[int, float]
    draft: float


class CostModelK:
    """Each round, the k in 0..k_max maximising E[N] / (c k + v(k+1)) (k = 0: a plain step, value 1).

    E[N] = 1 + sum_j prod_{i<=j} a_i from per-position acceptance rates (a prompt-lookup draft's first
    token is often rejected while the rest of a matching copy is accepted, which one pooled rate hides).
    Costs start from a probe (forwards on the real cache) and then follow the loop's own timers (moving
    averages), so warping, verification and draft catch-up are counted.  a_i is the acceptance rate of
    recently examined drafts at position i: counts decay by `decay` per round and are mixed with
    `prior_acceptance_rate` of weight `prior_weight`, so after a run of plain steps the estimates drift back to the
    prior and drafting is tried again (a source that is never asked is never measured).
    """

    def __init__(self, costs: Costs, k_max: int, prior_acceptance_rate: float = 0.5, prior_weight: float = 1.0,
                 decay: float = 0.9, smoothing: float = 0.3):
        self.target, self.draft = dict(costs.target), costs.draft
        self.k_max, self.prior_acceptance_rate, self.prior_weight = k_max, prior_acceptance_rate, prior_weight
        self.decay, self.smoothing = decay, smoothing
        self.accepted = [0.0] * k_max  # decayed counts per draft position
        self.examined = [0.0] * k_max

    @property
    def acceptance_rates(self) -> list[float]:
        """Per draft position: decayed accepted / examined counts, shrunk towards the prior."""
        w, a0 = self.prior_weight, self.prior_acceptance_rate
        return [(a + a0 * w) / (e + w) for a, e in zip(self.accepted, self.examined)]

    def factor(self, k: int) -> float:
        """Predicted speedup of drafting k tokens next round over a plain step (1 for k = 0)."""
        if k == 0:
            return 1.0
        t1 = self.target[1]
        return expected_tokens_per_position(self.acceptance_rates[:k]) / (self.draft / t1 * k + self.target[k + 1] / t1)

    def choose(self) -> int:
        return max(range(self.k_max + 1), key=lambda k: (self.factor(k), -k))

    def update(self, proposed: int, n_accepted: list[int], target_s: float, draft_s: float) -> None:
        """One round: `proposed` drafts per row, row b accepted n_accepted[b]; the round's target and draft seconds."""
        examined, accepted = examined_and_accepted(proposed, n_accepted)
        examined += [0] * (self.k_max - proposed)
        accepted += [0] * (self.k_max - proposed)
        self.accepted = [a * self.decay + new for a, new in zip(self.accepted, accepted)]
        self.examined = [e * self.decay + new for e, new in zip(self.examined, examined)]
        w = self.smoothing
        self.target[proposed + 1] = (1 - w) * self.target[proposed + 1] + w * target_s
        if proposed:
            self.draft = (1 - w) * self.draft + w * draft_s / proposed
