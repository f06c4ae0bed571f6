"""Counters for one generation call, and the result type shared by speculative and plain decoding."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Iterable, Sequence


def examined_and_accepted(
    proposed: int, accepted_counts: Iterable[int]
) -> tuple[list[int], list[int]]:
    """Per draft position i < `proposed`: how many rows examined draft i, and how many accepted it.

    Row b accepted its first accepted_counts[b] drafts; it examined those and, if any was left, the one
    it rejected (a draft after a rejection is never examined). The one place acceptances are counted:
    `SpecStats` adds these up, `k_policy.CostModelK` adds them with a decay.
    """
    examined, accepted = [0] * proposed, [0] * proposed
    for n in accepted_counts:
        for i in range(min(n + 1, proposed)):
            examined[i] += 1
        for i in range(min(n, proposed)):
            accepted[i] += 1
    return examined, accepted


def _add(totals: list, more: list) -> list:
    """Element-wise sum of two per-position lists of possibly different lengths."""
    width = max(len(totals), len(more))
    return [
        (totals[i] if i < len(totals) else 0) + (more[i] if i < len(more) else 0)
        for i in range(width)
    ]


@dataclass
class SpecStats:
    """What a run cost and how often drafts were accepted.

    acceptance_rate_per_position[i] = P(draft i+1 accepted | drafts 1..i accepted), over all rows and rounds.
    tokens_per_target_call = emitted tokens per row per target forward (before EOS/max cuts).
    """

    rounds: int = 0
    proposed: int = 0
    accepted: int = 0
    acceptance_rate_per_position: list[float] = field(default_factory=list)
    tokens_per_target_call: float = 0.0
    draft_time_s: float = 0.0
    target_time_s: float = 0.0
    wall_time_s: float = 0.0
    prefill_time_s: float = 0.0  # feeding the prompt (target and draft), within wall time
    # cost measurement of the "cost" k policy (first call per batch size), within wall time
    calibration_time_s: float = 0.0
    # "cache" or "measured": where the cost policy's v(n) came from (first call only)
    calibration_source: str = ""
    policy_note: str = ""  # the cost policy's decision in one line: how much it drafted and why
    # the figures behind it (k_policy.CostModelK.summary)
    policy_summary: dict = field(default_factory=dict)
    new_tokens: int = 0
    target_calls: int = 0
    draft_calls: int = 0
    reached_per_position: list[int] = field(default_factory=list)  # drafts examined, per position
    accepted_per_position: list[int] = field(default_factory=list)
    row_rounds: int = 0  # sum over rounds of the rows still generating
    emitted_before_cuts: int = 0
    #: Per batch row (its index in the batch): drafts proposed, and examined / accepted per position.
    rows_proposed: dict[int, int] = field(default_factory=dict)
    rows_reached: dict[int, list[int]] = field(default_factory=dict)
    rows_accepted: dict[int, list[int]] = field(default_factory=dict)

    @property
    def examined(self) -> int:
        """Drafts examined by the rule (a draft after a rejection is never examined)."""
        return sum(self.reached_per_position)

    @property
    def acceptance_rate(self) -> float:
        """Accepted / examined drafts: the pooled acceptance rate the iid model E[N] = (1 - a^(k+1)) / (1 - a) needs."""
        return sum(self.accepted_per_position) / self.examined if self.examined else 0.0

    def record_round(
        self, proposed: int, accepted_counts: list[int], rows: Sequence[int] | None = None
    ) -> None:
        """Add one round: `proposed` drafts per row, `accepted_counts[b]` of them accepted by the b-th row still
        generating, whose index in the batch is rows[b] (default: b)."""
        for row, count in zip(
            range(len(accepted_counts)) if rows is None else rows, accepted_counts
        ):
            one_examined, one_accepted = examined_and_accepted(proposed, [count])
            self.rows_proposed[row] = self.rows_proposed.get(row, 0) + proposed
            self.rows_reached[row] = _add(self.rows_reached.get(row, []), one_examined)
            self.rows_accepted[row] = _add(self.rows_accepted.get(row, []), one_accepted)
        examined, accepted = examined_and_accepted(proposed, accepted_counts)
        self.rounds += 1
        self.proposed += proposed * len(accepted_counts)
        self.accepted += sum(accepted_counts)
        self.reached_per_position = _add(self.reached_per_position, examined)
        self.accepted_per_position = _add(self.accepted_per_position, accepted)
        self.row_rounds += len(accepted_counts)
        self.emitted_before_cuts += sum(accepted_counts) + len(accepted_counts)

    def finish(self) -> None:
        """Derive the ratios from the raw counts."""
        self.acceptance_rate_per_position = [
            a / r if r else 0.0
            for a, r in zip(self.accepted_per_position, self.reached_per_position)
        ]
        self.tokens_per_target_call = (
            self.emitted_before_cuts / self.row_rounds if self.row_rounds else 0.0
        )

    @classmethod
    def pooled(cls, runs: Iterable["SpecStats"]) -> "SpecStats":
        """The counters and timers of several runs added up, ratios derived (benchmarks pool repeats this way)."""
        total = cls()
        for run in runs:
            for name in (
                "rounds",
                "proposed",
                "accepted",
                "draft_time_s",
                "target_time_s",
                "wall_time_s",
                "prefill_time_s",
                "calibration_time_s",
                "new_tokens",
                "target_calls",
                "draft_calls",
                "row_rounds",
                "emitted_before_cuts",
            ):
                setattr(total, name, getattr(total, name) + getattr(run, name))
            total.reached_per_position = _add(total.reached_per_position, run.reached_per_position)
            total.accepted_per_position = _add(
                total.accepted_per_position, run.accepted_per_position
            )
        total.finish()
        return total

    def row_acceptance(self, row: int) -> dict:
        """One batch row's drafts: proposed, examined and accepted, its acceptance rate and the rate per position
        (P(draft i+1 accepted | drafts 1..i accepted)); zeros for a row that never drafted."""
        reached, accepted = self.rows_reached.get(row, []), self.rows_accepted.get(row, [])
        return {
            "drafts_proposed": self.rows_proposed.get(row, 0),
            "drafts_examined": sum(reached),
            "drafts_accepted": sum(accepted),
            "acceptance_rate": sum(accepted) / sum(reached) if sum(reached) else 0.0,
            "acceptance_rate_per_position": [
                a / r if r else 0.0 for a, r in zip(accepted, reached)
            ],
        }

    def to_dict(self) -> dict:
        """The run's counters (the per-row ones are in `row_acceptance`)."""
        fields = {k: v for k, v in asdict(self).items() if not k.startswith("rows_")}
        return {**fields, "acceptance_rate": self.acceptance_rate}


@dataclass
class GenerationResult:
    """New tokens per row (prompt excluded; cut after EOS inclusive and at max_new_tokens) and the counters."""

    sequences: list[list[int]]
    stats: SpecStats
