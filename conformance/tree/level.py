"""The tree level declared to the core (`core.level.Level`): one round of tree verification per call.

Per case: the hard invariants and determinism, then n rounds on fresh trees (planned from the registered
checks, `registry.TREE_CHECKS`) on which the registry's checks run. Where only standard-rule checks failed on
a case, its exactness checks run again on `CONFIRM_FACTOR` x n fresh rounds (marked ``confirmatory``); together
they run at the rate of that case's standard-rule checks, so the run's total false-fail rate stays the stated
one. That confirmation is what lets the verdict be EXACT_NOT_STANDARD rather than INCONCLUSIVE.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ...outcomes import Verdict
from ..core.contract import determinism_check, failed, guard
from ..core.level import Level, named_cases
from ..core.mechanism import guarded
from ..core.profiles import Profile
from ..core.records import CheckRecord, case_seed
from ..core.report import SuiteResult
from . import checks
from .adapters import DEFAULT_TREE_IMPLS
from .cases import TreeCase, cases_for
from .harness import TREE_SIGNATURE, TreeHarness
from .mechanism import diagnose_tree
from .registry import TREE_CHECKS, TreeSample
from .report import format_summary, write_tree_report
from .settings import PROFILE_SETTINGS

#: Confirmatory reruns take this many times the case's planned rounds.
CONFIRM_FACTOR = 4


class TreeLevel(Level):
    """See the module docstring."""

    name = "tree"
    checks = TREE_CHECKS
    profile_settings = PROFILE_SETTINGS
    adapter_signature = TREE_SIGNATURE
    has_confirmation = True
    reference_spec = "exactspec.conformance.tree.adapters:TreeReference"
    default_impls = DEFAULT_TREE_IMPLS
    zoo = "exactspec.conformance.tree.mutants:ZOO"

    def offers(self, obj: Any) -> bool:
        return callable(getattr(obj, "verify_tree", None))

    def select_cases(
        self, profile: Profile, impl: Any = None, names: Sequence[str] | None = None
    ) -> list[TreeCase]:
        return named_cases(cases_for(profile.name), names, self.name, f" at profile {profile.name}")

    def harness(self, impl: Any, name: str) -> TreeHarness:
        return impl if isinstance(impl, TreeHarness) else TreeHarness(impl, name)

    def invariants(
        self, subject: TreeHarness, case: TreeCase, profile: Profile
    ) -> list[CheckRecord]:
        """Invariants and determinism (and the per-tree path when the batched form is offered)."""
        n, seed, name = (
            profile.tree.invariant_rounds,
            case_seed(case.name, "tree-invariants"),
            subject.name,
        )
        first, err = guard(name, case.name, "invariants", lambda: subject.run(case, n, seed))
        if first is None:
            return [failed(err)]
        out = [checks.invariant_check(name, first)]
        again, err = guard(name, case.name, "determinism", lambda: subject.run(case, n, seed))
        out.append(
            failed(err)
            if again is None
            else determinism_check(name, case.name, first.tokens, again.tokens, first.n)
        )
        if subject.has_batch:
            single, err = guard(
                name,
                case.name,
                "single_tree_path",
                lambda: subject.run(case, n, seed + 1, single=True),
            )
            out.append(
                failed(err)
                if single is None
                else checks.invariant_check(name, single, "single_tree_path")
            )
        return out

    def sample(
        self, subject: TreeHarness, case: TreeCase, profile: Profile, plan: dict
    ) -> tuple[Any, list[CheckRecord]]:
        rounds, err = guard(
            subject.name,
            case.name,
            "statistical",
            lambda: subject.run(case, plan["n"], case_seed(case.name, "tree")),
        )
        if rounds is None:
            return None, [failed(err)]
        record = checks.invariant_check(subject.name, rounds, "invariants_statistical_rounds")
        record.result.details["seconds"] = rounds.seconds
        return TreeSample(subject.name, rounds), [record]

    def case_entry(self, case: TreeCase, sample: Any, records: list[CheckRecord]) -> dict:
        return case.summary()

    def confirm(
        self,
        subject: TreeHarness,
        case: TreeCase,
        profile: Profile,
        records: list[CheckRecord],
        rate: float,
        plan: dict,
        sampled: Any = None,
    ) -> tuple[list[CheckRecord], list[str]]:
        """The case's exactness checks on CONFIRM_FACTOR x n fresh rounds, at the case's standard-rule share."""
        standard = [r for r in records if r.category == "standard_rule"]
        seed = case_seed(case.name, "tree-confirm")
        rounds, err = guard(
            subject.name,
            case.name,
            "confirm",
            lambda: subject.run(case, CONFIRM_FACTOR * plan["n"], seed),
        )
        if rounds is None:
            return [failed(err)], []
        each = rate * len(standard) / (case.max_length + int(case.stream_enumerable))
        out = checks.position_checks(
            subject.name, rounds, each, profile, prefix="confirm_", confirm=True
        )
        if case.stream_enumerable:
            out.append(
                checks.completed_stream_check(
                    subject.name,
                    rounds,
                    each,
                    profile,
                    seed,
                    "confirm_completed_stream",
                    confirm=True,
                )
            )
        return out, []

    def finish(self, result: SuiteResult, cases: list, impl: Any = None) -> None:
        """A NOT_EXACT names the zoo member that fits its failing cases best (after the verdict: never changes it)."""
        if result.verdict == Verdict.NOT_EXACT and impl is not None:
            diagnosis = guarded(lambda: diagnose_tree(impl, cases, result.records))
            if diagnosis:
                result.extra["diagnosis"] = diagnosis

    def summary(self, result: SuiteResult) -> str:
        return format_summary(result)

    def write_report(
        self, result: SuiteResult, out_dir: str | Path, impl_spec: str | None = None
    ) -> dict:
        return write_tree_report(result, out_dir, impl_spec=impl_spec)

    def first_token_failure(self, record: CheckRecord) -> bool:
        return record.category == "contract" or record.check in (
            "position_1",
            "invariants",
            "determinism",
        )


LEVEL = TreeLevel()
