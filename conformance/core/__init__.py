"""The conformance core shared by every level (rule, sequence, tree, engine): the registry of levels, profiles,
the check registry and error budget, the one planner, records and verdicts, the driver and its executor seam,
the result type and the certificate writer. Torch-free; the names below are imported on first use, so that
importing a light module of the core (`levels`) costs nothing."""

from __future__ import annotations

import importlib
from typing import Any

_LAZY: dict[str, str] = {
    **dict.fromkeys(
        ("LEVEL_MODULES", "LEVELS", "check_level", "get_level", "level_names"), ".levels"
    ),
    **dict.fromkeys(("PROFILE_NAMES", "PROFILES", "Profile", "get_profile"), ".profiles"),
    **dict.fromkeys(("RoundSettings", "Settings"), ".settings"),
    **dict.fromkeys(
        (
            "CATEGORIES",
            "STATISTICAL_CATEGORIES",
            "VERDICT_TEXT",
            "VERDICTS",
            "CheckRecord",
            "case_seed",
            "hard_failure",
            "hard_result",
            "verdict_of",
        ),
        ".records",
    ),
    **dict.fromkeys(
        (
            "CheckPlan",
            "StatCheck",
            "budget_for",
            "planned_checks",
            "planned_names",
            "run_registered",
        ),
        ".registry",
    ),
    **dict.fromkeys(
        (
            "SCHEMA_VERSION",
            "SuiteResult",
            "document",
            "read_certificate",
            "summarize_budget",
            "write_report",
        ),
        ".report",
    ),
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
