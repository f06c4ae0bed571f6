"""The dialects the collector speaks: one registry, one registration line per dialect.

Each dialect is a plugin (`dialect_plugin.DialectPlugin`) in a module of its own, which owns its options, its flags
and its capabilities. Adding one is that module and one `register_dialect` line here (or, for a dialect that lives
outside exactspec, one call before the command line is parsed): ``--dialect``'s choices, its group of flags in
``--help`` and the refusal of its flags with another dialect follow from the registration.
"""

from __future__ import annotations

from .dialect_llama_cpp import LlamaCppDialect
from .dialect_openai import OpenAIDialect
from .dialect_plugin import DialectPlugin
from .dialect_python import PythonDialect
from .dialect_vllm import VllmDialect

#: name -> plugin, in registration order (the order of --help's groups).
DIALECTS: dict[str, DialectPlugin] = {}
DEFAULT_DIALECT = "llama.cpp"


def register_dialect(plugin: DialectPlugin) -> DialectPlugin:
    """Add `plugin` under its name (ValueError when the name is taken by another plugin)."""
    if not plugin.name:
        raise ValueError(f"{type(plugin).__name__}: a dialect needs a name")
    if plugin.name in DIALECTS and DIALECTS[plugin.name] is not plugin:
        raise ValueError(f"dialect {plugin.name!r} is registered already")
    DIALECTS[plugin.name] = plugin
    return plugin


def unregister_dialect(name: str) -> None:
    """Remove a dialect (a test's toy dialect, after the test)."""
    DIALECTS.pop(name, None)


def get_dialect(name: str) -> DialectPlugin:
    """The dialect called `name` (ValueError naming the dialects otherwise)."""
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"--dialect: {name!r} must be one of {', '.join(DIALECTS)}") from None


def named_dialects() -> tuple[str, ...]:
    """The dialects chosen by name (``--dialect``'s choices); the others are chosen by a flag of their own."""
    return tuple(name for name, plugin in DIALECTS.items() if plugin.by_name)


register_dialect(LlamaCppDialect())
register_dialect(VllmDialect())
register_dialect(OpenAIDialect())
register_dialect(PythonDialect())

__all__ = [
    "DEFAULT_DIALECT",
    "DIALECTS",
    "get_dialect",
    "named_dialects",
    "register_dialect",
    "unregister_dialect",
]
