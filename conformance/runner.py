"""Runs every check of a profile on one implementation (rule level) and reaches a verdict.

The verdicts, categories, records and seeds are the core's (`exactspec.conformance.core`); the
statistical checks that run on a case are those the registry declares for the rule level
(`core.registry.RULE_CHECKS`), so the error budget (`core.budget_for("rule", ...)`) counts exactly them.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from exactspec.conformance import checks
from exactspec.conformance.adversarial import adversarial_generator
from exactspec.conformance.cases import SUITE_CASES, Case
from exactspec.conformance.core.profiles import Profile, get_profile
from exactspec.conformance.core.records import VERDICTS, CheckRecord, case_seed, hard_result, verdict_of
from exactspec.conformance.core.registry import budget_for, run_registered
from exactspec.conformance.core.report import SuiteResult, summarize_budget
from exactspec.conformance.harness import ContractViolation, Harness, ImplementationError
from exactspec.conformance.profiles import plan_rounds

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
    adv, err = _guard(name, case, "adversarial_rng", "invariant",
                      lambda: harness.run(case, profile.rule.adversarial_rounds, seed + 1,
                                          rng_factory=lambda s: adversarial_generator(s)))
    out.append(err or checks.invariant_check(name, adv, "adversarial_rng"))
    if harness.has_batch:  # the per-round path must obey the contract too
        single, err = _guard(name, case, "single_round_path", "contract",
                             lambda: harness.run(case, min(50, profile.rule.invariant_rounds), seed + 2, force_single=True))
        out.append(err or checks.invariant_check(name, single, "single_round_path"))
    return out


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
    runners = {
        "position": lambda: checks.position_checks(name, rounds, rate, profile),
        "completed_stream": lambda: [checks.completed_stream_check(name, rounds, rate, profile,
                                                                   case_seed(case.name, "stream"))],
        "tuple_law": lambda: [checks.tuple_law_check(name, rounds, rate, profile)],
        "tokens_per_round": lambda: [checks.count_law_check(name, rounds, rate, profile)],
    }
    out = [checks.invariant_check(name, rounds, "invariants_statistical_rounds")]
    out += run_registered("rule", case, runners)
    for r in out:
        r.result.details.setdefault("seconds", rounds.seconds)
    return out


def hypothesis_records(harness: Harness, profile: Profile, seed: int = 0) -> list[CheckRecord]:
    """Hard invariants on Hypothesis-generated edge cases (derandomized: same cases every run)."""
    from hypothesis import HealthCheck, Phase, given, settings

    from exactspec.conformance.strategies import round_cases

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
    return result


def _run_step(kind: str, case: Case | None, harness: Harness, result: SuiteResult, rate: float) -> None:
    if kind == "invariants":
        result.records += invariant_records(harness, case, result.profile)
    elif kind == "statistical":
        result.records += statistical_records(harness, case, result.profile, rate, result.plan[case.name]["n"])
    else:
        result.records += hypothesis_records(harness, result.profile)


def run_suite(impl: Any, impl_name: str, profile: Profile | str = "standard", cases: list[Case] | None = None,
              progress: bool = False, fail_fast: bool = False, hypothesis: bool = True) -> SuiteResult:
    """All rule-level checks of `profile` on `impl` (an object with verify / verify_batch)."""
    profile = get_profile(profile)
    cases = list(cases or SUITE_CASES)
    harness = Harness(impl, impl_name)
    rate = budget_for("rule", profile, cases).per_check_false_fail_rate
    result = SuiteResult(level="rule", impl=impl_name, profile=profile)
    result.plan = {c.name: plan_rounds(c, profile, rate) for c in cases}
    start = time.perf_counter()
    steps = [("invariants", c) for c in cases] + [("statistical", c) for c in cases]
    if hypothesis:
        steps.append(("hypothesis", None))
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=len(steps), desc=f"certify {impl_name} [{profile.name}]", unit="step")
    for kind, case in steps:
        if bar is not None:
            bar.set_postfix_str(f"{kind} {case.name if case else ''}"[:40])
        _run_step(kind, case, harness, result, rate)
        if bar is not None:
            bar.update(1)
        if fail_fast and result.verdict in ("CONTRACT_VIOLATION", "NOT_EXACT"):
            result.notes.append(f"stopped early (fail_fast) after {kind} {case.name if case else ''}")
            break
    if bar is not None:
        bar.close()
    result.seconds = time.perf_counter() - start
    return finish_result(result, cases)
