"""Which mechanism of the tree zoo a failing tree rule behaves like (`core.mechanism`): the candidate's rounds on a
failing case against every zoo member's (`mutants.ZOO`), on the same trees (one seed), `ROUNDS` each; cases of at
most `MAX_VOCAB` tokens, at most `CASES_DIAGNOSED` of them. Descriptive: it runs after the verdict.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ContractViolation, ImplementationError
from ..core.mechanism import outcome_counts, rank_members, summarize
from ..rule.mechanism import failing_cases
from .cases import TreeCase
from .harness import TreeHarness
from .mutants import ZOO

ROUNDS, MAX_VOCAB, CASES_DIAGNOSED = 1_000, 64, 2
SEED = 5151
EXACT = "TreeReference"


def _features(harness: TreeHarness, case: TreeCase) -> np.ndarray:
    rounds = harness.run(case, ROUNDS, SEED)
    return outcome_counts(rounds.tokens, rounds.counts, case.V)


def name_mechanism(candidate: TreeHarness, case: TreeCase) -> dict:
    """The zoo members that best explain the candidate's rounds on `case`, best first."""
    observed, members, crashed = _features(candidate, case), {}, []
    for spec in ZOO:
        try:
            members[spec.name] = _features(TreeHarness(spec.make(), spec.name), case)
        except (ImplementationError, ContractViolation, ValueError):
            crashed.append(spec.name)
    ranked = rank_members(observed, members, EXACT, case.max_length, case.V)
    return {
        "case": case.name,
        **ranked,
        "rounds": ROUNDS,
        "members_that_break_the_contract_here": crashed,
    }


def diagnose_tree(candidate: Any, cases: list[TreeCase], records: list) -> dict | None:
    """The mechanism of the candidate's strongest failing cases; None when none can be diagnosed."""
    chosen = failing_cases(cases, records, MAX_VOCAB, CASES_DIAGNOSED)
    if not chosen:
        return None
    try:
        harness = (
            candidate if isinstance(candidate, TreeHarness) else TreeHarness(candidate, "candidate")
        )
    except ValueError:
        return None
    return summarize(
        [name_mechanism(harness, case) for case in chosen], {s.name: s.models for s in ZOO}
    )


__all__ = ["diagnose_tree", "name_mechanism"]
