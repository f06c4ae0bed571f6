"""The engine level's statistical checks: one entry each, with its runner (`stat_checks`, on a prompt's case) and its
plan (n is the sample files'; each plan states its test's kind, from which the alpha table states its guarantee).
Every check but `greedy_spread` is an e-process: valid at every look, under any stopping rule.
"""

from __future__ import annotations

from typing import Any

from ..core.registry import CheckPlan, StatCheck
from . import stat_checks

#: The reference's self-check (its own tokens against its reports): a failure voids the law routes and the support
#: check, and, unless coupling certifies the prompt, makes the run INCONCLUSIVE.
REFERENCE_CHECK = "reference_law"
REFERENCE_SELF_CHECKS = (REFERENCE_CHECK,)
#: The candidate's paired checks (`paired_checks`): valid whatever the reports, as long as the reports of one prefix
#: agree within twice the tolerance (the premise); voided only when that premise is contradicted.
PAIRED_CHECKS = ("law_drift", "law_lr", "context_law", "near_zero_tokens")
#: The candidate against itself, alone and under load (`paired_checks.load_check`).
LOAD_CHECK = "load_law"
#: The checks that read the reports as the law: voided when the reports are found wrong (`reference_law` fails).
REPORT_READERS = ("reported_support", REFERENCE_CHECK)
#: The checks voided when decode-time and teacher-forced reports of one prefix disagree beyond the tolerance.
PREMISE_READERS = PAIRED_CHECKS + (LOAD_CHECK,) + REPORT_READERS

WHAT = {
    "law_drift": "the candidate's PIT values at positions 1..m, per confidence stratum, against the reference's "
    "completions of the same seeds (paired e-process)",
    "law_lr": "the candidate's reported log-probabilities at positions 1..m, per stratum (the score of the "
    "temperature and truncation family), against the reference's completions of the same seeds (paired "
    "e-process)",
    "context_law": "at prefixes that come back, the candidate's tokens against the reference's (a witness learned "
    "per prefix from the earlier seeds; paired e-process): deviations in any direction",
    "near_zero_tokens": "the candidate emits tokens of reported mass near 0 at the reference's rate (the rate of "
    "each end learned from the earlier seeds; paired e-process)",
}


def _sampling(case: Any) -> bool:
    """A case the statistical checks read: sampled (not greedy), and not a pooled run's member prompt."""
    return not case.greedy and not case.member


def _one(name: str, test: str = "sequential") -> Any:
    """The instances and plan of a check with one test of its own name."""
    return {"instances": lambda c: [name], "plan": lambda c, prof: [CheckPlan(name, test)]}


ENGINE_CHECKS: tuple[StatCheck, ...] = tuple(  # a case is one prompt (cases.EngineCase)
    StatCheck(
        name=name,
        category="exactness",
        applies=lambda c: _sampling(c) and c.law,
        run=stat_checks.candidate_check(name),
        what=WHAT[name],
        **_one(name),
    )
    for name in PAIRED_CHECKS
) + (
    StatCheck(
        name=LOAD_CHECK,
        category="exactness",
        applies=lambda c: _sampling(c) and c.law and c.load_labels,
        run=stat_checks.load_law_check,
        **_one(LOAD_CHECK),
        what="the candidate's completions sampled alone against those sampled under load (a permutation "
        "e-process, valid whatever the reports): its law does not depend on the load",
    ),
    StatCheck(
        name=REFERENCE_CHECK,
        category="exactness",
        applies=lambda c: _sampling(c) and c.reference_reported,
        run=stat_checks.reference_law_check,
        **_one(REFERENCE_CHECK),
        what="the reference's own tokens at positions 1..m follow its reports (drift, tempered likelihood "
        "ratio, per-prefix identity and near-zero bettors: one mixture e-process); a failure voids the "
        "prompt's law routes and support check",
    ),
    StatCheck(
        name="greedy_spread",
        category="exactness",
        applies=lambda c: c.greedy and c.reference_varies,
        run=stat_checks.greedy_spread_check,
        **_one("greedy_spread", "fisher"),
        what="temperature 0, a reference that varies with the seed: the candidate leaves the pooled modal "
        "output no more often than the reference (Fisher's exact test)",
    ),
)
