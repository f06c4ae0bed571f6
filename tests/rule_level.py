"""The rule level's entry points as the project's tests call them (a case list of objects, a worker count),
on the core's driver: one line each, so the tests read as before the level moved onto the core."""

from __future__ import annotations

from typing import Any

from exactspec.conformance.core.driver import run_level
from exactspec.conformance.core.executor import case_executor
from exactspec.conformance.core.planning import plan_case
from exactspec.conformance.core.profiles import Profile
from exactspec.conformance.core.records import CheckRecord, verdict_of  # noqa: F401 -- re-exported for the tests
from exactspec.conformance.core.registry import planned_names
from exactspec.conformance.core.report import SuiteResult
from exactspec.conformance.rule.invariants import invariant_records  # noqa: F401 -- re-exported for the tests
from exactspec.conformance.rule.level import LEVEL, statistical_records  # noqa: F401 -- re-exported for the tests


def run_suite(
    impl: Any,
    name: str,
    profile: str | Profile = "standard",
    cases: list | None = None,
    hypothesis: bool = True,
    workers: int = 1,
    fail_fast: bool = False,
    spec: str | None = None,
) -> SuiteResult:
    with case_executor(workers) as executor:
        return run_level(
            LEVEL,
            impl,
            name,
            profile=profile,
            cases=cases,
            executor=executor,
            extras=hypothesis,
            fail_fast=fail_fast,
            spec=spec,
        )


def confirmatory_records(
    harness: Any, case: Any, profile: Profile, records: list[CheckRecord], rate: float
) -> tuple[list[CheckRecord], list[str]]:
    reach = next((r.result.details["reach"] for r in records if "reach" in r.result.details), None)
    return LEVEL.confirm(harness, case, profile, records, rate, {}, reach)


def plan_rounds(case: Any, profile: Profile, rate: float) -> dict:
    return plan_case(LEVEL, case, profile, rate)


def statistical_checks(case: Any) -> list[str]:
    return planned_names(LEVEL, case)
