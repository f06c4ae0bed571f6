"""The rule level's hard checks (false-fail rate 0): the contract and the invariants on a case, with an ordinary
and with an adversarial Generator, determinism for a fixed seed, the per-round path of a batched adapter, and
the same invariants on Hypothesis-generated edge cases."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings

from ..core.contract import determinism_check, guard
from ..core.profiles import Profile
from ..core.records import CheckRecord, case_seed, hard_result
from . import checks, reach
from .adversarial import adversarial_generator, triggering_events
from .cases import Case
from .harness import Harness
from .strategies import round_cases


def invariant_records(harness: Harness, case: Case, profile: Profile) -> list[CheckRecord]:
    """Hard invariants with an ordinary Generator and with the adversarial one, plus determinism."""
    name, n = harness.name, profile.rule.invariant_rounds
    seed = case_seed(case.name, "invariants")
    first, err = guard(name, case.name, "invariants", lambda: harness.run(case, n, seed))
    if err or first is None:  # guard returns (value, None) or (None, the failed record)
        return [_failed(err)]
    out = [checks.invariant_check(name, first)]
    again, err = guard(name, case.name, "determinism", lambda: harness.run(case, n, seed))
    out.append(
        _failed(err)
        if again is None
        else determinism_check(name, case.name, first.tokens, again.tokens, first.n)
    )
    out.append(adversarial_record(harness, case, profile.rule.adversarial_rounds, seed + 1))
    if harness.has_batch:  # the per-round path must obey the contract too
        single, err = guard(
            name,
            case.name,
            "single_round_path",
            lambda: harness.run(case, min(50, n), seed + 2, force_single=True),
        )
        out.append(
            _failed(err)
            if single is None
            else checks.invariant_check(name, single, "single_round_path")
        )
    return out


def _failed(record: CheckRecord | None) -> CheckRecord:
    """The failed record of a `guard` that returned no value (it always carries one)."""
    assert record is not None, "guard returned neither a value nor a failed record"
    return record


def _adversarial_run(
    harness: Harness, case: Case, n: int, seed: int, events: Any = None
) -> tuple[CheckRecord, Any]:
    made = []

    def factory(s: int):
        made.append(
            adversarial_generator(s) if events is None else adversarial_generator(s, events=events)
        )
        return made[-1]

    rounds, err = guard(
        harness.name,
        case.name,
        "adversarial_rng",
        lambda: harness.run(case, n, seed, rng_factory=factory),
    )
    record = (
        _failed(err)
        if rounds is None
        else checks.invariant_check(harness.name, rounds, "adversarial_rng")
    )
    return record, (made[0] if made else None)


def adversarial_record(harness: Harness, case: Case, n: int, seed: int) -> CheckRecord:
    """Hard invariants under the adversarial Generator; the record says whether its extremes reached the
    implementation (`reach`) and, on a failure, which extreme event alone reproduces it and how often a real
    generator produces that event."""
    record, rng = _adversarial_run(harness, case, n, seed)
    record.result.details["rng_reach"] = reach.reach_summary(rng) if rng is not None else None
    if not record.passed:
        events = triggering_events(
            lambda ev: not _adversarial_run(harness, case, n, seed, ev)[0].passed
        )
        record.result.details["rng_events"] = events
        if events:
            note = "; ".join(
                f"{e['what']} (real generators: {e['real_probability_per_draw']})" for e in events
            )
            record.result = dataclasses.replace(
                record.result, message=f"{record.result.message} [RNG event: {note}]"
            )
    return record


def hypothesis_records(harness: Harness, profile: Profile) -> list[CheckRecord]:
    """Hard invariants on Hypothesis-generated edge cases (derandomized: same cases every run)."""

    failures: list[str] = []
    seen = [0]

    @settings(
        derandomize=True,
        database=None,
        max_examples=profile.rule.hypothesis_examples,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(round_cases())
    def prop(case):
        seen[0] += 1
        recs = []
        for label, factory in (("invariants", None), ("adversarial_rng", adversarial_generator)):
            rounds, err = guard(
                harness.name,
                case.name,
                label,
                lambda: harness.run(
                    case,
                    profile.rule.hypothesis_rounds,
                    case_seed(case.name, label),
                    rng_factory=factory,
                ),
            )
            recs.append(
                _failed(err)
                if rounds is None
                else checks.invariant_check(harness.name, rounds, label)
            )
        bad = [r for r in recs if not r.passed]
        if bad and len(failures) < 5:
            failures.append(f"{case.name}: {bad[0].result.message}")

    prop()
    ok = not failures
    msg = (
        f"generated_cases: PASS: {seen[0]} Hypothesis cases (V up to 50257, k 1..8, edge rows), "
        f"{profile.rule.hypothesis_rounds} rounds each, ordinary and adversarial Generator"
        if ok
        else "generated_cases: FAIL: " + " | ".join(failures)
    )
    res = hard_result(
        "generated_cases", ok, seen[0] * profile.rule.hypothesis_rounds, msg, {"n_cases": seen[0]}
    )
    return [CheckRecord(harness.name, "hypothesis", "generated_cases", "invariant", res)]
