"""The engine level's settings and their values at each profile (`EngineLevel.profile_settings`).

Total false-fail rate 1e-3 / 1e-4 / 1e-5, every check but greedy_spread anytime-valid; target per-token TV 0.15 /
0.05 / 0.02 over the coverage every run states (the prompts, positions 1..max_tokens, the sampling settings, the load
measured). The bare CERTIFIED needs an any-shape route (coupling, or the law route's any-shape bound) at the target;
the monotone law route alone gives QUALIFIED (`engine.routes`); n is what the sample files hold (`exactspec engine
certify` grows it in rounds), and a run short of the target is INCONCLUSIVE, stating what would reach it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.settings import Settings


@dataclass(frozen=True, kw_only=True)
class EngineSettings(Settings):
    """Engine level (a serving engine's sample files): n is the files'; the profile fixes the error rate and the
    target; the positions are every position the run asked for."""

    def describe(self) -> str:
        return (
            f"total false-fail <= {self.total_false_fail:g} (every check anytime-valid but greedy_spread), "
            f"positions 1..max_tokens, certifies a per-token TV <= {self.target_tv:g} for deviations of any shape "
            "(coupling: expected; law: realised; the monotone class alone: QUALIFIED; else INCONCLUSIVE)"
        )


PROFILE_SETTINGS: dict[str, EngineSettings] = {
    "quick": EngineSettings(total_false_fail=1e-3, target_tv=0.15),
    "standard": EngineSettings(total_false_fail=1e-4, target_tv=0.05),
    "full": EngineSettings(total_false_fail=1e-5, target_tv=0.02),
}
