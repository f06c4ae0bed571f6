"""The engine level declared to the core (`core.level.Level`): a serving engine certified black-box from two
sample files, its plain mode (the reference) and its speculative mode (the candidate).

What is certified is a `SamplePair`; a case is one prompt (`EngineCase`, carrying its data). Per prompt the hard
checks (`checks.hard_checks`), then the statistical checks of `registry.ENGINE_CHECKS`. What only this level
knows: when a run is INCONCLUSIVE (speculation never observed; the reference's reported probabilities disagree
with its own samples, which voids that prompt's PIT; inputs that cannot support a certificate; a PIT too weak
for the profile's target mean per-token TV). Every case runs in this process on the one pair.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..core.level import Level
from ..core.profiles import Profile, get_profile
from ..core.records import CheckRecord
from ..core.report import SuiteResult
from ...stat_tests import units_for_mean_token_tv
from .registry import ENGINE_CHECKS, REFERENCE_SELF_CHECKS
from .cases import EngineCase, SamplePair
from .samples import SampleFile

LEVEL_NAME = "engine"
NOT_OBSERVED = "speculation not observed: the candidate's draft counters are all 0 or absent"


def input_reasons(pair: SamplePair, cases: list, records: list[CheckRecord]) -> list[str]:
    """Why the files cannot support a certificate even when no check fails: a prompt dropped by one side, a PIT
    that did not run, seed coupling disabled by non-determinism, a check that ran on nothing."""
    reasons = []
    ref, cand = pair.reference.by_prompt(), pair.candidate.by_prompt()
    for pid in sorted(set(pair.reference.header.prompts) | set(pair.candidate.header.prompts)):
        n_ref, n_cand = len(ref.get(pid, [])), len(cand.get(pid, []))
        if (n_ref == 0) != (n_cand == 0):
            reasons.append(f"{pid}: dropped: the reference holds {n_ref} completions of it, the candidate {n_cand}")
    for case in cases:
        if not case.greedy and not (case.pit and case.positions > 1):
            why = (f"its {case.data.unusable_reports} reports are raw, and the sampler chain warps" if
                   case.data.unusable_reports else "no drafted position (max_tokens 1)" if case.positions < 2 else
                   "the reference holds no report for its prefixes (teacher forcing)")
            reasons.append(f"{case.name}: the PIT did not run: {why}")
        reasons += [f"{case.name}: {note}" for note in case.notes if "seed-coupling check is disabled" in note]
    reasons += [f"{r.case}: {r.check} ran on nothing (n = 0)" for r in records if r.result.n == 0]
    return reasons


def power_reasons(records: list[CheckRecord], profile: Profile) -> list[str]:
    """The prompts whose candidate PIT cannot detect the profile's target mean per-token TV, with the number of
    completions that would (`stat_tests.units_for_mean_token_tv` at the same values per completion and slack)."""
    reasons, target = [], profile.engine.target_tv
    for r in records:
        details = r.result.details or {}
        detectable = details.get("detectable_mean_token_tv")
        if r.check != "pit_ks" or detectable is None or detectable <= target:
            continue
        needed = units_for_mean_token_tv(target, float(details["values_per_completion"]), r.result.false_fail_rate,
                                         profile.false_pass_rate, float(details.get("slack", 0.0)))
        reasons.append(f"{r.case}: underpowered: the PIT of {details['completions']} candidate completions detects "
                       f"a mean per-token TV >= {detectable:.3g} at the drafted positions, the {profile.name} profile's "
                       f"target is {target:g}: about {needed} completions of this prompt (reference teacher-forced "
                       "on them) would reach it")
    return reasons


def ruled_out(records: list[CheckRecord], cases: list, profile: Profile) -> dict:
    """What a CERTIFIED of this run rules out, per prompt: the mean per-token TV at the drafted positions its
    PIT detects (monotone deviations, power 1 - false_pass_rate), or exact equality at temperature 0."""
    pit = {r.case: r.result.details.get("detectable_mean_token_tv") for r in records if r.check == "pit_ks"}
    per_prompt = {case.name: ("greedy: every candidate completion equals the reference's" if case.greedy else
                              pit.get(case.name)) for case in cases}
    sampled = [v for v in per_prompt.values() if isinstance(v, float)]
    return {"metric": "mean per-token TV of the next-token law (on the reported top-N and the tail) at the drafted "
                      "positions 2..m",
            "class": "deviations monotone in the reference's probability (temperature, truncation, argmax pull); "
                     "deviations whose direction changes with the context cannot be ruled out by any test "
                     "(proofs/ARGUMENT.md, C14)",
            "target": profile.engine.target_tv, "power": 1 - profile.false_pass_rate,
            "per_prompt": per_prompt, "largest": max(sampled) if sampled else None}


def _invalid_references(records: list[CheckRecord]) -> list[str]:
    """The prompts whose reference's reported probabilities failed their check against its own samples."""
    return sorted({r.case for r in records if r.check in REFERENCE_SELF_CHECKS and not r.passed})


def voided_checks(records: list[CheckRecord]) -> list[str]:
    """"case/check" of the records whose reference is invalid: the failed reported-probability check of a
    prompt and that prompt's PIT (they judge the reference's reports, not the candidate)."""
    bad = set(_invalid_references(records))
    return [f"{r.case}/{r.check}" for r in records if r.case in bad and r.check in (*REFERENCE_SELF_CHECKS, "pit_ks")]


def inconclusive_reasons(records: list[CheckRecord], speculation_observed: bool) -> list[str]:
    """Why the run cannot certify even if no counted check fails."""
    reasons = [f"{case}: the reference's reported probabilities disagree with its own samples; its PIT is void"
               for case in _invalid_references(records)]
    return reasons + ([] if speculation_observed else [NOT_OBSERVED])


@dataclass
class EngineResult(SuiteResult):
    """A core SuiteResult at level "engine" that knows whether the candidate speculated."""

    speculation_observed: bool = False
    input_reasons: list[str] = field(default_factory=list)  # what the files hold that keeps the run from certifying

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.level != LEVEL_NAME:
            raise ValueError(f"level must be {LEVEL_NAME!r}, got {self.level!r}")
        self.judge()

    def judge(self) -> None:
        """Set `voided` and `inconclusive` from the records and the speculation evidence (done on construction;
        call again after changing `records`)."""
        self.voided = voided_checks(self.records)
        self.inconclusive = inconclusive_reasons(self.records, self.speculation_observed) + list(self.input_reasons)

    @property
    def reasons(self) -> list[str]:
        """The verdict's reasons: the counted failures, else why the run is inconclusive (empty: CERTIFIED)."""
        failures = [f"{r.case}: {r.result.message}" for r in self.counted if not r.passed]
        return failures or list(self.inconclusive)


class EngineLevel(Level):
    """See the module docstring."""

    name = LEVEL_NAME
    checks = ENGINE_CHECKS
    per_case_instances = False

    def select_cases(self, profile: Profile, impl: Any = None, names: Sequence[str] | None = None) -> list:
        """One case per prompt with completions in both files; ValueError when the files cannot be compared."""
        from .checks import check_comparable, prompts

        if not isinstance(impl, SamplePair):
            raise ValueError(f"the engine level certifies a SamplePair (reference, candidate), got {type(impl).__name__}")
        check_comparable(impl.reference, impl.candidate)
        defaults = impl.reference.header.request_defaults
        cases = [data.case(profile.engine.positions, defaults) for data in prompts(impl.reference, impl.candidate, [])]
        return [c for c in cases if names is None or c.name in set(names)]

    def load(self, spec: str) -> Any:
        raise ValueError("the engine level reads sample files: exactspec certify-samples REFERENCE CANDIDATE")

    def sample(self, subject: SamplePair, case: EngineCase, profile: Profile, plan: dict) -> tuple[Any, list[CheckRecord]]:
        """The prompt's hard checks; the case itself (with its data) is what the statistical checks run on."""
        from .checks import hard_checks

        coupled = bool((subject.candidate.header.speculation or {}).get("expect_seed_coupled"))
        return case, hard_checks(case, coupled, case.notes)

    def case_entry(self, case: EngineCase, sample: Any, records: list[CheckRecord]) -> dict:
        from .checks import case_summary

        return case_summary(case.data, case)

    def new_result(self, impl_name: str, profile: Profile) -> SuiteResult:
        return EngineResult(level=LEVEL_NAME, impl=impl_name, profile=profile)

    def finish(self, result: SuiteResult, cases: list, impl: Any = None) -> None:
        """Speculation evidence, determinism, the reasons and what the verdict ignores."""
        from . import hard
        from .checks import engine_summary, prompts as paired_prompts

        assert isinstance(result, EngineResult), "new_result makes an EngineResult"
        skipped: list[str] = []
        paired_prompts(impl.reference, impl.candidate, skipped)
        result.notes = skipped + [n for case in cases for n in case.notes] + result.notes
        prompts = [case.data for case in cases]
        evidence = hard.speculation_evidence([c for data in prompts for c in data.cand])
        result.speculation_observed = evidence["observed"]
        result.input_reasons = input_reasons(impl, cases, result.records) + power_reasons(result.records,
                                                                                          result.profile)
        result.judge()
        result.extra = {"engine": {**engine_summary(impl.reference, impl.candidate, evidence, prompts),
                                   "ruled_out": ruled_out(result.records, cases, result.profile)},
                        "reasons": result.reasons}

    def summary(self, result: SuiteResult) -> str:
        return f"exactspec certify-samples: {result.impl}: {result.verdict}"

    def mutants(self, profile: str = "quick") -> list:
        """exactspec's generators and the generation-level mutants, served and collected at `profile` sizes."""
        from .serve.mutants import subjects

        return subjects(profile)

    def first_token_failure(self, record: CheckRecord) -> bool:
        return record.category == "contract" or record.check in ("position_1_permutation", "greedy_equality")

    def write_report(self, result: SuiteResult, out_dir: str | Path, impl_spec: str | None = None) -> dict:
        from .report import write_engine_report

        assert isinstance(result, EngineResult), "new_result makes an EngineResult"
        return write_engine_report(result, out_dir)


LEVEL = EngineLevel()


def certify_samples(reference: SampleFile, candidate: SampleFile, profile: str | Profile = "standard") -> EngineResult:
    """Certify the candidate against the reference; every outcome is in the returned EngineResult."""
    from ..core.driver import run_level
    from .checks import engine_name

    result = run_level(LEVEL, SamplePair(reference, candidate), engine_name(candidate), profile=get_profile(profile))
    assert isinstance(result, EngineResult)
    return result
