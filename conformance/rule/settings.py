"""The rule level's settings and their values at each profile (`RuleLevel.profile_settings`).

Total false-fail rate 1e-6 at every profile; target binned TV 0.05 / 0.02 / 0.01 per case.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.settings import RoundSettings


@dataclass(frozen=True, kw_only=True)
class RuleSettings(RoundSettings):
    """Rule level (one verification round per call): sample sizes are planned from ``target_tv``."""

    adversarial_rounds: int  # rounds per case with the boundary-heavy Generator
    hypothesis_examples: int  # generated cases for the invariant property test
    hypothesis_rounds: int  # rounds per generated case


PROFILE_SETTINGS: dict[str, RuleSettings] = {
    "quick": RuleSettings(
        total_false_fail=1e-6,
        target_tv=0.05,
        max_bins=40,
        max_rounds=60_000,
        invariant_rounds=200,
        adversarial_rounds=200,
        hypothesis_examples=15,
        hypothesis_rounds=40,
    ),
    "standard": RuleSettings(
        total_false_fail=1e-6,
        target_tv=0.02,
        max_bins=80,
        max_rounds=400_000,
        invariant_rounds=1000,
        adversarial_rounds=1000,
        hypothesis_examples=60,
        hypothesis_rounds=60,
    ),
    "full": RuleSettings(
        total_false_fail=1e-6,
        target_tv=0.01,
        max_bins=150,
        max_rounds=2_000_000,
        invariant_rounds=5000,
        adversarial_rounds=5000,
        hypothesis_examples=300,
        hypothesis_rounds=100,
    ),
}
