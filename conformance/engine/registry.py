"""The engine level's statistical checks: one entry each, with its runner (`stat_checks`, on a prompt's case) and its
plan (n is the sample files'; each plan states its test's kind, from which the alpha table states its guarantee).
Every check but `greedy_spread` is an e-process: valid at every look, under any stopping rule.
"""

from __future__ import annotations

from typing import Any

from ..core.registry import CheckPlan, StatCheck

#: The reference's self-check (its own tokens against its reports): a failure voids every check that reads the
#: prompt's reports and makes the run INCONCLUSIVE.
REFERENCE_CHECK = "reference_law"
REFERENCE_SELF_CHECKS = (REFERENCE_CHECK,)
#: The checks that read the reference's reports (voided when the reports are found wrong).
REPORT_READERS = ("law_drift", "context_law", "near_zero_tokens", "reported_support", REFERENCE_CHECK)


def _sampling(case: Any) -> bool:
    return not case.greedy


def _checks() -> Any:
    from . import stat_checks

    return stat_checks


def _one(name: str, test: str = "sequential") -> Any:
    """The instances and plan of a check with one test of its own name."""
    return {"instances": lambda c: [name], "plan": lambda c, prof: [CheckPlan(name, test)]}


ENGINE_CHECKS: tuple[StatCheck, ...] = (  # a case is one prompt (cases.EngineCase)
    StatCheck(name="law_drift", category="exactness", applies=lambda c: _sampling(c) and c.law and c.positions > 1,
              run=lambda case, rate, prof: _checks().law_drift_check(case, rate, prof), **_one("law_drift"),
              what="the candidate's PIT values at positions 2..m under the reference's reports drift from 1/2 in no "
                   "confidence stratum (e-process); states the mean per-token TV the law route rules out"),
    StatCheck(name="context_law", category="exactness", applies=lambda c: _sampling(c) and c.law,
              run=lambda case, rate, prof: _checks().context_law_check(case, rate, prof), **_one("context_law"),
              what="at every prefix the candidate visits again, its tokens follow the reference's report "
                   "(per-prefix Dirichlet bettors, e-process): deviations in any direction"),
    StatCheck(name="near_zero_tokens", category="exactness", applies=lambda c: _sampling(c) and c.law,
              run=lambda case, rate, prof: _checks().near_zero_check(case, rate, prof), **_one("near_zero_tokens"),
              what="the candidate emits tokens its reference all but excludes (reported mass <= 1e-4) no more often "
                   "than that allows (e-process)"),
    StatCheck(name=REFERENCE_CHECK, category="exactness", applies=lambda c: _sampling(c) and c.reference_reported,
              run=lambda case, rate, prof: _checks().reference_law_check(case, rate, prof), **_one(REFERENCE_CHECK),
              what="the reference's own tokens at positions 1..m follow its reports (the three bettors, one "
                   "mixture e-process); a failure voids the prompt's report checks"),
    StatCheck(name="greedy_spread", category="exactness", applies=lambda c: c.greedy and c.reference_varies,
              run=lambda case, rate, prof: _checks().greedy_spread_check(case, rate, prof),
              **_one("greedy_spread", "fisher"),
              what="temperature 0, a reference that varies with the seed: the candidate leaves the pooled modal "
                   "output no more often than the reference (Fisher's exact test)"),
)
