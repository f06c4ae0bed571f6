"""The one registry of levels: their names, and where each declares itself (`Level` in its `level` module).

The loader, `exactspec certify`, the pytest plugin, `kill-table`, `calibrate` and the alpha table read the
levels from here. Declarations are imported on first use: the rule and tree levels are torch-free, the
sequence level needs torch, the engine level reads sample files (numpy, scipy).

Adding a level = a subpackage (its `level.py` whose `LEVEL` is a `core.level.Level` declaring everything about
the level: its settings per profile, its cases, checks, reference, mutants and hooks) + one line in
`LEVEL_MODULES`. Nothing else names a level: the loader asks each level whether it `offers` an object, the
profiles read the levels' settings, the alpha table, calibration, kill table and pytest plugin read the
declarations. Read the registry live (`level_names()`, `check_level`), not a copy of `LEVELS`.
"""

from __future__ import annotations

import importlib
from typing import Any

#: level name -> module (relative to `exactspec.conformance`) whose `LEVEL` declares it; in report order.
LEVEL_MODULES: dict[str, str] = {
    "rule": "..rule.level",
    "sequence": "..sequence.level",
    "engine": "..engine.engine_level",
    "tree": "..tree.level",
}
# the built-in levels; level_names() also sees levels added later
LEVELS: tuple[str, ...] = tuple(LEVEL_MODULES)


def level_names() -> tuple[str, ...]:
    """Every registered level, in report order (read from `LEVEL_MODULES` at the call)."""
    return tuple(LEVEL_MODULES)


def check_level(name: object) -> str:
    """`name` if it names a level, else a ValueError listing the levels."""
    if name not in LEVEL_MODULES:
        raise ValueError(f"level must be one of {level_names()}, got {name!r}")
    return str(name)


def get_level(name: str) -> Any:
    """The declaration of level `name`, a `core.level.Level` (its module is imported on first use). This registry sits
    below the declarations it names (the profiles and the check registry read them), so it does not import their type."""
    module = importlib.import_module(LEVEL_MODULES[check_level(name)], __package__)
    return module.LEVEL
