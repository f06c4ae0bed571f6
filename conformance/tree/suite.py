"""Runs the tree level on one implementation and reaches the core's verdict.

Per case: the hard invariants and determinism, then the statistical checks the registry declares for the
tree level (`core.registry.TREE_CHECKS`), at the per-check false-fail rate `core.budget_for("tree", ...)`
gives, on n rounds planned from the profile's target TV. When only standard-rule checks fail on a case, a
confirmatory rerun of its exactness checks on 4x fresh rounds (marked ``confirmatory``) is what lets the
verdict be EXACT_NOT_STANDARD rather than INCONCLUSIVE (the core's rule, `core.records.verdict_of`).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..core.profiles import Profile, get_profile
from ..core.records import CheckRecord, case_seed, hard_failure
from ..core.registry import budget_for, run_registered
from ..core.report import SuiteResult, summarize_budget
from ..checks import PLANNING_TAIL
from . import checks
from .cases import TreeCase, cases_for
from .harness import TreeHarness
from ...errors import ContractViolation, ImplementationError
from ...stat_tests import required_samples
from ...stat_tests.binning import pool_bins

CONFIRM_FACTOR = 4


def primary_law(case: TreeCase) -> tuple[str, np.ndarray]:
    """The law a case's n is planned for: the path law if enumerable, else the stream, else the root row."""
    if case.enumerable:
        return "path_law", np.array(list(case.path_law.values()))
    if case.stream_enumerable:
        return "completed_stream", case.stream_law
    return "position_1", case.model.rows(())[0]


def plan_rounds(case: TreeCase, profile: Profile, rate: float) -> dict:
    """Rounds so the primary check detects binned TV >= the profile's target w.p. >= 1 - false_pass_rate."""
    name, law = primary_law(case)
    settings, n = profile.tree, 2
    for _ in range(60):
        bins = max(2, int(pool_bins(law, float(n), settings.min_expected(n))[1].size))
        n_new = required_samples(settings.target_tv, bins, rate, profile.false_pass_rate, tail=PLANNING_TAIL)
        if n_new <= n:
            break
        n = n_new
    capped = n > settings.max_rounds
    return {"n": int(min(n, settings.max_rounds)), "bins": bins, "capped": capped, "primary": name,
            "epsilon_tv": settings.target_tv}


def _guard(impl: str, case: TreeCase, check: str, fn):
    try:
        return fn(), None
    except ContractViolation as error:
        return None, hard_failure(impl, case.name, check, "contract", f"{check}: FAIL: contract violation: {error}")
    except ImplementationError as error:
        details = {"exception": error.exc_type, "traceback": error.traceback_text}
        return None, hard_failure(impl, case.name, check, "contract", f"{check}: FAIL: {error}", details)


def invariant_records(harness: TreeHarness, case: TreeCase, profile: Profile) -> list[CheckRecord]:
    """Invariants and determinism (and the per-tree path when the batched form is offered)."""
    n, seed = profile.tree.invariant_rounds, case_seed(case.name, "tree-invariants")
    a, err = _guard(harness.name, case, "invariants", lambda: harness.run(case, n, seed))
    if err:
        return [err]
    out = [checks.invariant_check(harness.name, a)]
    b, err = _guard(harness.name, case, "determinism", lambda: harness.run(case, n, seed))
    out.append(err or checks.determinism_check(harness.name, a, b))
    if harness.has_batch:
        single, err = _guard(harness.name, case, "single_tree_path", lambda: harness.run(case, n, seed + 1, single=True))
        out.append(err or checks.invariant_check(harness.name, single, "single_tree_path"))
    return out


def statistical_records(harness: TreeHarness, case: TreeCase, profile: Profile, rate: float, n: int) -> list[CheckRecord]:
    rounds, err = _guard(harness.name, case, "statistical", lambda: harness.run(case, n, case_seed(case.name, "tree")))
    if err:
        return [err]
    name = harness.name
    runners = {
        "position": lambda: checks.position_checks(name, rounds, rate, profile),
        "completed_stream": lambda: [checks.completed_stream_check(name, rounds, rate, profile,
                                                                   case_seed(case.name, "tree-stream"))],
        "path_law": lambda: [checks.path_law_check(name, rounds, rate, profile)],
        "tokens_per_round": lambda: [checks.tokens_per_round_check(name, rounds, rate, profile)],
    }
    out = [checks.invariant_check(name, rounds, "invariants_statistical_rounds")] + run_registered("tree", case, runners)
    for record in out:
        record.result.details.setdefault("seconds", rounds.seconds)
    return out


def confirmatory_records(harness: TreeHarness, case: TreeCase, profile: Profile, records: list[CheckRecord],
                         rate: float, n: int) -> list[CheckRecord]:
    """Only standard-rule checks failed on `case`: rerun its exactness checks on CONFIRM_FACTOR x n fresh rounds.

    Budget (as `conformance.confirm`): together they run at the rate of the case's standard-rule checks, split
    evenly; they run only after one of those failed, so for any exact rule the run's total stays the stated one."""
    if any(not r.passed and r.category != "standard_rule" for r in records):
        return []
    standard = [r for r in records if r.category == "standard_rule"]
    if all(r.passed for r in standard):
        return []
    seed = case_seed(case.name, "tree-confirm")
    rounds, err = _guard(harness.name, case, "confirm", lambda: harness.run(case, CONFIRM_FACTOR * n, seed))
    if err:
        return [err]
    each = rate * len(standard) / (case.max_length + int(case.stream_enumerable))
    out = checks.position_checks(harness.name, rounds, each, profile, prefix="confirm_", confirm=True)
    if case.stream_enumerable:
        out.append(checks.completed_stream_check(harness.name, rounds, each, profile, seed, "confirm_completed_stream",
                                                 confirm=True))
    return out


def run_tree_suite(impl: Any, impl_name: str, profile: Profile | str = "standard", cases: list[TreeCase] | None = None,
                   fail_fast: bool = False) -> SuiteResult:
    """Every tree-level check of `profile` on `impl` (an object with verify_tree / verify_tree_batch)."""
    profile = get_profile(profile)
    cases = list(cases if cases is not None else cases_for(profile.name))
    harness = TreeHarness(impl, impl_name)
    budget = budget_for("tree", profile, cases)
    rate = budget.per_check_false_fail_rate
    result = SuiteResult(level="tree", impl=impl_name, profile=profile)
    result.plan = {c.name: plan_rounds(c, profile, rate) for c in cases}
    start = time.perf_counter()
    for case in cases:
        records = invariant_records(harness, case, profile)
        records += statistical_records(harness, case, profile, rate, result.plan[case.name]["n"])
        records += confirmatory_records(harness, case, profile, records, rate, result.plan[case.name]["n"])
        result.records += records
        if fail_fast and result.verdict in ("CONTRACT_VIOLATION", "NOT_EXACT"):
            result.notes.append(f"stopped early (fail_fast) after case {case.name}")
            break
    result.seconds = time.perf_counter() - start
    result.cases = [case.summary() for case in cases if case.name in {r.case for r in result.records}]
    result.budget = summarize_budget(budget, result.records)
    return result
