"""The rule level's statistical checks: one entry each, with its runner (on a `RuleSample`) and its plan.

The error budget (`core.budget_for`), the rounds per case (`core.planning`) and the alpha table
(`alpha_table`) are derived from these entries; a check is added here and nowhere else, beside its function.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...stat_tests.binning import drop_rounding_mass, with_unseen_category
from ..core.profiles import Profile
from ..core.records import case_seed
from ..core.registry import CheckPlan, StatCheck, one_test
from . import case_checks, checks
from .cases import Case
from .harness import Rounds


@dataclass
class RuleSample:
    """The statistical rounds of one case (and the acceptance-rate rounds where that check applies)."""

    impl: str
    rounds: Rounds
    acceptance: Rounds | None = None

    @property
    def case(self) -> Case:
        return self.rounds.case

    @property
    def reach(self) -> list[float]:
        """The share of the statistical rounds that emit >= j tokens, j = 1..k+1."""
        return [float(np.mean(self.rounds.counts >= j)) for j in range(1, self.case.k + 2)]


def reach(case: Case) -> np.ndarray:
    """P(N >= j), j = 1..k+1, under the standard rule: the share of rounds that test position j."""
    return np.cumsum(case.count_law[::-1])[::-1]


def _position_plans(case: Case, profile: Profile, prefix: str, test: str) -> list[CheckPlan]:
    """Position j: p_j on rounds reaching j. n is planned on position 1 when no joint law is tested, and on the
    last position for deep drafts (reached by prod(alphas) of the rounds)."""
    at_least = reach(case)
    plans = []
    for j in range(1, case.k + 2):
        drives = (j == 1 and not (case.stream_enumerable or case.enumerable)) or (
            j == case.k + 1 and "deep_draft" in case.tags
        )
        plans.append(
            CheckPlan(
                f"{prefix}_{j}",
                test,
                law=case.target_probs[j - 1],
                reach=float(at_least[j - 1]),
                drives_n=bool(drives and at_least[j - 1] > 0),
            )
        )
    return plans


def tuple_law(case: Case) -> np.ndarray:
    """The standard rule's law of the emitted tuple, plus an empty category for tuples it never emits."""
    return with_unseen_category(np.sort(case.tuple_law[1]))


def count_law(case: Case) -> np.ndarray:
    """The standard rule's law of N without rounding mass (alpha_i = 1 up to rounding)."""
    return drop_rounding_mass(case.count_law)


RULE_CHECKS: tuple[StatCheck, ...] = (
    StatCheck(
        name="position",
        category="exactness",
        applies=lambda c: not c.varying,
        instances=lambda c: [f"position_{j}" for j in range(1, c.k + 2)],
        run=lambda s, rate, prof: checks.position_checks(s.impl, s.rounds, rate, prof),
        plan=lambda c, prof: _position_plans(c, prof, "position", "lr"),
        what="token at position j (rounds with N >= j) ~ p_j",
    ),
    StatCheck(
        name="pit_position",
        category="exactness",
        applies=lambda c: c.varying,
        instances=lambda c: [f"pit_position_{j}" for j in range(1, c.k + 2)],
        run=lambda s, rate, prof: case_checks.pit_position_checks(s.impl, s.rounds, rate, prof),
        plan=lambda c, prof: _position_plans(c, prof, "pit_position", "ks"),
        what="rows vary by round: randomized PIT of the token at position j under its round's p_j ~ U(0,1) (KS)",
    ),
    one_test(
        "hashed_position_1",
        "exactness",
        lambda c: c.V >= 1024 and not c.varying,
        lambda s, rate, prof: case_checks.hashed_position_check(s.impl, s.rounds, rate, prof),
        lambda c, prof: CheckPlan(
            "hashed_position_1", "lr", law_at=lambda n: case_checks.hashed_law_at(c, n, prof)[1]
        ),
        "large V: token at position 1 binned by a hash of its id (separates tokens the p-sorted bins pool)",
        family="hashed_position",
    ),
    one_test(
        "completed_stream",
        "exactness",
        lambda c: c.stream_enumerable,
        lambda s, rate, prof: checks.completed_stream_check(
            s.impl, s.rounds, rate, prof, case_seed(s.case.name, "stream")
        ),
        lambda c, prof: CheckPlan("completed_stream", "lr", law=c.stream_law, drives_n=True),
        "completed stream ~ prod_j p_j",
    ),
    one_test(
        "tuple_law",
        "standard_rule",
        lambda c: c.enumerable,
        lambda s, rate, prof: checks.tuple_law_check(s.impl, s.rounds, rate, prof),
        lambda c, prof: CheckPlan("tuple_law", "lr", law=tuple_law(c), drives_n=True),
        "emitted tuple ~ the standard rule's exact law",
    ),
    one_test(
        "tokens_per_round",
        "standard_rule",
        lambda c: True,
        lambda s, rate, prof: checks.count_law_check(s.impl, s.rounds, rate, prof),
        lambda c, prof: CheckPlan("tokens_per_round", "lr", law=count_law(c)),
        "tokens per round ~ the standard rule's law",
    ),
    one_test(
        "residual_1",
        "standard_rule",
        lambda c: not c.varying and c.alphas[0] < 1 - 1e-9,
        lambda s, rate, prof: checks.residual_check(s.impl, s.rounds, rate, prof),
        lambda c, prof: CheckPlan(
            "residual_1", "lr", law=checks.residual_law(c), reach=float(c.count_law[0])
        ),
        "token emitted when the first draft is rejected ~ norm(max(0, p_1 - q_1)), the standard residual",
        family="residual",
    ),
    one_test(
        "acceptance_rate",
        "standard_rule",
        lambda c: "acceptance_rate" in c.tags,
        lambda s, rate, prof: case_checks.acceptance_rate_check(s.impl, s.acceptance, rate, prof),
        lambda c, prof: CheckPlan("acceptance_rate", "binomial"),
        "first draft accepted ~ Bernoulli(alpha_1) (exact binomial), rounds sized for a 0.5 % bias",
    ),
)
