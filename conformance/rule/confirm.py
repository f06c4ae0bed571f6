"""Confirmatory exactness tests: what a rule must pass before the suite calls it "exact, not the standard rule".

A failed standard-rule check (whole tuple, tokens per round, acceptance rate) says the rule accepts
differently from Leviathan-Chen; it does not say the rule is exact, because a non-exact rule moves its tuple
law too. So, on each case where a standard-rule check failed, the position checks are re-run on fresh rounds
sized for the observed deviation d (the failed check's binned TV minus its mean under the null):
every position j reached by at least eps of the rounds must detect a conditional TV of
eps = min(case target, d) with power 1 - false_pass_rate. Positions reached by fewer rounds are exempt (a deviation
there moves less than eps of the emitted tuples' mass). When the rounds needed exceed the cap
(`CONFIRM_ROUNDS_FACTOR` x the profile's `max_rounds`) the case stays unconfirmed and the verdict is
INCONCLUSIVE, with the rounds that would settle it.

False-fail budget: the confirmatory tests of a case together run at the rate of that case's standard-rule
tests. For an exact standard rule they run only after a false fail of those tests; for an exact
non-standard rule they replace them. Either way the run's total stays within the stated one.
"""

from __future__ import annotations

import math


from . import case_checks, checks
from .cases import Case
from ..core.planning import samples_for
from ..core.profiles import Profile
from ..core.records import CheckRecord, case_seed

#: Confirmatory runs may use up to this many times the profile's max_rounds per case.
CONFIRM_ROUNDS_FACTOR = 8
#: Safety margin on the reach estimated from the statistical rounds.
REACH_MARGIN = 1.15
#: Plan for a TV this much below the target, so the realised detectable TV (pooled bins) stays within it.
PLANNING_MARGIN = 1.1


def observed_deviation(records: list[CheckRecord]) -> float | None:
    """Largest excess binned TV (observed minus its null mean) of the failed standard-rule records."""
    excess = [
        r.result.details["observed_tv_binned"]
        - (r.result.details.get("observed_tv_binned_null_mean") or 0.0)
        for r in records
        if r.category == "standard_rule"
        and not r.passed
        and "observed_tv_binned" in r.result.details
    ]
    return max(excess) if excess else None


def confirm_plan(
    case: Case,
    profile: Profile,
    reach: list[float],
    deviation: float | None,
    rate: float,
    target: float,
) -> dict:
    """Which positions to confirm, at what TV and per-test rate, and how many rounds that takes (`target`: the
    case's planned binned TV)."""
    eps = target if deviation is None or deviation <= 0 else min(target, deviation)
    positions = [j for j in range(1, case.k + 2) if reach[j - 1] >= eps]
    per_test = rate / max(1, len(positions))
    rounds = 0
    for j in positions:
        n_j = samples_for(
            case.target_probs[j - 1],
            eps / PLANNING_MARGIN,
            per_test,
            profile,
            profile.rule.max_bins,
        )[0]
        rounds = max(rounds, math.ceil(REACH_MARGIN * n_j / reach[j - 1]))
    cap = CONFIRM_ROUNDS_FACTOR * profile.rule.max_rounds
    return {
        "epsilon_tv": eps,
        "positions": positions,
        "false_fail_rate_each": per_test,
        "rounds": int(rounds),
        "cap": cap,
        "feasible": rounds <= cap,
        "exempt": [j for j in range(1, case.k + 2) if j not in positions],
    }


def confirm_case(harness, case: Case, profile: Profile, plan: dict) -> list[CheckRecord]:
    """Run the planned confirmatory position checks on fresh rounds; records named confirm_position_j."""
    rounds = harness.run(case, plan["rounds"], case_seed(case.name, "confirm"))
    # rows varying by round: the randomized PIT
    prefix = "pit_position" if case.varying else "position"
    run = case_checks.pit_position_checks if case.varying else checks.position_checks
    wanted = {f"{prefix}_{j}" for j in plan["positions"]}
    out = [checks.invariant_check(harness.name, rounds, "invariants_confirm_rounds")]
    for record in run(harness.name, rounds, plan["false_fail_rate_each"], profile):
        if record.check not in wanted:
            continue
        record.check = f"confirm_{record.check}"
        record.result.details.update(
            {"confirmatory": True, "confirm_epsilon_tv": plan["epsilon_tv"]}
        )
        detectable = record.result.detectable_tv
        if (
            record.passed
            and math.isfinite(detectable)
            and detectable > plan["epsilon_tv"] * PLANNING_MARGIN
        ):
            # too weak to confirm: the case stays unconfirmed
            record.result.details["confirmatory"] = False
        out.append(record)
    return out


def unsettled_reason(case: Case, plan: dict) -> str:
    """What would settle an unconfirmed case."""
    return (
        f"{case.name}: the rule accepts differently from the standard rule; confirming exactness at binned TV "
        f"{plan['epsilon_tv']:.3g} (min of the case's target and the observed deviation) on positions "
        f"{plan['positions']} needs "
        f"{plan['rounds']} rounds, over the cap {plan['cap']} -- run a larger profile, or certify on cases where "
        f"it accepts like the standard rule"
    )
