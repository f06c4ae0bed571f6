"""The one table of profiles (quick / standard / full) for every level of the suite.

A profile says how hard the suite looks. The levels share its name, description and per-check false-pass rate
``false_pass_rate``; each level declares its own keyword-only, validated settings at each profile on its `Level`
(``profile_settings``, from its package's ``settings.py``), because the levels make *different promises under the
same profile name* (rule: total false-fail rate 1e-6 at every profile; sequence 1e-3 / 1e-4 / 1e-5; engine
1e-3 / 1e-4 / 1e-5, anytime-valid; tree 1e-4 / 1e-6 / 1e-6: see each level's ``settings.py``). Every statistical
check of the rule and sequence levels' exact laws is the likelihood-ratio test of `stat_tests.lr_tail` (exact tail
for <= 3 bins, Agrawal's bound otherwise): its false-fail rate is proven at the per-check rate it runs at, so no
``tail_safety`` factor is needed (docs/alpha-table.md).

``profile.settings(level)`` (or ``profile.<level>``) reads a level's settings from its declaration;
``Profile.describe()`` states every level's promise in one line; ``get_profile(name)`` is the only lookup.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from . import levels
from .settings import Settings, check_rate


@dataclass(frozen=True, kw_only=True)
class Profile:
    """One named profile: the fields every level shares; each level's settings come from its declaration."""

    name: str
    description: str
    false_pass_rate: (
        float  # per-check false-pass rate at the stated detectable deviation (every level)
    )
    overrides: tuple[
        tuple[str, Any], ...
    ] = ()  # (level, settings) used instead of the level's own (`with_settings`)

    def __post_init__(self) -> None:
        check_rate(self.false_pass_rate, "false_pass_rate")

    def with_settings(self, **by_level: Any) -> "Profile":
        """This profile with other settings for the levels named (e.g. ``with_settings(engine=...)``)."""
        for level in by_level:
            levels.check_level(level)
        return replace(self, overrides=tuple({**dict(self.overrides), **by_level}.items()))

    def settings(self, level: str) -> Any:
        """The settings object of `level` (one of the registered levels) at this profile."""
        declared = levels.get_level(level)
        try:
            settings = dict(self.overrides).get(level) or declared.profile_settings[self.name]
        except KeyError:
            raise ValueError(
                f"level {level!r} declares no settings for profile {self.name!r}"
            ) from None
        if not isinstance(settings, Settings):
            raise ValueError(
                f"level {level!r}: settings of profile {self.name!r} must be a core.settings.Settings, "
                f"got {settings!r}"
            )
        return settings

    def __getattr__(self, attr: str) -> Any:
        """`profile.rule`, `profile.tree`, ...: the settings of that level."""
        if attr.startswith("_") or attr not in levels.LEVEL_MODULES:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {attr!r}")
        return self.settings(attr)

    def total_false_fail(self, level: str) -> float:
        return self.settings(level).total_false_fail

    def describe(self) -> str:
        """One line stating what the profile promises at each level."""
        promises = "; ".join(
            f"{level} level {self.settings(level).describe()}" for level in levels.level_names()
        )
        return f"profile {self.name}: {promises}; power >= {1 - self.false_pass_rate:g} per check. {self.description}"

    def to_dict(self, level: str) -> dict:
        """The shared fields and the settings of `level`, as plain JSON."""
        settings = self.settings(level)
        return {
            "name": self.name,
            "description": self.description,
            "false_pass_rate": self.false_pass_rate,
            "total_false_fail": settings.total_false_fail,
            "target_tv": settings.target_tv,
            "settings": asdict(settings),
            "promise": self.describe(),
        }


PROFILES: dict[str, Profile] = {
    "quick": Profile(
        name="quick",
        false_pass_rate=1e-3,
        description="CI: certifies a NumPy-speed implementation in well under a minute on 2 cores.",
    ),
    "standard": Profile(
        name="standard",
        false_pass_rate=1e-3,
        description="Default: minutes; detects 2% TV per case at the rule level.",
    ),
    "full": Profile(
        name="full",
        false_pass_rate=1e-3,
        description="Certificate grade: detects 1% TV per case; tens of minutes for NumPy-speed code.",
    ),
}

PROFILE_NAMES = tuple(PROFILES)


def get_profile(name: str | Profile) -> Profile:
    """The profile called `name` (a Profile is returned as is)."""
    if isinstance(name, Profile):
        return name
    try:
        return PROFILES[name]
    except (KeyError, TypeError):
        raise ValueError(f"profile must be one of {sorted(PROFILES)}, got {name!r}") from None
