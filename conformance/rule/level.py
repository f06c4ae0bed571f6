"""The rule level declared to the core (`core.level.Level`): one verification round per call.

Per case: the hard invariants (`invariants`), then n statistical rounds (planned from the registered checks,
`registry.RULE_CHECKS`) on which the registry's checks run; where only standard-rule checks failed, the
confirmatory exactness tests of `confirm`; after every case, the Hypothesis-generated edge cases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ...outcomes import Verdict
from ..core.contract import failed, guard
from ..core.level import Level, named_cases
from ..core.mechanism import guarded
from ..core.profiles import Profile
from ..core.records import CheckRecord, case_seed
from ..core.planning import plan_case
from ..core.registry import planned_checks, planned_names, run_registered
from ..core.report import SuiteResult
from . import case_checks, checks, confirm, findings
from .cases import SUITE_CASES, Case
from .harness import Harness
from .invariants import hypothesis_records, invariant_records
from .mechanism import diagnose_rule
from .registry import RULE_CHECKS, RuleSample
from .report import format_summary, write_report
from .settings import PROFILE_SETTINGS

#: Large-vocabulary cases cost O(V) per round (a 32k row is ~10 ms on a CPU torch implementation), so
#: their per-case target is looser by this factor; the report states the resulting detectable TV.
LARGE_VOCAB_EPSILON_SCALE = 2.5
#: What a first-token-only test sees at the rule level: the marginal of the first emitted token, plus the
#: contract and an ordinary-Generator invariant check (the checks a typical unit test amounts to).
FIRST_TOKEN_CHECKS = frozenset(
    (
        "position_1",
        "invariants",
        "invariants_statistical_rounds",
        "determinism",
        "single_round_path",
    )
)


class RuleLevel(Level):
    """See the module docstring."""

    name = "rule"
    checks = RULE_CHECKS
    profile_settings = PROFILE_SETTINGS
    adapter_signature = "verify(target_probs, draft_probs, draft_tokens, rng)"
    auto_priority = 1
    has_confirmation = True
    reference_spec = "exactspec.conformance.adapters.reference:Reference"
    #: What ``pytest --pyargs exactspec.conformance`` certifies when no --exactspec-impl is given: our own rules.
    default_impls = (
        "exactspec.conformance.adapters.reference:Reference",
        "exactspec.conformance.adapters.gpu_impl:TorchCPU",
        "exactspec.conformance.adapters.gpu_impl:TorchCUDA",
    )
    zoo = "exactspec.conformance.rule.mutants.zoo:ZOO"

    def offers(self, obj: Any) -> bool:
        return callable(getattr(obj, "verify", None))

    def select_cases(
        self, profile: Profile, impl: Any = None, names: Sequence[str] | None = None
    ) -> list[Case]:
        return named_cases(SUITE_CASES, names, self.name)

    def case_epsilon(self, case: Case, profile: Profile) -> float:
        return profile.rule.target_tv * (
            LARGE_VOCAB_EPSILON_SCALE if "large_vocab" in case.tags else 1.0
        )

    def harness(self, impl: Any, name: str) -> Harness:
        return impl if isinstance(impl, Harness) else Harness(impl, name)

    def invariants(self, subject: Harness, case: Case, profile: Profile) -> list[CheckRecord]:
        return invariant_records(subject, case, profile)

    def sample(
        self, subject: Harness, case: Case, profile: Profile, plan: dict
    ) -> tuple[Any, list[CheckRecord]]:
        """n statistical rounds (and the acceptance-rate rounds where that check applies), with the invariants
        of those rounds and the share of rounds reaching each position."""
        name = subject.name
        rounds, err = guard(
            name,
            case.name,
            "statistical",
            lambda: subject.run(case, plan["n"], case_seed(case.name, "statistical")),
        )
        if rounds is None:
            return None, [failed(err)]
        acceptance = None
        if "acceptance_rate" in planned_names(self, case):
            n_acc = case_checks.acceptance_rounds(
                float(case.alphas[0]), plan["false_fail_rate"], profile.false_pass_rate
            )
            acceptance, err = guard(
                name,
                case.name,
                "acceptance_rate",
                lambda: subject.run(case, n_acc, case_seed(case.name, "acceptance")),
            )
            if err:
                return None, [err]
        sample = RuleSample(name, rounds, acceptance)
        record = checks.invariant_check(name, rounds, "invariants_statistical_rounds")
        record.result.details["reach"] = sample.reach
        record.result.details["seconds"] = rounds.seconds
        return sample, [record]

    def confirm_input(self, sample: RuleSample) -> list[float]:
        """The share of the statistical rounds reaching each position: what sizes a confirmatory test."""
        return sample.reach

    def confirm(
        self,
        subject: Harness,
        case: Case,
        profile: Profile,
        records: list[CheckRecord],
        rate: float,
        plan: dict,
        sampled: list[float] | None = None,
    ) -> tuple[list[CheckRecord], list[str]]:
        """Confirmatory exactness tests sized for the deviation the failed standard-rule checks saw (`confirm`), on
        rounds sized from the share of the case's rounds reaching each position (`sampled`: `confirm_input`)."""
        reach = sampled
        if reach is None:
            return [], [f"{case.name}: no statistical rounds to size a confirmatory test from"]
        n_standard = sum(
            len(names)
            for check, names in planned_checks(self, case)
            if check.category == "standard_rule"
        )
        confirm_plan = confirm.confirm_plan(
            case,
            profile,
            reach,
            confirm.observed_deviation(records),
            n_standard * rate,
            self.case_epsilon(case, profile),
        )
        if not confirm_plan["feasible"]:
            return [], [confirm.unsettled_reason(case, confirm_plan)]
        out, err = guard(
            subject.name,
            case.name,
            "confirm",
            lambda: confirm.confirm_case(subject, case, profile, confirm_plan),
        )
        return ([failed(err)] if out is None else out), []

    def run_extras(self, subject: Harness, profile: Profile) -> list[CheckRecord]:
        return hypothesis_records(subject, profile)

    def finish(self, result: SuiteResult, cases: list, impl: Any = None) -> None:
        """Plan only of the cases that ran, measured deviations, findings grouped by root cause, RNG reach."""
        seen = {r.case for r in result.records}
        result.plan = {name: plan for name, plan in result.plan.items() if name in seen}
        result.extra["measured_deviations"] = {
            f"{r.case}/{r.check}": {
                "observed_tv_binned": r.result.details["observed_tv_binned"],
                "null_mean": r.result.details.get("observed_tv_binned_null_mean"),
                "p_value": r.result.p_value,
            }
            for r in result.records
            if not r.passed and "observed_tv_binned" in r.result.details
        }
        result.extra["findings"] = findings.group_findings(result.records)
        reach_info = findings.run_reach(result.records)
        result.extra["adversarial_reach"] = reach_info
        if reach_info and not reach_info["reached"]:
            result.notes.append(reach_info["message"])
        # after the verdict: never changes it
        if result.verdict == Verdict.NOT_EXACT and impl is not None:
            diagnosis = guarded(lambda: diagnose_rule(impl, cases, result.records))
            if diagnosis:
                result.extra["diagnosis"] = diagnosis

    def summary(self, result: SuiteResult) -> str:
        return format_summary(result)

    def write_report(
        self, result: SuiteResult, out_dir: str | Path, impl_spec: str | None = None
    ) -> dict:
        return write_report(result, out_dir, impl_spec=impl_spec)

    def first_token_failure(self, record: CheckRecord) -> bool:
        return record.check in FIRST_TOKEN_CHECKS or record.category == "contract"


LEVEL = RuleLevel()


def statistical_records(
    harness: Harness, case: Case, profile: Profile, false_fail_rate: float, n: int | None = None
) -> list[CheckRecord]:
    """The registry's statistical checks on one case at `false_fail_rate` (n rounds: planned unless given), with
    the invariants of those rounds (the pytest suite's exactness and standard-rule tests share them)."""
    plan = plan_case(LEVEL, case, profile, false_fail_rate)
    sample, records = LEVEL.sample(harness, case, profile, {**plan, "n": n or plan["n"]})
    return records + (
        run_registered(LEVEL, case, sample, false_fail_rate, profile) if sample is not None else []
    )
