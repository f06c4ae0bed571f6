"""Runs every check of a profile on one implementation (rule level) and reaches a verdict.

The verdicts, categories, records and seeds are the core's (`exactspec.conformance.core`); the
statistical checks that run on a case are those the registry declares for the rule level
(`core.registry.RULE_CHECKS`), so the error budget (`core.budget_for("rule", ...)`) counts exactly them.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import numpy as np

from . import case_checks, checks, confirm, findings, parallel, reach
from .adversarial import adversarial_generator
from .cases import SUITE_CASES, Case
from .core.profiles import Profile, get_profile
from .core.records import VERDICTS, CheckRecord, case_seed, hard_result, verdict_of
from .core.registry import budget_for, planned_checks, planned_names, run_registered
from .core.report import SuiteResult, summarize_budget
from .harness import ContractViolation, Harness, ImplementationError
from .parallel import ImplSource
from .profiles import plan_rounds

__all__ = ["VERDICTS", "SuiteResult", "case_seed", "hypothesis_records", "invariant_records", "run_suite",
           "statistical_records", "verdict_of", "finish_result"]


def _guard(impl_name: str, case: Case, check: str, category: str, fn: Callable[[], Any]):
    """Run fn; turn contract violations and implementation errors into failed records."""
    try:
        return fn(), None
    except ContractViolation as error:
        return None, checks.hard_failure(impl_name, case.name, check, "contract", f"{check}: FAIL: contract violation: {error}")
    except ImplementationError as error:
        details = {"exception": getattr(error, "exc_type", None), "traceback": getattr(error, "traceback_text", None)}
        return None, checks.hard_failure(impl_name, case.name, check, "contract", f"{check}: FAIL: {error}", details)


def invariant_records(harness: Harness, case: Case, profile: Profile) -> list[CheckRecord]:
    """Hard invariants with an ordinary Generator and with the adversarial one, plus determinism."""
    name = harness.name
    out = []
    seed = case_seed(case.name, "invariants")
    a, err = _guard(name, case, "invariants", "invariant", lambda: harness.run(case, profile.rule.invariant_rounds, seed))
    if err:
        return [err]
    out.append(checks.invariant_check(name, a))
    b, err = _guard(name, case, "determinism", "contract", lambda: harness.run(case, profile.rule.invariant_rounds, seed))
    out.append(err or checks.determinism_check(name, a, b))
    out.append(adversarial_record(harness, case, profile.rule.adversarial_rounds, seed + 1))
    if harness.has_batch:  # the per-round path must obey the contract too
        single, err = _guard(name, case, "single_round_path", "contract",
                             lambda: harness.run(case, min(50, profile.rule.invariant_rounds), seed + 2, force_single=True))
        out.append(err or checks.invariant_check(name, single, "single_round_path"))
    return out


def _adversarial_run(harness: Harness, case: Case, n: int, seed: int, events=None) -> tuple[CheckRecord, Any]:
    made = []

    def factory(s: int):
        made.append(adversarial_generator(s) if events is None else adversarial_generator(s, events=events))
        return made[-1]

    rounds, err = _guard(harness.name, case, "adversarial_rng", "invariant",
                         lambda: harness.run(case, n, seed, rng_factory=factory))
    return (err or checks.invariant_check(harness.name, rounds, "adversarial_rng")), (made[0] if made else None)


def adversarial_record(harness: Harness, case: Case, n: int, seed: int) -> CheckRecord:
    """Hard invariants under the adversarial Generator; the record says whether its extremes reached the
    implementation (`reach`) and, on a failure, which extreme event alone reproduces it and how often a real
    generator produces that event."""
    record, rng = _adversarial_run(harness, case, n, seed)
    record.result.details["rng_reach"] = reach.reach_summary(rng) if rng is not None else None
    if not record.passed:
        events = reach.triggering_events(lambda ev: not _adversarial_run(harness, case, n, seed, ev)[0].passed)
        record.result.details["rng_events"] = events
        if events:
            note = "; ".join(f"{e['what']} (real generators: {e['real_probability_per_draw']})" for e in events)
            record.result = dataclasses.replace(record.result, message=f"{record.result.message} [RNG event: {note}]")
    return record


def statistical_records(harness: Harness, case: Case, profile: Profile, false_fail_rate: float,
                        n: int | None = None) -> list[CheckRecord]:
    """The registry's statistical checks on one case (exactness per position and of the completed stream,
    standard rule: whole tuple, law of N), each at `false_fail_rate`, plus the invariants of those rounds."""
    n = n or plan_rounds(case, profile, false_fail_rate)["n"]
    rounds, err = _guard(harness.name, case, "statistical", "contract",
                         lambda: harness.run(case, n, case_seed(case.name, "statistical")))
    if err:
        return [err]
    name, rate = harness.name, false_fail_rate
    acceptance = None
    if "acceptance_rate" in planned_names("rule", case):
        n_acc = case_checks.acceptance_rounds(float(case.alphas[0]), rate, profile.false_pass_rate)
        acceptance, err = _guard(name, case, "acceptance_rate", "contract",
                                 lambda: harness.run(case, n_acc, case_seed(case.name, "acceptance")))
        if err:
            return [err]
    runners = {
        "pit_position": lambda: case_checks.pit_position_checks(name, rounds, rate, profile),
        "hashed_position": lambda: [case_checks.hashed_position_check(name, rounds, rate, profile)],
        "acceptance_rate": lambda: [case_checks.acceptance_rate_check(name, acceptance, rate, profile)],
        "position": lambda: checks.position_checks(name, rounds, rate, profile),
        "completed_stream": lambda: [checks.completed_stream_check(name, rounds, rate, profile,
                                                                   case_seed(case.name, "stream"))],
        "tuple_law": lambda: [checks.tuple_law_check(name, rounds, rate, profile)],
        "tokens_per_round": lambda: [checks.count_law_check(name, rounds, rate, profile)],
    }
    out = [checks.invariant_check(name, rounds, "invariants_statistical_rounds")]
    out[0].result.details["reach"] = [float(np.mean(rounds.counts >= j)) for j in range(1, case.k + 2)]
    out += run_registered("rule", case, runners)
    for r in out:
        r.result.details.setdefault("seconds", rounds.seconds)
    return out


def confirmatory_records(harness: Harness, case: Case, profile: Profile, records: list[CheckRecord],
                         false_fail_rate: float) -> tuple[list[CheckRecord], list[str]]:
    """If a standard-rule check failed on `case` (and nothing worse did), the confirmatory exactness tests of
    `conformance.confirm` on fresh rounds; else nothing. Returns (records, reasons the case stays unsettled)."""
    if any(not r.passed and r.category != "standard_rule" for r in records):
        return [], []
    if all(r.passed for r in records if r.category == "standard_rule"):
        return [], []
    reach = next((r.result.details["reach"] for r in records if "reach" in r.result.details), None)
    if reach is None:
        return [], [f"{case.name}: no statistical rounds to size a confirmatory test from"]
    n_standard = sum(len(names) for check, names in planned_checks("rule", case) if check.category == "standard_rule")
    plan = confirm.confirm_plan(case, profile, reach, confirm.observed_deviation(records), n_standard * false_fail_rate)
    if not plan["feasible"]:
        return [], [confirm.unsettled_reason(case, plan)]
    out, err = _guard(harness.name, case, "confirm", "contract", lambda: confirm.confirm_case(harness, case, profile, plan))
    return (out if err is None else [err]), []


def hypothesis_records(harness: Harness, profile: Profile, seed: int = 0) -> list[CheckRecord]:
    """Hard invariants on Hypothesis-generated edge cases (derandomized: same cases every run)."""
    from hypothesis import HealthCheck, Phase, given, settings

    from .strategies import round_cases

    failures: list[str] = []
    seen = [0]

    @settings(derandomize=True, database=None, max_examples=profile.rule.hypothesis_examples, deadline=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(round_cases())
    def prop(case):
        seen[0] += 1
        recs = []
        for label, factory in (("invariants", None), ("adversarial_rng", adversarial_generator)):
            rounds, err = _guard(harness.name, case, label, "invariant",
                                 lambda: harness.run(case, profile.rule.hypothesis_rounds, case_seed(case.name, label),
                                                     rng_factory=factory))
            recs.append(err or checks.invariant_check(harness.name, rounds, label))
        bad = [r for r in recs if not r.passed]
        if bad and len(failures) < 5:
            failures.append(f"{case.name}: {bad[0].result.message}")

    prop()
    ok = not failures
    msg = (f"generated_cases: PASS: {seen[0]} Hypothesis cases (V up to 50257, k 1..8, edge rows), "
           f"{profile.rule.hypothesis_rounds} rounds each, ordinary and adversarial Generator" if ok else
           "generated_cases: FAIL: " + " | ".join(failures))
    res = hard_result("generated_cases", ok, seen[0] * profile.rule.hypothesis_rounds, msg, {"n_cases": seen[0]})
    return [CheckRecord(harness.name, "hypothesis", "generated_cases", "invariant", res)]


def finish_result(result: SuiteResult, cases: list[Case]) -> SuiteResult:
    """Fill in the plan, case summaries and error budget of a rule-level result from its records (the
    budget counts the statistical checks the registry plans on `cases`, whether or not all ran)."""
    budget = budget_for("rule", result.profile, cases)
    rate = budget.per_check_false_fail_rate
    seen = {r.case for r in result.records}
    result.plan = result.plan or {c.name: plan_rounds(c, result.profile, rate) for c in cases if c.name in seen}
    result.cases = [dict(c.summary(), name=c.name) for c in cases if c.name in result.plan]
    result.budget = summarize_budget(budget, result.records)
    deviations = {f"{r.case}/{r.check}": {"observed_tv_binned": r.result.details["observed_tv_binned"],
                                          "null_mean": r.result.details.get("observed_tv_binned_null_mean"),
                                          "p_value": r.result.p_value}
                  for r in result.records if not r.passed and "observed_tv_binned" in r.result.details}
    result.extra["measured_deviations"] = deviations
    result.extra["findings"] = findings.group_findings(result.records)
    reach_info = findings.run_reach(result.records)
    result.extra["adversarial_reach"] = reach_info
    if reach_info and not reach_info["reached"]:
        result.notes.append(reach_info["message"])
    return result


def case_work(source: ImplSource, impl_name: str, case: Case, profile_name: str, rate: float, n: int,
              fail_fast: bool = False) -> tuple[str, list[CheckRecord], list[str]]:
    """The invariants and statistical checks of one case on a fresh instance (confirmatory tests come after
    every case ran, `_confirm_phase`). Returns (case name, records, []). Module-level: it runs in workers."""
    profile = get_profile(profile_name)
    harness = Harness(source.make(), impl_name)
    records = invariant_records(harness, case, profile)
    if fail_fast and any(not r.passed for r in records):
        return case.name, records, []
    return case.name, records + statistical_records(harness, case, profile, rate, n), []


def confirm_work(source: ImplSource, impl_name: str, case: Case, profile_name: str, rate: float,
                 records: list[CheckRecord]) -> tuple[str, list[CheckRecord], list[str]]:
    """The confirmatory tests of one case on a fresh instance (module-level: it runs in workers)."""
    harness = Harness(source.make(), impl_name)
    extra, reasons = confirmatory_records(harness, case, get_profile(profile_name), records, rate)
    return case.name, extra, reasons


def _confirm_phase(source: ImplSource, impl_name: str, cases: list[Case], profile: Profile, rate: float,
                   by_case: dict, workers: int) -> None:
    """Confirm exactness where only standard-rule checks failed -- skipped when a failure elsewhere already
    makes the run NOT_EXACT or a contract violation (no exactness claim is then at stake)."""
    everything = [r for records, _ in by_case.values() for r in records]
    if verdict_of(everything) in ("CONTRACT_VIOLATION", "NOT_EXACT"):
        return
    needed = [c for c in cases if c.name in by_case
              and any(r.category == "standard_rule" and not r.passed for r in by_case[c.name][0])]
    tasks = [(impl_name, c, profile.name, rate, by_case[c.name][0]) for c in needed]
    for name, extra, reasons in parallel.run_cases(confirm_work, source, tasks, workers):
        by_case[name] = (by_case[name][0] + extra, by_case[name][1] + reasons)


def _fatal(outcome) -> bool:
    return any(not r.passed and r.category in ("contract", "invariant", "exactness") for r in outcome[1])


def run_suite(impl: Any, impl_name: str, profile: Profile | str = "standard", cases: list[Case] | None = None,
              progress: bool = False, fail_fast: bool = False, hypothesis: bool = True, workers: int = 1,
              spec: str | None = None) -> SuiteResult:
    """All rule-level checks of `profile` on `impl` (an object with verify / verify_batch): each case on a fresh
    instance (re-loaded from `spec`, else a pickled copy of `impl`), cases in a seeded shuffled order, in
    `workers` processes; records are reported in case order."""
    profile = get_profile(profile)
    cases = list(cases or SUITE_CASES)
    rate = budget_for("rule", profile, cases).per_check_false_fail_rate
    result = SuiteResult(level="rule", impl=impl_name, profile=profile)
    result.plan = {c.name: plan_rounds(c, profile, rate) for c in cases}
    source = parallel.impl_source(impl, spec)
    if not source.copyable:
        result.notes.append("the implementation object cannot be pickled: one instance served every case")
    start = time.perf_counter()
    order = parallel.shuffled(cases, profile.name)
    if fail_fast:  # stop as early as possible: cheap cases first (each case has its own instance anyway)
        order.sort(key=lambda c: result.plan[c.name]["n"] * c.V * (c.k + 1))
    tasks = [(impl_name, c, profile.name, rate, result.plan[c.name]["n"], fail_fast) for c in order]
    bar = _progress_bar(progress, len(tasks), f"certify {impl_name} [{profile.name}]")
    outcomes = parallel.run_cases(case_work, source, tasks, workers,
                                  stop=(lambda o: _tick(bar) or (fail_fast and _fatal(o))))
    by_case = {name: (records, reasons) for name, records, reasons in outcomes}
    _confirm_phase(source, impl_name, cases, profile, rate, by_case, workers)
    for case in cases:  # report order: the cases' own
        records, reasons = by_case.get(case.name, ([], []))
        result.records += records
        result.inconclusive += reasons
    if len(outcomes) < len(tasks):
        result.notes.append(f"stopped early (fail_fast) after case {outcomes[-1][0]}")
    elif hypothesis:
        result.records += hypothesis_records(Harness(source.make(), impl_name), profile)
    if bar is not None:
        bar.close()
    result.seconds = time.perf_counter() - start
    return finish_result(result, cases)


def _progress_bar(enabled: bool, total: int, label: str):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=label, unit="case")


def _tick(bar) -> bool:
    if bar is not None:
        bar.update(1)
    return False
