"""The settings every level's own settings derive from (each level declares its settings class and its values
per profile in its own package, `<level>/settings.py`, and names them on its `Level`: `profile_settings`).

`Settings` is what every level promises (a total false-fail rate and a target TV); `RoundSettings` is the settings
of a level that plans n rounds per case from ``target_tv`` (the rule and tree levels; the rule level adds its own
fields in a subclass).
"""

from __future__ import annotations

from dataclasses import dataclass, fields


def check_rate(value: float, name: str) -> None:
    if not (isinstance(value, (int, float)) and 0.0 < float(value) < 1.0):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")


def check_positive_int(value: int, name: str) -> None:
    if not (isinstance(value, int) and value > 0):
        raise ValueError(f"{name} must be a positive int, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """A level's settings at one profile: its total false-fail rate and the TV its checks target. Every further
    field of type int is validated as a positive int (a subclass's optional fields may be None)."""

    total_false_fail: (
        float  # P(any statistical check of the run fails | implementation exact) <= this
    )
    target_tv: float  # the deviation the level's checks are sized (or required) to detect

    def __post_init__(self) -> None:
        check_rate(self.total_false_fail, "total_false_fail")
        check_rate(self.target_tv, "target_tv")
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in ("int", "int | None") and value is not None:
                check_positive_int(value, f.name)

    def describe(self) -> str:
        """What the level promises at these settings (one clause of `Profile.describe`)."""
        return f"total false-fail <= {self.total_false_fail:g}, detects binned TV >= {self.target_tv:g} per case"


@dataclass(frozen=True, kw_only=True)
class RoundSettings(Settings):
    """A level of verification rounds (one round per call): n planned per case from ``target_tv``."""

    max_bins: int  # cap on bins (min_expected grows with n so bins stay <= max_bins)
    max_rounds: int  # cap on rounds per case (reported if it binds)
    invariant_rounds: int  # rounds per case for the hard invariants and determinism

    def min_expected(self, n: int) -> float:
        """Smallest expected count per pooled bin for n samples (keeps the bin count <= max_bins)."""
        return max(20.0, n / self.max_bins)
