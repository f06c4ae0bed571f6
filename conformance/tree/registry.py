"""The tree level's statistical checks: one entry each, with its runner (on a `TreeSample`) and its plan.

The error budget, the rounds per case (`core.planning`) and the alpha table are derived from these entries.
A case's n is planned on its path law when that is enumerable, else on the completed stream, else on the root
row (position 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...stat_tests.binning import drop_rounding_mass, with_unseen_category
from ..core.records import case_seed
from ..core.registry import CheckPlan, StatCheck, one_test
from . import checks
from .cases import TreeCase
from .harness import TreeRounds


@dataclass
class TreeSample:
    """The statistical rounds of one tree case."""

    impl: str
    rounds: TreeRounds

    @property
    def case(self) -> TreeCase:
        return self.rounds.case


def position_plan(case: TreeCase, j: int) -> CheckPlan:
    """Position j: the mixture of its prefixes' target rows over the rounds reaching j (the randomized PIT's exact
    KS where those rows differ, `checks.position_checks`); without the path law only depth-indexed rows are
    allowed, and all rounds are counted (an upper bound on the rounds reaching j)."""
    name = f"position_{j}"
    if not case.enumerable:
        if case.model.by != "depth" and j > 1:
            raise RuntimeError(f"tree case {case.name}: position {j}'s law needs the path law")
        drives = j == 1 and not case.stream_enumerable
        return CheckPlan(name, "lr", law=case.model.rows((0,) * (j - 1))[0], drives_n=drives)
    reached = [(path, prob) for path, prob in case.path_law.items() if len(path) >= j and prob > 0]
    mass = float(sum(prob for _, prob in reached))
    rows = np.array([case.model.rows(tuple(path[: j - 1]))[0] for path, _ in reached])
    weights = np.array([prob for _, prob in reached]) / mass
    differ = not np.allclose(rows, rows[0], atol=0, rtol=1e-12)
    return CheckPlan(name, "ks" if differ else "lr", law=weights @ rows, reach=mass)


def path_law(case: TreeCase) -> np.ndarray:
    """The tree rule's law of the emitted path, plus an empty category for paths it never emits."""
    return with_unseen_category(np.array(list(case.path_law.values())))


def length_law(case: TreeCase) -> np.ndarray:
    """The tree rule's law of the number of tokens, without rounding mass."""
    return drop_rounding_mass(case.length_law)


TREE_CHECKS: tuple[StatCheck, ...] = (
    StatCheck(
        name="position",
        category="exactness",
        applies=lambda c: True,
        instances=lambda c: [f"position_{j}" for j in range(1, c.max_length + 1)],
        run=lambda s, rate, prof: checks.position_checks(s.impl, s.rounds, rate, prof),
        plan=lambda c, prof: [position_plan(c, j) for j in range(1, c.max_length + 1)],
        what="token at position j (rounds with N >= j) ~ the target row of its emitted prefix",
    ),
    one_test(
        "completed_stream",
        "exactness",
        lambda c: c.stream_enumerable,
        lambda s, rate, prof: checks.completed_stream_check(
            s.impl, s.rounds, rate, prof, case_seed(s.case.name, "tree-stream")
        ),
        lambda c, prof: CheckPlan(
            "completed_stream", "lr", law=c.stream_law, drives_n=not c.enumerable
        ),
        "completed stream ~ the target's law",
    ),
    one_test(
        "path_law",
        "standard_rule",
        lambda c: c.enumerable,
        lambda s, rate, prof: checks.path_law_check(s.impl, s.rounds, rate, prof),
        lambda c, prof: CheckPlan("path_law", "lr", law=path_law(c), drives_n=True),
        "emitted path ~ the tree rule's exact law (drafts drawn)",
    ),
    one_test(
        "tokens_per_round",
        "standard_rule",
        lambda c: c.enumerable,
        lambda s, rate, prof: checks.tokens_per_round_check(s.impl, s.rounds, rate, prof),
        lambda c, prof: CheckPlan("tokens_per_round", "lr", law=length_law(c)),
        "tokens per round ~ the tree rule's law",
    ),
)
