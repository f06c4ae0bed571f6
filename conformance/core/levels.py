"""The one registry of levels: their names, and where each declares itself (`Level` in its `level` module).

The loader, `exactspec certify`, the pytest plugin, `kill-table`, `calibrate` and the alpha table read the
levels from here. Declarations are imported on first use: the rule and tree levels are torch-free, the
sequence level needs torch, the engine level reads sample files (numpy, scipy).

Adding a level: a subpackage with a `level.py` whose `LEVEL` is a `core.level.Level`, one line in
`LEVEL_MODULES`, and its settings in the profile table (`core.profiles`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .level import Level

#: level name -> module (relative to `exactspec.conformance`) whose `LEVEL` declares it; in report order.
LEVEL_MODULES: dict[str, str] = {
    "rule": "..rule.level",
    "sequence": "..sequence.level",
    "engine": "..engine.level",
    "tree": "..tree.level",
}
LEVELS: tuple[str, ...] = tuple(LEVEL_MODULES)


def check_level(name: object) -> str:
    """`name` if it names a level, else a ValueError listing the levels."""
    if name not in LEVEL_MODULES:
        raise ValueError(f"level must be one of {LEVELS}, got {name!r}")
    return str(name)


def get_level(name: str) -> "Level":
    """The declaration of level `name` (its module is imported on first use)."""
    module = importlib.import_module(LEVEL_MODULES[check_level(name)], __package__)
    return module.LEVEL
