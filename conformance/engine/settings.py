"""The engine level's settings and their values at each profile (`EngineLevel.profile_settings`).

Total false-fail rate 1e-3 / 1e-4 / 1e-5 over positions 1..4 / 6 / 8, every check anytime-valid; target per-token
TV 0.15 / 0.05 / 0.02, certified by coupling or by the law checks (`engine.routes`): n is what the sample files hold
(`exactspec engine certify` grows it in rounds), and a run short of the target is INCONCLUSIVE, stating the
completions needed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.settings import Settings


@dataclass(frozen=True, kw_only=True)
class EngineSettings(Settings):
    """Engine level (a serving engine's sample files): n is the files'; the profile fixes the error rate and
    what is compared."""

    positions: int  # the law checks read positions 1..positions (the drift 2..positions)

    def describe(self) -> str:
        return (f"total false-fail <= {self.total_false_fail:g} (anytime-valid), positions 1..{self.positions}, "
                f"certifies a per-token TV <= {self.target_tv:g} (coupling: expected, any direction; law: realised, "
                "monotone per confidence stratum; else INCONCLUSIVE)")


PROFILE_SETTINGS: dict[str, EngineSettings] = {
    "quick": EngineSettings(total_false_fail=1e-3, positions=4, target_tv=0.15),
    "standard": EngineSettings(total_false_fail=1e-4, positions=6, target_tv=0.05),
    "full": EngineSettings(total_false_fail=1e-5, positions=8, target_tv=0.02),
}
