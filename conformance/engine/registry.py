"""The engine level's statistical checks: one entry each, with its runner (on a prompt's `PromptData`) and its
plan (n is the sample files'; the plans state each test's kind, from which the alpha table states its guarantee).
"""

from __future__ import annotations

from typing import Any

from ..core.registry import CheckPlan, StatCheck

#: The reference's self-check (its own tokens at positions 1..m against its reports): a failure voids the
#: prompt's PIT and makes the run INCONCLUSIVE.
REFERENCE_PIT_CHECK = "reference_pit"
REFERENCE_SELF_CHECKS = (REFERENCE_PIT_CHECK,)

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
    StatCheck(name="reference_pit", category="exactness", applies=lambda c: _sampling(c) and (c.pit or c.reported),
              instances=lambda c: [REFERENCE_PIT_CHECK],
              run=lambda case, rate, prof: _checks().reference_pit_check(case, rate, prof),
              plan=lambda c, prof: [CheckPlan(REFERENCE_PIT_CHECK, "ks", reach=float(c.positions))],
              what="the reference's own tokens at positions 1..m follow its reports (randomized PIT, exact KS, "
                   "rounding slack)"),
    StatCheck(name="near_zero_tokens", category="exactness", applies=lambda c: _sampling(c) and c.pit,
              instances=lambda c: ["near_zero_tokens"],
              run=lambda case, rate, prof: _checks().near_zero_check(case, rate, prof),
              plan=lambda c, prof: [CheckPlan("near_zero_tokens", "binomial_upper", reach=float(c.positions))],
              what="the candidate's tokens fall where the reference's report leaves mass <= 1e-4 no more often "
                   "than that allows (one-sided binomial at a dominating rate)"),
    StatCheck(name="pit_ks", category="exactness", applies=lambda c: _sampling(c) and c.pit and c.positions > 1,
              instances=lambda c: ["pit_ks"],
              run=lambda case, rate, prof: _checks().pit_check(case, rate, prof),
              plan=lambda c, prof: [CheckPlan("pit_ks", "ks", reach=float(c.positions - 1))],
              what="randomized PIT of the candidate's tokens at the drafted positions 2..m under the reference's "
                   "reports is U(0,1) (exact KS, rounding slack); states the mean per-token TV it detects"),
)
