"""Which mechanism of the rule zoo a failing rule behaves like (`core.mechanism`): at the rule level the draft's law
is known, so the candidate's rounds on a failing case are compared with every zoo member's (`mutants.zoo`: the named
bugs and the exact variants) on the same case and the same draft tokens, `ROUNDS` each. Only cases of at most
`MAX_VOCAB` tokens are diagnosed (the outcome laws are estimated token by token), at most `CASES_DIAGNOSED` of them
(the strongest failures first). Descriptive: it runs after the verdict and never changes it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ContractViolation, ImplementationError
from ..core.mechanism import outcome_counts, rank_members, summarize
from .cases import Case
from .harness import Harness
from .mutants.zoo import ZOO

#: Rounds per zoo member and for the candidate, the largest vocabulary diagnosed, the failing cases diagnosed.
ROUNDS, MAX_VOCAB, CASES_DIAGNOSED = 5_000, 64, 3
#: The seed of the diagnosis's rounds (the drafts are the same for every member).
SEED = 5150
EXACT = "Rule"


def _features(harness: Harness, case: Case) -> np.ndarray:
    rounds = harness.run(case, ROUNDS, SEED)
    return outcome_counts(rounds.tokens, rounds.counts + 1, case.V)


def name_mechanism(candidate: Harness, case: Case) -> dict:
    """The zoo members that best explain the candidate's rounds on `case`, best first, with their gain over exact
    (members that break the contract on this case explain nothing and are listed apart)."""
    observed, members, crashed = _features(candidate, case), {}, []
    for spec in ZOO:
        try:
            members[spec.name] = _features(Harness(spec.make(), spec.name), case)
        except (ImplementationError, ContractViolation):
            crashed.append(spec.name)
    ranked = rank_members(observed, members, EXACT, case.k + 1, case.V)
    return {
        "case": case.name,
        **ranked,
        "rounds": ROUNDS,
        "members_that_break_the_contract_here": crashed,
    }


def failing_cases(cases: list, records: list, max_vocab: int, most: int) -> list:
    """The failing cases of at most `max_vocab` tokens with an exactness or standard-rule failure, strongest first."""
    by_case = {c.name: c for c in cases}
    failing = {
        r.case
        for r in records
        if not r.passed
        and r.category in ("exactness", "standard_rule")
        and r.case in by_case
        and by_case[r.case].V <= max_vocab
    }
    strongest = {
        name: min(
            (r.result.p_value if r.result.p_value is not None else 1.0)
            for r in records
            if r.case == name and not r.passed
        )
        for name in failing
    }
    return [by_case[name] for name in sorted(failing, key=strongest.__getitem__)[:most]]


def diagnose_rule(candidate: Any, cases: list[Case], records: list) -> dict | None:
    """The mechanism of the candidate's strongest failing cases; None when none can be diagnosed."""
    chosen = failing_cases(cases, records, MAX_VOCAB, CASES_DIAGNOSED)
    impl = candidate.impl if isinstance(candidate, Harness) else candidate
    if not chosen or not callable(getattr(impl, "verify", None)):
        return None
    harness = candidate if isinstance(candidate, Harness) else Harness(candidate, "candidate")
    return summarize(
        [name_mechanism(harness, case) for case in chosen], {s.name: s.models for s in ZOO}
    )


__all__ = ["ROUNDS", "diagnose_rule", "failing_cases", "name_mechanism"]
