"""The one loader of implementations, for every level, and the one way to call into them.

    load_adapter("mypkg.spec:Verifier")      -> LoadedAdapter(adapter, level="rule", ...)
    load_adapter("myseq:PlainLoop")          -> LoadedAdapter(adapter, level="sequence", ...)
    call_implementation(adapter.generate, target, draft, ...)   # any exception -> ImplementationError

The level is read from what the object offers (each level's `Level.offers`; where several are offered, the one with
the highest `auto_priority`: `generate` -> sequence before `verify` -> rule); asking for a level the object does not
offer is an error, never a silent switch. Torch-free: builtin sequence adapters are passed in by the caller
(conformance/sequence/adapters.py).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..errors import AdapterLoadError, ImplementationError, ImplUnavailable, Unsupported
from .core.levels import LEVELS as LEVEL_NAMES
from .core.levels import get_level, level_names

#: "auto" (the level the object offers) or a level of the one registry (`core.levels`; levels added to it later
#: are accepted too).
LEVELS = ("auto", *LEVEL_NAMES)
#: Exceptions an implementation raises on purpose to say "not here" / "not this configuration": never wrapped.
PASS_THROUGH = (ImplUnavailable, Unsupported)
TRACEBACK_CHARS = 4000


# ------------------------------------------------------------------------------------------------------
# calling the implementation
# ------------------------------------------------------------------------------------------------------


def implementation_error(
    error: Exception, label: str, context: str = "", skip_frames: int = 1
) -> ImplementationError:
    """An ImplementationError describing `error` (raised by the implementation's `label` call), with its
    traceback text minus the first `skip_frames` frames (the suite's own call site)."""
    tb = error.__traceback__
    for _ in range(skip_frames):
        tb = tb.tb_next if tb is not None and tb.tb_next is not None else tb
    text = "".join(traceback.format_exception(type(error), error, tb))
    if len(text) > TRACEBACK_CHARS:
        text = "...\n" + text[-TRACEBACK_CHARS:]
    where = f" ({context})" if context else ""
    message = f"{label} raised {type(error).__name__}: {error}{where}"
    return ImplementationError(
        message, exc_type=type(error).__name__, traceback_text=text, original=error
    )


def _label(fn: Callable) -> str:
    owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return (
        f"{type(owner).__name__}.{name}"
        if owner is not None
        else str(getattr(fn, "__qualname__", name))
    )


def call_implementation(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """fn(*args, **kwargs), with any Exception it raises -- AssertionError included -- re-raised as an
    ImplementationError carrying `exc_type` and `traceback_text`. ImplUnavailable and Unsupported pass
    through unchanged (they are signals, not failures); KeyboardInterrupt and SystemExit are not caught."""
    try:
        return fn(*args, **kwargs)
    except PASS_THROUGH:
        raise
    except Exception as error:  # noqa: BLE001 -- whatever the implementation raises is its failure
        raise implementation_error(error, _label(fn)) from error


# ------------------------------------------------------------------------------------------------------
# loading
# ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadedAdapter:
    """An adapter object, the level it offers and where it came from (`spec`, `module`, None for objects)."""

    adapter: Any
    level: str
    spec: str
    module: str | None = None


def adapter_levels() -> list[Any]:
    """The levels that load adapters, highest `auto_priority` first."""
    declared = [get_level(name) for name in level_names()]
    return sorted((lv for lv in declared if lv.adapter_signature), key=lambda lv: -lv.auto_priority)


def level_of(obj: Any) -> str | None:
    """The level `obj` offers (the highest-priority one where it offers several, e.g. 'sequence' for an object
    with both generate and verify), else None."""
    return next((lv.name for lv in adapter_levels() if lv.offers(obj)), None)


def import_module_from_cwd(module_name: str, spec: str) -> Any:
    """Import `module_name` with the current directory on sys.path; any failure -> AdapterLoadError."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_name)
    except ImportError as error:
        missing = getattr(error, "name", None)
        hint = (
            f"; it must be importable from sys.path (the current directory {cwd} is on it)"
            if missing and (module_name == missing or module_name.startswith(missing + "."))
            else f" while importing {module_name!r}: the module itself imports something that is missing"
        )
        raise AdapterLoadError(
            f"--impl {spec}: cannot import module {module_name!r}: {type(error).__name__}: "
            f"{error}{hint}",
            module=module_name,
            cause=error,
        ) from error
    except Exception as error:  # noqa: BLE001 -- a module that crashes on import cannot be loaded
        raise AdapterLoadError(
            f"--impl {spec}: cannot import module {module_name!r}: importing it raised "
            f"{type(error).__name__}: {error}",
            module=module_name,
            cause=error,
        ) from error


def _resolve(spec: str, builtins: Mapping[str, Any]) -> tuple[Any, str | None]:
    if spec in builtins:
        return builtins[spec], None
    if ":" not in spec:
        known = f" or one of the builtin names {sorted(builtins)}" if builtins else ""
        raise AdapterLoadError(
            f"--impl must look like MODULE:NAME (e.g. mypkg.spec:Verifier){known}, got {spec!r}"
        )
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise AdapterLoadError(
            f"--impl must look like MODULE:NAME with both parts non-empty, got {spec!r}"
        )
    obj = import_module_from_cwd(module_name, spec)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AdapterLoadError(
                f"--impl {spec}: module {module_name!r} has no attribute {attr!r}",
                module=module_name,
            )
        obj = getattr(obj, part)
    return obj, module_name


def _needs_arguments(factory: Callable) -> bool:
    try:
        inspect.signature(factory).bind()
    except TypeError:
        return True
    except ValueError:  # no signature available (some builtins): try calling it
        return False
    return False


def _instantiate(obj: Any, spec: str) -> Any:
    """Call a class or zero-argument factory that offers no adapter method itself."""
    if not (isinstance(obj, type) or (callable(obj) and level_of(obj) is None)):
        return obj
    if _needs_arguments(obj):
        raise AdapterLoadError(
            f"--impl {spec}: {getattr(obj, '__name__', obj)!s} needs arguments; name a class or "
            f"factory callable with none, or an instance"
        )
    try:
        return obj()
    except ImplUnavailable:
        raise  # "cannot run here": the caller reports a skip with the reason
    except Exception as error:  # noqa: BLE001 -- a constructor that crashes means the adapter cannot be loaded
        raise AdapterLoadError(
            f"--impl {spec}: creating the adapter raised {type(error).__name__}: {error}",
            cause=error,
        ) from error


def load_adapter(
    spec: Any, level: str = "auto", builtins: Mapping[str, Any] | None = None
) -> LoadedAdapter:
    """Resolve `spec` ("MODULE:NAME", a builtin name, a class, factory or adapter object) to an adapter.

    `level` "auto" takes the level the object offers (`level_of`), another level demands that level
    (AdapterLoadError if the object does not offer it). ImplUnavailable raised by a factory propagates unchanged."""
    if level != "auto" and level not in level_names():
        raise ValueError(f"level must be one of {('auto', *level_names())}, got {level!r}")
    if level != "auto" and not get_level(level).adapter_signature:
        raise AdapterLoadError(
            get_level(level).input_hint or f"the {level} level certifies no adapter"
        )
    if spec is None:
        raise AdapterLoadError("no implementation given (--impl MODULE:NAME)")
    builtins = builtins or {}
    label = spec if isinstance(spec, str) else repr(spec)
    obj, module_name = _resolve(spec, builtins) if isinstance(spec, str) else (spec, None)
    obj = _instantiate(obj, label)
    offered = level_of(obj)
    if offered is None:
        wanted = [
            f"{lv.adapter_signature} ({lv.name} level)"
            for lv in map(get_level, level_names())
            if lv.adapter_signature
        ]
        raise AdapterLoadError(
            f"--impl {label}: {type(obj).__name__} (or what it returns when called) has no callable "
            f"{', '.join(wanted[:-1])} nor {wanted[-1]}",
            module=module_name,
        )
    chosen = offered if level == "auto" else level
    declared = get_level(chosen)
    if not declared.offers(obj):
        raise AdapterLoadError(
            f"--impl {label}: the {chosen} level was asked for but {type(obj).__name__} has no "
            f"callable {declared.adapter_signature} (it offers the {offered} level: use --level "
            f"{offered} or auto)",
            module=module_name,
        )
    return LoadedAdapter(obj, chosen, label, module_name)


__all__ = [
    "LEVELS",
    "LoadedAdapter",
    "PASS_THROUGH",
    "adapter_levels",
    "call_implementation",
    "implementation_error",
    "import_module_from_cwd",
    "level_of",
    "load_adapter",
]
