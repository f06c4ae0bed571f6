"""One planner for every level: a case's n is the smallest that lets each of its n-driving tests (declared in
the level's registry, `CheckPlan.drives_n`) detect the case's target binned TV with power 1 - false_pass_rate
at the per-check false-fail rate, by `stat_tests.plan_gof` (the likelihood-ratio test's proven tail, bins
pooled as the test pools them). Never guessed; capped only where the level has a cap, and the plan says so.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ...stat_tests import plan_gof
from ...stat_tests.binning import pool_bins
from .profiles import Profile
from .registry import CheckPlan, planned_checks

if TYPE_CHECKING:  # pragma: no cover
    from .level import Level

#: The tail sample sizes are planned with: the likelihood-ratio test's proven one (`stat_tests.lr_tail`).
PLANNING_TAIL = "lr_bound"
#: The smallest expected count per pooled bin every level's LR tests start from.
MIN_EXPECTED = 20.0


def samples_for(
    law: Any, epsilon_tv: float, rate: float, profile: Profile, max_bins: int | None
) -> tuple[int, int]:
    """(n, bins): samples so the LR test on `law`, pooled to <= max_bins bins, detects binned TV >= epsilon_tv
    w.p. >= 1 - false_pass_rate at false-fail rate `rate`."""
    n, bins = plan_gof(
        law,
        epsilon_tv,
        rate,
        profile.false_pass_rate,
        min_expected=MIN_EXPECTED,
        tail=PLANNING_TAIL,
        max_bins=max_bins,
    )
    return int(n), int(bins)


def pooled_bin_count(plan: CheckPlan, n: float, settings: Any) -> int:
    """Bins of `plan`'s law after pooling at `n` observations, as the test pools them."""
    if plan.law is None or n < 1:
        return 0
    me = plan.min_expected if plan.min_expected is not None else settings.min_expected(int(n))
    return max(2, int(pool_bins(plan.law, float(n), me)[1].size))


def driving_plans(level: "Level", case: Any, profile: Profile) -> list[CheckPlan]:
    return [
        p
        for check, _ in planned_checks(level, case)
        for p in check.plans(case, profile)
        if p.drives_n
    ]


def plan_case(level: "Level", case: Any, profile: Profile, rate: float) -> dict:
    """How many samples `case` takes and why: {n, bins, capped, primary, epsilon_tv, false_fail_rate}."""
    if not 0.0 < rate < 1.0:
        raise ValueError(f"rate must be in (0, 1), got {rate!r}")
    drivers = driving_plans(level, case, profile)
    if not drivers:
        return {
            "n": level.fixed_n(case, profile),
            "bins": None,
            "capped": False,
            "primary": None,
            "epsilon_tv": None,
            "false_fail_rate": rate,
        }
    eps = level.case_epsilon(case, profile)
    settings = profile.settings(level.name)
    # the levels whose tests drive n pool to at most this many bins
    max_bins = getattr(settings, "max_bins", None)
    sized = [
        (math.ceil(samples_for(p.law, eps, rate, profile, max_bins)[0] / p.reach), p)
        for p in drivers
    ]
    n, primary = max(sized, key=lambda item: item[0])
    n = max(int(n), level.min_n)
    cap = level.max_n(profile)
    capped = cap is not None and n > cap
    n = min(n, cap) if cap is not None else n
    return {
        "n": int(n),
        "bins": pooled_bin_count(primary, n * primary.reach, settings),
        "capped": bool(capped),
        "primary": primary.name,
        "epsilon_tv": eps,
        "false_fail_rate": rate,
    }
