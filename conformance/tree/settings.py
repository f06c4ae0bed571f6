"""The tree level's settings at each profile (`TreeLevel.profile_settings`): the core's `RoundSettings`.

Total false-fail rate 1e-4 / 1e-6 / 1e-6; target binned TV 0.08 / 0.05 / 0.02 per case.
"""

from __future__ import annotations

from ..core.settings import RoundSettings

PROFILE_SETTINGS: dict[str, RoundSettings] = {
    "quick": RoundSettings(
        total_false_fail=1e-4, target_tv=0.08, max_bins=40, max_rounds=20_000, invariant_rounds=100
    ),
    "standard": RoundSettings(
        total_false_fail=1e-6, target_tv=0.05, max_bins=60, max_rounds=100_000, invariant_rounds=300
    ),
    "full": RoundSettings(
        total_false_fail=1e-6,
        target_tv=0.02,
        max_bins=120,
        max_rounds=600_000,
        invariant_rounds=1000,
    ),
}
