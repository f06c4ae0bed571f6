"""The engine level declared to the core (`core.level.Level`): a serving engine certified black-box from two
sample files, its plain mode (the reference) and its speculative mode (the candidate).

What is certified is a `SamplePair`; a case is one prompt (`EngineCase`, carrying its data), read at positions
1..m, m the max_tokens both files asked. Per prompt the hard checks (`checks.hard_checks`), then the statistical
checks of `registry.ENGINE_CHECKS` (all anytime-valid but the greedy spread test). What only this level knows: which
prompts' reports are void (the reference's own tokens disagree with them: the law routes and the support check are
voided; decode-time and teacher-forced reports differ by more than the tolerance allows: every check that reads a
report is voided; never blamed on the candidate); whether a sampled prompt reached the profile's target by an
any-shape route (CERTIFIED) or only by the monotone one (QUALIFIED, `routes`); and the other reasons a run is
INCONCLUSIVE (speculation never observed, inputs that cannot support a certificate, a target not reached).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from ...errors import AdapterLoadError
from ...outcomes import Verdict
from ..core.driver import run_level
from ..core.level import Level
from ..core.mechanism import guarded
from ..core.profiles import Profile, get_profile
from ..core.records import CheckRecord
from ..core.report import SuiteResult
from . import hard
from .cases import EngineCase, SamplePair
from .checks import (
    PooledData,
    case_summary,
    check_comparable,
    engine_name,
    engine_summary,
    hard_checks,
    prompts,
    skipped_prompts,
)
from .diagnosis import diagnose
from .certificate import write_engine_report
from .check_table import (
    ENGINE_CHECKS,
    REFERENCE_SELF_CHECKS,
)
from .profile_settings import PROFILE_SETTINGS
from .result import LEVEL_NAME, EngineResult
from .routes import QUANTITY, prompt_routes, shortfall
from .samples import SampleFile, read_samples

#: The positions the alpha table's representative prompt is read at (a run reads 1..max_tokens).
REPRESENTATIVE_POSITIONS = 16


def sample_pair(impl: Any) -> SamplePair:
    """`impl` as a SamplePair: one already, or (REFERENCE, CANDIDATE) sample files or paths."""
    if isinstance(impl, SamplePair):
        return impl
    if isinstance(impl, (tuple, list)) and len(impl) == 2:
        reference, candidate = (
            read_samples(p) if isinstance(p, (str, os.PathLike)) else p for p in impl
        )
        return SamplePair(reference, candidate)
    raise AdapterLoadError(
        "the engine level certifies a pair of sample files: (REFERENCE.jsonl, CANDIDATE.jsonl)"
    )


def _coupling_holds(ruled: dict, pid: str) -> bool:
    """The prompt has a coupling route with no mismatched seed (it needs no report: `routes`)."""
    routes = ruled["per_prompt"].get(pid, {}).get("routes", [])
    return any(r["route"] == "coupling" and not r["mismatches"] for r in routes)


def input_reasons(
    pair: SamplePair, cases: list, records: list[CheckRecord], ruled: dict
) -> list[str]:
    """Why the files cannot support a certificate even when no check fails: a prompt dropped by one side, law checks
    that could not run on a sampled prompt (unless its coupling route, which needs no report, holds: then only
    more seeds can be missing), a check that ran on nothing."""
    reasons = []
    ref, cand = pair.reference.by_prompt(), pair.candidate.by_prompt()
    for pid in sorted(set(pair.reference.header.prompts) | set(pair.candidate.header.prompts)):
        n_ref, n_cand = len(ref.get(pid, [])), len(cand.get(pid, []))
        if (n_ref == 0) != (n_cand == 0):
            reasons.append(
                f"{pid}: dropped: the reference holds {n_ref} completions of it, the candidate {n_cand}"
            )
    for case in (case for case in cases if not case.member):
        if not case.greedy and not (case.law and case.positions > 1):
            if (
                not case.law
                and not case.data.unusable_reports
                and _coupling_holds(ruled, case.name)
            ):
                continue
            why = (
                f"its {case.data.unusable_reports} reports are raw, and the sampler chain warps"
                if case.data.unusable_reports
                else "no drafted position (max_tokens 1)"
                if case.positions < 2
                else "the reference holds no report for the candidate's prefixes (teacher forcing)"
            )
            reasons.append(f"{case.name}: the law checks did not run: {why}")
            continue
        if not case.greedy and case.data.unreported_reference:
            reasons.append(
                f"{case.name}: {case.data.unreported_reference} of the reference's tokens at positions "
                f"1..{case.positions} have no teacher-forced report at their prefix (teacher-force the "
                "reference's own prefixes too): the paired checks read both ends against one report"
            )
    reasons += [f"{r.case}: {r.check} ran on nothing (n = 0)" for r in records if r.result.n == 0]
    return reasons


def invalid_reports(records: list[CheckRecord], cases: list) -> dict[str, dict]:
    """{prompt: {"why", "premise"}} for the prompts whose reports are void: decode-time and teacher-forced reports
    of one prefix differ beyond the tolerance (`premise` True: every check that reads a report is void), or the
    reference's own tokens disagree with its reports (`reference_law` failed: the law routes and the support check)."""
    out = {
        r.case: {
            "why": "the reference's own tokens disagree with its reports (reference_law failed)",
            "premise": False,
        }
        for r in records
        if r.check in REFERENCE_SELF_CHECKS and not r.passed
    }
    for case in cases:
        premise = case.data.premise
        if premise is not None and not premise.holds:
            where = premise.where or {}
            out[case.name] = {
                "why": f"the report tolerance premise is contradicted: at seed {where.get('seed')} "
                f"position {where.get('position')} token {where.get('token')} the reference "
                f"reported {where.get('decode_time')} while sampling and "
                f"{where.get('teacher_forced')} teacher-forced, more than twice the tolerance "
                "apart",
                "premise": True,
            }
    pooled = next(
        (case.name for case in cases if case.data.pid == "pooled" and case.name in out), None
    )
    for case in cases:
        if pooled is not None and case.member and case.name not in out:
            out[case.name] = {
                **out[pooled],
                "why": f"the pooled run's reports are void: {out[pooled]['why']}",
            }
    return out


def ruled_out(
    records: list[CheckRecord], cases: list, profile: Profile, invalid: dict[str, dict]
) -> dict:
    """Per prompt: what its certificate rules out (greedy equality, or its routes) and which targets it reaches."""
    per_prompt: dict[str, dict] = {}
    failed = {r.case for r in records if not r.passed}
    for case in (case for case in cases if not case.member):
        if case.greedy:
            what = (
                "every candidate completion equals the reference's output"
                if not case.reference_varies
                else "the candidate leaves the reference's modal output no more often than the reference does"
            )
            ok = case.name not in failed
            per_prompt[case.name] = {
                "route": "greedy",
                "reached": ok,
                "any_shape_reached": ok,
                "what": what if ok else "nothing (a check of it failed)",
            }
        else:
            per_prompt[case.name] = prompt_routes(case, profile, case.name not in invalid)
    bounds = [v["best"]["bound"] for v in per_prompt.values() if v.get("best")]
    positions = max((case.positions for case in cases), default=0)
    return {
        "target": profile.engine.target_tv,
        "power": 1 - profile.false_pass_rate,
        "quantity": QUANTITY,
        "positions": [1, positions],
        "per_prompt": per_prompt,
        "largest": max(bounds) if bounds else None,
    }


def power_reasons(
    ruled: dict, profile: Profile, invalid: dict[str, dict]
) -> tuple[list[str], list[str]]:
    """(underpowered, qualified): the sampled prompts no route brought to the target, with what would, and those
    only the monotone route did (the bare CERTIFIED needs an any-shape route)."""
    target, underpowered, qualified = profile.engine.target_tv, [], []
    for pid, entry in ruled["per_prompt"].items():
        if entry.get("route") == "greedy" or entry["any_shape_reached"]:
            continue
        if pid in invalid:
            underpowered.append(
                f"{pid}: {invalid[pid]['why']}; its law routes are void and no coupling route "
                "reaches the target"
            )
        elif not entry["reached"]:
            underpowered.append(shortfall(pid, entry, target, profile.name))
        else:
            qualified.append(
                f"{pid}: the monotone law route rules out {entry['best']['bound']:.3g}, but "
                + shortfall(pid, entry, target, profile.name, any_shape=True).split(": ", 1)[1]
            )
    return underpowered, qualified


def coupling_notes(candidate: SampleFile, ruled: dict) -> list[str]:
    """Where the candidate declared seed coupling and a seed mismatched: the coupling is disproved, never exactness."""
    if not (candidate.header.speculation or {}).get("expect_seed_coupled"):
        return []
    notes = []
    for pid, entry in ruled["per_prompt"].items():
        route = next(
            (r for r in entry.get("routes", []) if r["route"] == "coupling" and r["mismatches"]),
            None,
        )
        if route is not None:
            notes.append(
                f"{pid}: the declared seed coupling is disproved ({route['mismatches']} of {route['seeds']} "
                f"seeds mismatched, first at seed {route['first_mismatch']['seed']}, "
                f"{route['first_mismatch']['what']}): not a failure of exactness; the law checks decide"
            )
    return notes


def unforced_notes(cases: list, ruled: dict) -> list[str]:
    """The sampled prompts without a report whose seed coupling holds: certified (or not) by coupling alone."""
    return [
        f"{case.name}: no teacher-forced report: the law checks did not run; its coupling route (no seed "
        "mismatched), which needs no report, decides"
        for case in cases
        if not case.member
        and not case.greedy
        and not case.law
        and not case.data.unusable_reports
        and _coupling_holds(ruled, case.name)
    ]


class EngineLevel(Level):
    """See the module docstring."""

    name = LEVEL_NAME
    checks = ENGINE_CHECKS
    profile_settings = PROFILE_SETTINGS
    input_hint = (
        "the engine level certifies a serving engine's sample files, not an adapter: exactspec "
        "certify-samples REFERENCE.jsonl CANDIDATE.jsonl"
    )
    per_case_instances = False
    #: The generation-level mutants the zoo names and exactspec's generators, served and collected at the profile's sizes.
    zoo = "exactspec.conformance.engine.serve.mutants:zoo"

    def own_input(self, impl: Any) -> tuple[SamplePair, str]:
        """The pair of sample files `impl` is or names, and the candidate's name."""
        pair = sample_pair(impl)
        return pair, engine_name(pair.candidate)

    def representative_cases(self, profile: Profile) -> list:
        """One sampling prompt with every check (what the alpha table states: n is the files')."""
        return [
            EngineCase(
                name="prompt_1", greedy=False, positions=REPRESENTATIVE_POSITIONS, load_labels=True
            )
        ]

    def select_cases(
        self, profile: Profile, impl: Any = None, names: Sequence[str] | None = None
    ) -> list:
        """One case per prompt with completions in both files (a pooled run: those as members, for their hard
        checks, and one pooled case for the statistics); ValueError when the files cannot be compared."""
        if not isinstance(impl, SamplePair):
            raise ValueError(
                f"the engine level certifies a SamplePair (reference, candidate), got {type(impl).__name__}"
            )
        check_comparable(impl.reference, impl.candidate)
        defaults = impl.reference.header.request_defaults
        parts = prompts(impl.reference, impl.candidate)
        cases = [data.case(defaults) for data in parts]
        if impl.pooled and not any(case.greedy for case in cases):
            pooled = PooledData(parts).case(defaults, max(case.positions for case in cases))
            cases = [replace(case, member=True) for case in cases] + [pooled]
        return [c for c in cases if names is None or c.name in set(names)]

    def invariants(
        self, subject: SamplePair, case: EngineCase, profile: Profile
    ) -> list[CheckRecord]:
        """The prompt's hard checks (the case carries its data: the statistical checks run on it, `Level.sample`)."""
        return hard_checks(case)

    def case_entry(self, case: EngineCase, sample: Any, records: list[CheckRecord]) -> dict:
        return case_summary(case.data, case)

    def new_result(self, impl_name: str, profile: Profile) -> SuiteResult:
        return EngineResult(level=LEVEL_NAME, impl=impl_name, profile=profile)

    def finish(self, result: SuiteResult, cases: list, impl: Any = None) -> None:
        """Speculation evidence, void reports, the certification routes, the reasons and what the verdict ignores."""
        assert isinstance(result, EngineResult), "new_result makes an EngineResult"
        skipped = skipped_prompts(impl.reference, impl.candidate)
        result.notes = skipped + [n for case in cases for n in case.notes] + result.notes
        prompt_cases = [case for case in cases if case.data.pid != "pooled"]
        evidence = hard.speculation_evidence(
            [c for case in prompt_cases for c in case.data.cand],
            impl.candidate.counters,
            declared=hard.speculation_declared(impl.candidate.header),
        )
        result.speculation_observed = evidence["observed"]
        result.invalid = invalid_reports(result.records, cases)
        ruled = ruled_out(result.records, cases, result.profile, result.invalid)
        result.notes += coupling_notes(impl.candidate, ruled)
        result.input_reasons = input_reasons(impl, cases, result.records, ruled)
        result.notes += unforced_notes(cases, ruled)
        result.uncovered = [
            case.name for case in cases if not case.greedy and case.data.unreported_reference
        ]
        result.underpowered, result.short_of_any_shape = power_reasons(
            ruled, result.profile, result.invalid
        )
        result.judge()
        result.extra = {
            "engine": {
                **engine_summary(
                    impl.reference, impl.candidate, evidence, [case.data for case in prompt_cases]
                ),
                "ruled_out": ruled,
                "pooled": impl.pooled,
            },
            "reasons": result.reasons,
        }
        # after the verdict, from it: the diagnosis never changes it
        if result.verdict == Verdict.NOT_EXACT:
            failed = [
                {"case": r.case, "check": r.check, "message": r.result.message}
                for r in result.counted
                if not r.passed
            ]
            result.extra["diagnosis"] = guarded(
                lambda: diagnose(
                    [case.data for case in prompt_cases if not case.greedy],
                    max((case.positions for case in prompt_cases), default=0),
                    impl.reference.header.request_defaults.get("temperature"),
                    failed,
                    impl.draft,
                )
            )

    def summary(self, result: SuiteResult) -> str:
        return f"exactspec certify-samples: {result.impl}: {result.verdict}"

    def first_token_failure(self, record: CheckRecord) -> bool:
        return record.category == "contract" or record.check in ("greedy_equality", "greedy_spread")

    def write_report(
        self, result: SuiteResult, out_dir: str | Path, impl_spec: str | None = None
    ) -> dict:
        assert isinstance(result, EngineResult), "new_result makes an EngineResult"
        return write_engine_report(result, out_dir)


LEVEL = EngineLevel()


def certify_samples(
    reference: SampleFile,
    candidate: SampleFile,
    profile: str | Profile = "standard",
    pooled: bool = False,
    draft: SampleFile | None = None,
) -> EngineResult:
    """Certify the candidate against the reference (`pooled`: the prompts together; `draft`: the draft's reports, for a
    NOT_EXACT's diagnosis only); every outcome is in the returned EngineResult."""
    result = run_level(
        LEVEL,
        SamplePair(reference, candidate, pooled, draft),
        engine_name(candidate),
        profile=get_profile(profile),
    )
    assert isinstance(result, EngineResult)
    return result
