"""The sequence level's settings and their values at each profile (`SequenceLevel.profile_settings`).

Total false-fail rate 1e-3 / 1e-4 / 1e-5; target binned TV 0.15 / 0.06 / 0.03 on the whole-sequence law pooled to
<= 16 / 24 / 40 bins (its checks are costlier: every sample is a whole generation on a model; the exact cases are
drawn as rows of 32 / 32 / 64 per `generate_batch` call where the adapter offers one; quick draws its PIT cases one
`generate` call per sample, so the batch-1 path's law is certified too).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.settings import Settings


@dataclass(frozen=True, kw_only=True)
class SequenceSettings(Settings):
    """Sequence level (whole generations on small models)."""

    max_bins: int  # exact cases: the sequence law is pooled to <= this many bins (min expected grows with n)
    pit_sequences: int  # PIT cases (tiny pair): sequences per case
    real_sequences: int  # PIT cases (real model): sequences per case
    greedy_prompts: int  # greedy cases: prompts used (cycled)
    # rows per generate_batch call where offered (1: one generate call per sample)
    rows_per_call: int = 1
    pit_rows_per_call: int | None = None  # the same for the PIT cases (None: rows_per_call)

    def rows_for(self, case_level: str) -> int:
        """Rows per generate_batch call for a case of `case_level` ("exact" or "pit")."""
        if case_level == "pit" and self.pit_rows_per_call is not None:
            return self.pit_rows_per_call
        return self.rows_per_call

    def min_expected(self, n: int) -> float:
        """Smallest expected count per pooled bin of the sequence law for n samples (keeps bins <= max_bins)."""
        return max(20.0, n / self.max_bins)

    def describe(self) -> str:
        return (
            f"total false-fail <= {self.total_false_fail:g}, detects binned TV >= {self.target_tv:g} on the "
            f"sequence law"
        )


PROFILE_SETTINGS: dict[str, SequenceSettings] = {
    "quick": SequenceSettings(
        total_false_fail=1e-3,
        target_tv=0.15,
        max_bins=16,
        pit_sequences=150,
        real_sequences=20,
        greedy_prompts=2,
        rows_per_call=32,
        pit_rows_per_call=1,
    ),
    "standard": SequenceSettings(
        total_false_fail=1e-4,
        target_tv=0.06,
        max_bins=24,
        pit_sequences=500,
        real_sequences=60,
        greedy_prompts=4,
        rows_per_call=32,
    ),
    "full": SequenceSettings(
        total_false_fail=1e-5,
        target_tv=0.03,
        max_bins=40,
        pit_sequences=3000,
        real_sequences=200,
        greedy_prompts=8,
        rows_per_call=64,
    ),
}
