"""The engine level's statistical checks: one entry each, with its runner (on a prompt's `PromptData`) and its
plan (n is the sample files'; the plans state each test's kind, from which the alpha table states its guarantee).
"""

from __future__ import annotations

from typing import Any

from ..core.registry import CheckPlan, StatCheck

#: The reference's self-check: its failure voids the prompt's PIT and makes the run INCONCLUSIVE.
REPORTED_PROBS_CHECK = "reference_reported_probs"


def _sampling(case: Any) -> bool:
    return not case.greedy


def _checks() -> Any:
    from . import checks

    return checks


ENGINE_CHECKS: tuple[StatCheck, ...] = (  # a case is one prompt (level.EngineCase)
    StatCheck(name="position_marginals", category="exactness", applies=_sampling,
              instances=lambda c: [f"position_{j}_permutation" for j in range(1, c.positions + 1)],
              run=lambda case, rate, prof: _checks().permutation_checks(case, rate, prof, tuple_check=False),
              plan=lambda c, prof: [CheckPlan(f"position_{j}_permutation", "permutation")
                                    for j in range(1, c.positions + 1)],
              what="token at position j (or END) has the same law in both samples (permutation test)"),
    StatCheck(name="prefix_tuple", category="exactness", applies=lambda c: _sampling(c) and c.positions > 1,
              instances=lambda c: [f"prefix_{c.positions}_permutation"],
              run=lambda case, rate, prof: _checks().permutation_checks(case, rate, prof, tuple_check=True),
              plan=lambda c, prof: [CheckPlan(f"prefix_{c.positions}_permutation", "permutation")],
              what="the first m tokens as a tuple have the same law in both samples (permutation test)"),
    StatCheck(name="reported_probs", category="exactness", applies=lambda c: _sampling(c) and c.reported,
              instances=lambda c: [REPORTED_PROBS_CHECK],
              run=lambda case, rate, prof: _checks().reported_check(case, rate, prof),
              plan=lambda c, prof: [CheckPlan(REPORTED_PROBS_CHECK, "multinomial")],
              what="the reference's first tokens follow its reported first-token probabilities"),
    StatCheck(name="pit_ks", category="exactness", applies=lambda c: _sampling(c) and c.pit,
              instances=lambda c: ["pit_ks"],
              run=lambda case, rate, prof: _checks().pit_check(case, rate, prof),
              plan=lambda c, prof: [CheckPlan("pit_ks", "ks", reach=float(c.positions))],
              what="randomized PIT of the candidate's tokens under the reference's reports is U(0,1) (exact KS)"),
)
