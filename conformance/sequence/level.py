"""The sequence level declared to the core (`core.level.Level`): whole generations on small models.

Per case, by kind: ``greedy`` -- token-for-token equality with plain greedy decoding (hard); ``exact`` -- n
sequences (planned on the enumerated sequence law, `registry`) and the law checks on them; ``pit`` -- the
profile's number of sequences, the zero-probability check and the PIT checks. Every sampled case also gets the
hard structure check. Samples come one `generate` call each, or as rows of `generate_batch` calls at the
standard and full profiles (`draws`).
"""

from __future__ import annotations

import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from ...errors import AdapterLoadError, ContractViolation, ExactspecError
from ..core.level import Level, named_cases
from ..core.profiles import Profile
from ..core.records import CheckRecord
from ..core.report import SuiteResult
from .cases import CASES, REAL_CASES, Case
from .registry import SEQUENCE_CHECKS
from .report import write_report
from .settings import PROFILE_SETTINGS

SUITE_VERSION = 5  # 5: quick draws its exact cases as generate_batch rows; 4: cases on the core's driver; 3: batch rows


@dataclass(frozen=True)
class Generator:
    """A generation-level adapter and its name in the report."""

    adapter: Any
    name: str


class SequenceLevel(Level):
    """See the module docstring."""

    name = "sequence"
    checks = SEQUENCE_CHECKS
    profile_settings = PROFILE_SETTINGS
    adapter_signature = "generate(target, draft, prompt_ids, max_new_tokens, k, sampling, seed)"
    auto_priority = 2  # an object with generate and verify is certified as a whole generator
    reference_spec = "reference"
    default_impls = ("reference", "gpu_impl")
    zoo = "exactspec.conformance.sequence.mutants:ZOO"
    min_n = 200

    def offers(self, obj: Any) -> bool:
        return callable(getattr(obj, "generate", None))

    def select_cases(
        self, profile: Profile, impl: Any = None, names: Sequence[str] | None = None
    ) -> list[Case]:
        """Every case (quick: those marked in_quick); `names` may also name the real-model cases."""
        if names is None:
            return [c for c in CASES if profile.name != "quick" or c.in_quick]
        return named_cases(CASES + REAL_CASES, names, self.name)

    def fixed_n(self, case: Case, profile: Profile) -> int | None:
        if case.level == "pit":
            return (
                profile.sequence.real_sequences
                if case.models == "real"
                else profile.sequence.pit_sequences
            )
        return None

    def max_n(self, profile: Profile) -> int | None:
        return None  # never capped below the profile's target

    def load(self, spec: str) -> Any:
        from .adapters import load_adapter  # torch: the builtin adapters run real models

        adapter = load_adapter(spec)
        if adapter is None:
            raise AdapterLoadError(
                f"--impl {spec}: offers no generate(target, draft, prompt_ids, max_new_tokens, k, "
                "sampling, seed): not a generation-level adapter"
            )
        return adapter

    def harness(self, impl: Any, name: str) -> Generator:
        return impl if isinstance(impl, Generator) else Generator(impl, name)

    def sample(
        self, subject: Generator, case: Case, profile: Profile, plan: dict
    ) -> tuple[Any, list[CheckRecord]]:
        """The case's samples and hard records; output our code cannot even read is a contract violation."""
        # torch: the declaration is read without it (the loader asks every level)
        from .run import (
            run_case,
        )

        try:
            run, hard = run_case(subject, case, profile, plan.get("n", 0))
        except ExactspecError:
            raise
        except Exception as error:  # noqa: BLE001 - e.g. an output of the wrong type: the case cannot be judged
            raise ContractViolation(
                f"the case could not run on this adapter's output: {type(error).__name__}: "
                f"{error}\n{traceback.format_exc(limit=6)[-3000:]}"
            ) from error
        return run, hard

    def case_entry(self, case: Case, sample: Any, records: list[CheckRecord]) -> dict:
        return {
            "name": case.name,
            "case": case.name,
            "level": case.level,
            "what": case.what,
            "params": case.params(),
            "status": "ok",
            **(sample.info if sample is not None else {}),
            "evidence": sample.evidence if sample is not None else {},
            "checks": [r.to_dict() for r in records],
            "passed": all(r.passed for r in records),
        }

    def about(self, impl: Any) -> tuple[list[str], dict]:
        adapter = impl.adapter if isinstance(impl, Generator) else impl
        notes = [n for n in [getattr(adapter, "notes", "")] if n]
        return notes, {"description": getattr(adapter, "description", "")}

    @contextmanager
    def running(self) -> Iterator[None]:
        """One torch thread while the cases run here (tiny models gain nothing from intra-op threads)."""
        import torch  # torch: the declaration is read without it (the loader asks every level)

        old = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(old)

    def finish(self, result: SuiteResult, cases: list, impl: Any = None) -> None:
        for entry in result.cases:
            if entry.get("status") == "unsupported":
                entry["passed"] = None
        result.extra.update(
            {
                "suite_version": SUITE_VERSION,
                "real_model": any(c.models == "real" for c in cases),
                "rows_per_call": result.profile.sequence.rows_per_call,
                "pit_rows_per_call": result.profile.sequence.rows_for("pit"),
                "failed_cases": [c["name"] for c in result.cases if c.get("passed") is False],
                "unsupported_cases": [
                    c["name"] for c in result.cases if c["status"] == "unsupported"
                ],
            }
        )

    def summary(self, result: SuiteResult) -> str:
        failed = result.extra.get("failed_cases") or []
        return (
            f"exactspec certify (sequence level): {result.impl} [profile {result.profile.name}] -> {result.verdict}"
            f" -- {len(result.records)} checks on {len(result.cases)} cases, {result.seconds:.1f} s"
            + (f"; failed cases: {', '.join(failed)}" if failed else "")
        )

    def write_report(
        self, result: SuiteResult, out_dir: str | Path, impl_spec: str | None = None
    ) -> dict:
        return write_report(result, out_dir, impl_spec)

    def first_token_failure(self, record: CheckRecord) -> bool:
        """Contract failures fail any test; greedy and zero-probability failures at position 0; position-0 laws."""
        details = record.result.details or {}
        if (
            record.category == "contract"
            or record.check == "structure"
            or record.check.startswith("position_0_")
        ):
            return True
        if record.check == "greedy_equality":
            return any(m.get("first_difference_at") == 0 for m in details.get("mismatches", []))
        if record.check == "zero_probability_tokens":
            return any(e.get("position") == 0 for e in details.get("examples", []))
        return False


LEVEL = SequenceLevel()
