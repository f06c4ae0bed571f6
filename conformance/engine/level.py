"""The engine level's case type and verdict policy; everything else is the conformance core's.

The core holds the level: its settings per profile (`Profile.engine`), its declared statistical checks
(`core.registry.ENGINE_CHECKS`, so `budget_for("engine", ...)` derives the budget and `run_registered`
runs them), the INCONCLUSIVE verdict (`core.records.verdict_of`) and the certificate writer. What stays
here is what only the engine level knows: one case is one prompt (`EngineCase`), and when a run is
INCONCLUSIVE (speculation never observed, or the reference's reported probabilities disagree with its own
samples, which voids that prompt's PIT).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.records import CheckRecord
from ..core.registry import REPORTED_PROBS_CHECK
from ..core.report import SuiteResult

LEVEL = "engine"
NOT_OBSERVED = "speculation not observed: the candidate's draft counters are all 0 or absent"


@dataclass(frozen=True)
class EngineCase:
    """One prompt, and which checks its data allow (decided from the files' structure, before any test)."""

    name: str
    greedy: bool  # temperature 0: the hard equality check replaces the statistical ones
    positions: int
    pit: bool  # the reference holds post-sampling prefix_probs for this prompt
    reported: bool  # the reference reported post-sampling first-token probabilities


def _invalid_references(records: list[CheckRecord]) -> list[str]:
    """The prompts whose reference's reported probabilities failed their check against its own samples."""
    return sorted({r.case for r in records if r.check == REPORTED_PROBS_CHECK and not r.passed})


def voided_checks(records: list[CheckRecord]) -> list[str]:
    """"case/check" of the records whose reference is invalid: the failed reported-probability check of a
    prompt and that prompt's PIT (they judge the reference's reports, not the candidate)."""
    bad = set(_invalid_references(records))
    return [f"{r.case}/{r.check}" for r in records if r.case in bad and r.check in (REPORTED_PROBS_CHECK, "pit_ks")]


def inconclusive_reasons(records: list[CheckRecord], speculation_observed: bool) -> list[str]:
    """Why the run cannot certify even if no counted check fails."""
    reasons = [f"{case}: the reference's reported probabilities disagree with its own samples; its PIT is void"
               for case in _invalid_references(records)]
    return reasons + ([] if speculation_observed else [NOT_OBSERVED])


@dataclass
class EngineResult(SuiteResult):
    """A core SuiteResult at level "engine" that knows whether the candidate speculated."""

    speculation_observed: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.level != LEVEL:
            raise ValueError(f"level must be {LEVEL!r}, got {self.level!r}")
        self.judge()

    def judge(self) -> None:
        """Set `voided` and `inconclusive` from the records and the speculation evidence (done on construction;
        call again after changing `records`)."""
        self.voided = voided_checks(self.records)
        self.inconclusive = inconclusive_reasons(self.records, self.speculation_observed)

    @property
    def reasons(self) -> list[str]:
        """The verdict's reasons: the counted failures, else why the run is inconclusive (empty: CERTIFIED)."""
        failures = [f"{r.case}: {r.result.message}" for r in self.counted if not r.passed]
        return failures or list(self.inconclusive)
