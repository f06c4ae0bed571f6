"""exactspec conformance suite: certify any implementation of speculative sampling against the exact oracle,
with stated error rates, at four levels: rule (`verify`), sequence (`generate`), tree (`verify_tree`) and
engine (a serving engine's sample files). See conformance/CONTRACT.md.

    pytest --pyargs exactspec.conformance --exactspec-impl mypkg.spec:Verifier [--exactspec-profile quick|standard|full]
    exactspec certify --impl mypkg.spec:Verifier --out report/
    from exactspec.conformance import certify; certify("mypkg.spec:Verifier", profile="quick").verdict

What an adapter author needs is importable from here::

    from exactspec.conformance import ImplUnavailable, Unsupported, SamplingParams, load_cases, strategies

Importing this package is light (no numpy-heavy or torch imports): `certify`, `Certificate`, `SamplingParams`,
`load_cases` and `strategies` are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from .loader import call_implementation, load_adapter
from ..errors import (
    ContractViolation,
    ExactspecError,
    ImplementationError,
    ImplUnavailable,
    Unsupported,
)

CONTRACT_VERSION = "1.4"

#: Public names imported on first access: name -> (module, attribute or None for the module itself).
_LAZY: dict[str, tuple[str, str | None]] = {
    "certify": (".api", "certify"),
    "Certificate": (".api", "Certificate"),
    "SamplingParams": ("..reference.warping", "SamplingParams"),
    "load_cases": (".rule.cases", "load_cases"),
    "strategies": (".rule.strategies", None),
}

__all__ = [
    "CONTRACT_VERSION",
    "Certificate",
    "ContractViolation",
    "ExactspecError",
    "ImplUnavailable",
    "ImplementationError",
    "SamplingParams",
    "Unsupported",
    "call_implementation",
    "certify",
    "load_adapter",
    "load_cases",
    "strategies",
]


def __getattr__(name: str) -> Any:
    """Import the lazy public names (and any submodule) on first access."""
    if name in _LAZY:
        module_name, attribute = _LAZY[name]
        module = importlib.import_module(module_name, __name__)
        value = module if attribute is None else getattr(module, attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
