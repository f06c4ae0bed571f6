"""Runs every check of a profile on one implementation and reaches a verdict.

Verdicts (worst first):
- CONTRACT_VIOLATION  the output breaks the interface (type, length, range), the implementation raised,
                      or it is not reproducible for a fixed seed;
- NOT_EXACT           a hard invariant failed (p=0 token, prefix != drafts) or a distribution check
                      rejected exactness;
- EXACT_NOT_STANDARD  every exactness check passed but the law of tokens per round differs from the
                      standard rule's (e.g. sampler-match: exact, accepts less);
- CERTIFIED           exact, and achieves the standard rule's acceptance.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from exactspec.conformance import checks
from exactspec.conformance.adversarial import adversarial_generator
from exactspec.conformance.cases import SUITE_CASES, Case
from exactspec.conformance.harness import ContractViolation, Harness, ImplementationError
from exactspec.conformance.profiles import Profile, budget_for, get_profile, plan_rounds

VERDICTS = ("CONTRACT_VIOLATION", "NOT_EXACT", "EXACT_NOT_STANDARD", "CERTIFIED")


def case_seed(case: Case, salt: str = "") -> int:
    """Fixed seed per case (CRC32 of its name): every run of the suite is deterministic."""
    return zlib.crc32(f"{case.name}|{salt}".encode())


def verdict_of(records: Iterable[checks.CheckRecord]) -> str:
    failed = {r.category for r in records if not r.passed}
    if "contract" in failed:
        return "CONTRACT_VIOLATION"
    if "invariant" in failed or "exactness" in failed:
        return "NOT_EXACT"
    if "standard_rule" in failed:
        return "EXACT_NOT_STANDARD"
    return "CERTIFIED"


def _guard(impl_name: str, case: Case, check: str, category: str, fn: Callable[[], Any]):
    """Run fn; turn contract violations and implementation errors into failed records."""
    try:
        return fn(), None
    except ContractViolation as error:
        return None, checks.hard_failure(impl_name, case.name, check, "contract", f"{check}: FAIL: contract violation: {error}")
    except ImplementationError as error:
        return None, checks.hard_failure(impl_name, case.name, check, "contract", f"{check}: FAIL: {error}")


def invariant_records(harness: Harness, case: Case, profile: Profile) -> list[checks.CheckRecord]:
    """Hard invariants with an ordinary Generator and with the adversarial one, plus determinism."""
    name = harness.name
    out = []
    seed = case_seed(case, "invariants")
    a, err = _guard(name, case, "invariants", "invariant", lambda: harness.run(case, profile.invariant_rounds, seed))
    if err:
        return [err]
    out.append(checks.invariant_check(name, a))
    b, err = _guard(name, case, "determinism", "contract", lambda: harness.run(case, profile.invariant_rounds, seed))
    out.append(err or checks.determinism_check(name, a, b))
    adv, err = _guard(name, case, "adversarial_rng", "invariant",
                      lambda: harness.run(case, profile.adversarial_rounds, seed + 1,
                                          rng_factory=lambda s: adversarial_generator(s)))
    out.append(err or checks.invariant_check(name, adv, "adversarial_rng"))
    if harness.has_batch:  # the per-round path must obey the contract too
        single, err = _guard(name, case, "single_round_path", "contract",
                             lambda: harness.run(case, min(50, profile.invariant_rounds), seed + 2, force_single=True))
        out.append(err or checks.invariant_check(name, single, "single_round_path"))
    return out


def statistical_records(harness: Harness, case: Case, profile: Profile, alpha: float,
                        n: int | None = None) -> list[checks.CheckRecord]:
    """Exactness (per position, whole tuple) and efficiency (law of N) on one case."""
    n = n or plan_rounds(case, profile, alpha)["n"]
    rounds, err = _guard(harness.name, case, "statistical", "contract",
                         lambda: harness.run(case, n, case_seed(case, "statistical")))
    if err:
        return [err]
    out = [checks.invariant_check(harness.name, rounds, "invariants_statistical_rounds")]
    out += checks.position_checks(harness.name, rounds, alpha, profile)
    if case.stream_enumerable:
        out.append(checks.completed_stream_check(harness.name, rounds, alpha, profile, case_seed(case, "stream")))
    if case.enumerable:
        out.append(checks.tuple_law_check(harness.name, rounds, alpha, profile))
    out.append(checks.count_law_check(harness.name, rounds, alpha, profile))
    for r in out:
        r.result.details.setdefault("seconds", rounds.seconds)
    return out


def hypothesis_records(harness: Harness, profile: Profile, seed: int = 0) -> list[checks.CheckRecord]:
    """Hard invariants on Hypothesis-generated edge cases (derandomized: same cases every run)."""
    from hypothesis import HealthCheck, Phase, given, settings

    from exactspec.conformance.strategies import round_cases

    failures: list[str] = []
    seen = [0]

    @settings(derandomize=True, database=None, max_examples=profile.hypothesis_examples, deadline=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(round_cases())
    def prop(case):
        seen[0] += 1
        recs = []
        for label, factory in (("invariants", None), ("adversarial_rng", adversarial_generator)):
            rounds, err = _guard(harness.name, case, label, "invariant",
                                 lambda: harness.run(case, profile.hypothesis_rounds, case_seed(case, label),
                                                     rng_factory=factory))
            recs.append(err or checks.invariant_check(harness.name, rounds, label))
        bad = [r for r in recs if not r.passed]
        if bad and len(failures) < 5:
            failures.append(f"{case.name}: {bad[0].result.message}")

    prop()
    ok = not failures
    msg = (f"generated_cases: PASS: {seen[0]} Hypothesis cases (V up to 50257, k 1..8, edge rows), "
           f"{profile.hypothesis_rounds} rounds each, ordinary and adversarial Generator" if ok else
           "generated_cases: FAIL: " + " | ".join(failures))
    res = checks._hard("generated_cases", seen[0] * profile.hypothesis_rounds, ok, msg, {"n_cases": seen[0]})
    return [checks.CheckRecord(harness.name, "hypothesis", "generated_cases", "invariant", res)]


@dataclass
class SuiteResult:
    impl: str
    profile: Profile
    records: list[checks.CheckRecord] = field(default_factory=list)
    plan: dict = field(default_factory=dict)
    seconds: float = 0.0
    budget: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return verdict_of(self.records)

    @property
    def failed(self) -> list[checks.CheckRecord]:
        return [r for r in self.records if not r.passed]

    def first_failure(self) -> checks.CheckRecord | None:
        order = {c: i for i, c in enumerate(checks.CATEGORIES)}
        bad = sorted(self.failed, key=lambda r: order[r.category])
        return bad[0] if bad else None


def run_suite(impl: Any, impl_name: str, profile: Profile | str = "standard", cases: list[Case] | None = None,
              progress: bool = False, fail_fast: bool = False, hypothesis: bool = True) -> SuiteResult:
    """All checks of `profile` on `impl` (an object with verify / verify_batch)."""
    profile = get_profile(profile) if isinstance(profile, str) else profile
    cases = list(cases or SUITE_CASES)
    harness = Harness(impl, impl_name)
    budget = budget_for(profile, cases)
    alpha = budget.per_check_alpha
    result = SuiteResult(impl_name, profile)
    result.plan = {c.name: plan_rounds(c, profile, alpha) for c in cases}
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
        if kind == "invariants":
            result.records += invariant_records(harness, case, profile)
        elif kind == "statistical":
            result.records += statistical_records(harness, case, profile, alpha, result.plan[case.name]["n"])
        else:
            result.records += hypothesis_records(harness, profile)
        if bar is not None:
            bar.update(1)
        if fail_fast and result.failed and result.verdict in ("CONTRACT_VIOLATION", "NOT_EXACT"):
            result.notes.append(f"stopped early (fail_fast) after {kind} {case.name if case else ''}")
            break
    if bar is not None:
        bar.close()
    result.seconds = time.perf_counter() - start
    stat = [r.result for r in result.records if r.category in ("exactness", "standard_rule")]
    result.budget = budget.summarize(stat) if stat else {}
    result.budget["per_check_alpha"] = alpha
    result.budget["n_checks_budgeted"] = budget.n_checks
    return result
