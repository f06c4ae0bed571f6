"""Counters for one generation call, and the result type shared by speculative and plain decoding."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class SpecStats:
    """What a run cost and how often drafts were accepted.

    alpha_per_position[i] = P(draft i+1 accepted | drafts 1..i accepted), over all rows and rounds.
    tokens_per_target_call = emitted tokens per row per target forward (before EOS/max cuts).
    """

    rounds: int = 0
    proposed: int = 0
    accepted: int = 0
    alpha_per_position: list[float] = field(default_factory=list)
    tokens_per_target_call: float = 0.0
    draft_time_s: float = 0.0
    target_time_s: float = 0.0
    wall_time_s: float = 0.0
    prefill_time_s: float = 0.0  # feeding the prompt (target and draft), within wall time
    calibration_time_s: float = 0.0  # cost measurement of the "cost" k policy (first call per batch size), within wall time
    new_tokens: int = 0
    target_calls: int = 0
    draft_calls: int = 0
    reached_per_position: list[int] = field(default_factory=list)
    accepted_per_position: list[int] = field(default_factory=list)
    row_rounds: int = 0  # sum over rounds of the rows still generating
    emitted_before_cuts: int = 0

    @property
    def acceptance_rate(self) -> float:
        """Accepted / examined drafts (a draft after a rejection is never examined): the pooled alpha."""
        examined = sum(self.reached_per_position)
        return sum(self.accepted_per_position) / examined if examined else 0.0

    def record_round(self, proposed: int, accepted_counts: list[int]) -> None:
        """Add one round: `proposed` drafts per row, `accepted_counts[b]` of them accepted by row b."""
        self.rounds += 1
        grow = proposed - len(self.reached_per_position)
        if grow > 0:
            self.reached_per_position += [0] * grow
            self.accepted_per_position += [0] * grow
        for n in accepted_counts:
            self.proposed += proposed
            self.accepted += n
            for i in range(min(n + 1, proposed)):
                self.reached_per_position[i] += 1
            for i in range(n):
                self.accepted_per_position[i] += 1
        self.row_rounds += len(accepted_counts)
        self.emitted_before_cuts += sum(accepted_counts) + len(accepted_counts)

    def finish(self) -> None:
        """Derive the ratios from the raw counts."""
        self.alpha_per_position = [
            a / r if r else 0.0 for a, r in zip(self.accepted_per_position, self.reached_per_position)
        ]
        self.tokens_per_target_call = self.emitted_before_cuts / self.row_rounds if self.row_rounds else 0.0

    def to_dict(self) -> dict:
        return {**asdict(self), "acceptance_rate": self.acceptance_rate}


@dataclass
class GenerationResult:
    """New tokens per row (prompt excluded; cut after EOS inclusive and at max_new_tokens) and the counters."""

    sequences: list[list[int]]
    stats: SpecStats
