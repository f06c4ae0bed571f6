"""The engine level's result: a core `SuiteResult` that knows whether the candidate speculated, which reports are
void and why the run is INCONCLUSIVE or QUALIFIED; its verdict is judged here, from what the level (`level`) found.
Below the declaration and the report, which both read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..core.records import CheckRecord
from ..core.report import SuiteResult
from .check_table import PAIRED_CHECKS, PREMISE_READERS, REPORT_READERS

LEVEL_NAME = "engine"
NOT_OBSERVED = "speculation not observed: the candidate's draft counters are all 0 or absent"


def voided_checks(
    records: list[CheckRecord], invalid: dict[str, dict], uncovered: Sequence[str] = ()
) -> list[str]:
    """ "case/check" of the records that read a prompt's void reports, and the candidate's paired checks of the
    prompts whose reference tokens lack a teacher-forced report (the two ends are not read alike: C18 (d))."""
    void = [
        f"{r.case}/{r.check}"
        for r in records
        if r.case in invalid
        and r.check in (PREMISE_READERS if invalid[r.case]["premise"] else REPORT_READERS)
    ]
    return void + [
        f"{r.case}/{r.check}"
        for r in records
        if r.case in set(uncovered)
        and r.check in PAIRED_CHECKS
        and f"{r.case}/{r.check}" not in void
    ]


@dataclass
class EngineResult(SuiteResult):
    """A core SuiteResult at level "engine" that knows whether the candidate speculated and which reports are void."""

    speculation_observed: bool = False
    # what the files hold that keeps the run from certifying
    input_reasons: list[str] = field(default_factory=list)
    # sampled prompts short of the target (more samples help)
    underpowered: list[str] = field(default_factory=list)
    # prompts at the target for the monotone class only
    short_of_any_shape: list[str] = field(default_factory=list)
    # prompt -> why its reports are void, and which kind
    invalid: dict[str, dict] = field(default_factory=dict)
    # prompts whose reference tokens lack a teacher-forced report
    uncovered: list[str] = field(default_factory=list)
    # "case/check" of the records that read void reports
    voided: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.level != LEVEL_NAME:
            raise ValueError(f"level must be {LEVEL_NAME!r}, got {self.level!r}")
        self.judge()

    def judge(self) -> None:
        """Set `voided`, `inconclusive` and `qualified` (done on construction; call again after changing inputs)."""
        self.voided = voided_checks(self.records, self.invalid, self.uncovered)
        self.inconclusive = (
            ([] if self.speculation_observed else [NOT_OBSERVED])
            + list(self.input_reasons)
            + list(self.underpowered)
        )
        self.qualified = list(self.short_of_any_shape)

    @property
    def ignored(self) -> list[str]:
        """The verdict ignores the records that read a prompt's void reports."""
        return list(self.voided)

    @property
    def reasons(self) -> list[str]:
        """The verdict's reasons: the counted failures, else why the run is inconclusive or qualified (empty:
        CERTIFIED)."""
        failures = [f"{r.case}: {r.result.message}" for r in self.counted if not r.passed]
        return failures or list(self.inconclusive) or list(self.qualified)
