"""The one driver of every level: plan -> invariants -> registered checks -> confirmation -> verdict -> report.

`run_level(level, impl, ...)` plans each case from the level's registered checks (`core.planning`), runs each
case as a task (`run_case_task`: the level's invariants, its sample, the registered checks on it) on the
executor it is given (`core.executor`: serially, local processes or a Dask cluster), then, where only
standard-rule checks failed, the level's confirmatory tests, and assembles one `SuiteResult` in case order.
A case's records depend only on the case, its seeds and a fresh implementation instance, so the result is
the same wherever the cases ran.
"""

from __future__ import annotations

import os
import platform
import time
from concurrent.futures import Executor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Callable, Iterator

from ...outcomes import Verdict
from ...errors import ContractViolation, ImplementationError, Unsupported
from .executor import ImplSource, impl_source, limit_threads, run_tasks, shuffled
from .level import CaseOutcome, Level
from .levels import get_level
from .planning import plan_case
from .profiles import Profile, get_profile
from .records import SEED_SALT_ENV, CheckRecord, hard_failure, set_seed_salt, verdict_of
from .registry import budget_for, run_registered
from .report import SuiteResult, summarize_budget

#: Versions that must agree between the driver and every worker for a certificate to be one run's.
PINNED = ("exactspec", "numpy", "scipy")


@dataclass(frozen=True)
class CaseTask:
    """One case of one run, as it travels to a worker (plain, picklable data)."""

    level: str
    source: ImplSource
    impl_name: str
    case: Any
    profile: str
    rate: float
    plan: dict
    fail_fast: bool = False
    salt: str = ""
    threads: int | None = None
    # set: run the level's confirmation on these records
    confirm: tuple[CheckRecord, ...] | None = None
    sampled: Any = None  # with `confirm`: what the level's confirmation reads from the case's sample (`confirm_input`)


def environment() -> dict:
    """The versions a case ran with (`PINNED`), and where."""
    out = {"host": platform.node(), "python": platform.python_version()}
    for name in PINNED:
        try:
            out[name] = version(name)
        except PackageNotFoundError:  # pragma: no cover - a source tree that is not installed
            out[name] = "unknown"
    return out


@contextmanager
def _salted(salt: str) -> Iterator[None]:
    """This task's run salt (`core.records.case_seed`): a Dask worker does not inherit the driver's environment."""
    old = set_seed_salt(salt)
    try:
        yield
    finally:
        set_seed_salt(old)


def case_records(
    level: Level,
    subject: Any,
    case: Any,
    profile: Profile,
    rate: float,
    plan: dict,
    fail_fast: bool = False,
) -> tuple[list[CheckRecord], Any]:
    """The records of one case: the level's invariants, then its sample and the registered checks on it."""
    records = level.invariants(subject, case, profile)
    if fail_fast and any(not r.passed for r in records):
        return records, None
    sample, hard = level.sample(subject, case, profile, plan)
    records += hard
    if sample is not None:
        records += run_registered(level, case, sample, rate, profile)
    return records, sample


def _case_outcome(level: Level, subject: Any, task: CaseTask, profile: Profile) -> CaseOutcome:
    outcome, sample = CaseOutcome(task.case.name, environment=environment()), None
    records: list[CheckRecord] = []
    start = time.perf_counter()
    try:
        records, sample = case_records(
            level, subject, task.case, profile, task.rate, task.plan, task.fail_fast
        )
    except Unsupported as error:
        outcome.entry = {"status": "unsupported", "reason": str(error)}
    except (ContractViolation, ImplementationError) as error:
        details = {
            "exception": getattr(error, "exc_type", None),
            "traceback": getattr(error, "traceback_text", None),
        }
        records.append(
            hard_failure(
                task.impl_name, task.case.name, "run", "contract", f"run: FAIL: {error}", details
            )
        )
        outcome.entry = {"status": "error", "reason": str(error)[:3000]}
    outcome.records = records
    outcome.sampled = None if sample is None else level.confirm_input(sample)
    outcome.entry = {
        **level.case_entry(task.case, sample, records),
        **outcome.entry,
        "seconds": round(time.perf_counter() - start, 2),
    }
    return outcome


def run_case_task(task: CaseTask) -> CaseOutcome:
    """One case (or its confirmation) on a fresh implementation instance; module-level: it runs in workers."""
    with _salted(task.salt):
        limit_threads(task.threads)
        level, profile = get_level(task.level), get_profile(task.profile)
        subject = level.harness(task.source.make(), task.impl_name)
        if task.confirm is None:
            return _case_outcome(level, subject, task, profile)
        extra, reasons = level.confirm(
            subject, task.case, profile, list(task.confirm), task.rate, task.plan, task.sampled
        )
        return CaseOutcome(
            task.case.name, records=extra, inconclusive=reasons, environment=environment()
        )


def needs_confirmation(records: list[CheckRecord]) -> bool:
    """Only standard-rule checks failed: exactness is then at stake and must be confirmed."""
    failed = [r for r in records if not r.passed]
    return bool(failed) and all(r.category == "standard_rule" for r in failed)


def _check_environments(outcomes: list[CaseOutcome]) -> None:
    here = environment()
    for outcome in outcomes:
        differ = {
            k: (here[k], outcome.environment.get(k))
            for k in PINNED
            if outcome.environment.get(k) != here[k]
        }
        if differ:
            raise ValueError(
                f"case {outcome.case} ran on {outcome.environment.get('host')} with other versions "
                f"(here, there): {differ}; every worker must run the same exactspec, numpy and scipy"
            )


def _confirm_phase(
    tasks: dict[str, CaseTask], by_case: dict[str, CaseOutcome], executor: Executor | None
) -> None:
    everything = [r for outcome in by_case.values() for r in outcome.records]
    if verdict_of(everything) in (Verdict.CONTRACT_VIOLATION, Verdict.NOT_EXACT):
        return  # no exactness claim is at stake
    needed = [
        replace(tasks[name], confirm=tuple(outcome.records), sampled=outcome.sampled)
        for name, outcome in by_case.items()
        if needs_confirmation(outcome.records)
    ]
    for extra in run_tasks(run_case_task, needed, executor):
        by_case[extra.case].records += extra.records
        by_case[extra.case].inconclusive += extra.inconclusive


def _fatal(outcome: CaseOutcome) -> bool:
    return any(not r.passed and r.category != "standard_rule" for r in outcome.records)


def run_level(
    level: Level | str,
    impl: Any,
    impl_name: str | None = None,
    *,
    profile: Profile | str = "standard",
    cases: list | None = None,
    executor: Executor | None = None,
    fail_fast: bool = False,
    spec: str | None = None,
    extras: bool = True,
    progress: Callable[[CaseOutcome], None] | None = None,
) -> SuiteResult:
    """Every check of `level` at `profile` on `impl`; each case on a fresh instance (re-loaded from `spec`, else a
    pickled copy of `impl`) on `executor` (None: serially here), in a seeded shuffled order; records in case order."""
    level = get_level(level) if isinstance(level, str) else level
    profile = get_profile(profile)
    cases = list(cases) if cases is not None else level.select_cases(profile, impl)
    impl_name = impl_name or spec or type(impl).__name__
    budget = budget_for(level, profile, cases)
    result = level.new_result(impl_name, profile)
    result.plan = {
        c.name: plan_case(level, c, profile, budget.per_check_false_fail_rate) for c in cases
    }
    source = (
        impl_source(level.name, impl, spec)
        if level.per_case_instances
        else ImplSource(level.name, shared=impl)
    )
    if executor is not None and not source.copyable:
        result.notes.append(
            "the implementation cannot be copied into workers: its cases ran serially in one instance"
        )
        executor = None
    salt = os.environ.get(SEED_SALT_ENV, "")
    tasks = {
        c.name: CaseTask(
            level.name,
            source,
            impl_name,
            c,
            profile.name,
            budget.per_check_false_fail_rate,
            result.plan[c.name],
            fail_fast,
            salt,
            None if executor is None else 1,
        )
        for c in cases
    }
    start = time.perf_counter()
    order = [tasks[c.name] for c in shuffled(cases, profile.name)]
    with level.running() if executor is None else nullcontext():
        outcomes = run_tasks(
            run_case_task,
            order,
            executor,
            stop=lambda o: (progress(o) if progress else None) or (fail_fast and _fatal(o)),
        )
        if executor is not None and progress:
            for outcome in outcomes:
                progress(outcome)
        _check_environments(outcomes)
        by_case = {o.case: o for o in outcomes}
        _confirm_phase(tasks, by_case, executor)
    for case in cases:  # report order: the cases' own
        if case.name in by_case:
            outcome = by_case[case.name]
            result.records += outcome.records
            result.cases.append(outcome.entry)
            result.inconclusive += outcome.inconclusive
            result.notes += outcome.notes
    if len(outcomes) < len(order):
        result.notes.append(f"stopped early (fail_fast) after case {outcomes[-1].case}")
    elif extras:
        result.records += level.run_extras(level.harness(source.make(), impl_name), profile)
    result.seconds = time.perf_counter() - start
    notes, extra = level.about(impl)
    result.notes += notes
    result.extra.update(extra)
    result.budget = summarize_budget(budget, result.records)
    level.finish(result, cases, impl)
    return result
