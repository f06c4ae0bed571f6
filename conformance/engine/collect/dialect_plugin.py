"""What a dialect is: a plugin that owns how one kind of engine is reached, its options, its command-line flags and
its capabilities.

A dialect is one module holding a `DialectPlugin` subclass (and, where none exists yet, its client), and one
registration line in `dialects` (`register_dialect`). The plugin says

* which flags are its own (`add_arguments`, shown in their own group of ``--help``; refused with another dialect)
  and turns them into its options (`options_from`: a frozen dataclass, ValueError naming the flag);
* what it can do (`Capabilities`: the seed space random seeds are drawn from, where speculation shows, whether there
  is a server whose load the design sets, whether teacher forcing may reuse a prompt cache);
* how to reach each end (`endpoints`) and talk to it (`make_client`: a `DialectClient`), and what every request pins
  of the law (`request_defaults`: a sample file's request defaults).

Nothing here reads the collection plan: a plugin gets its own options, the URLs and the `Connection`, nothing else.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from .client import Reply, RetryPolicy, SamplerChain

#: llama.cpp's seeds are uint32, and 2**32 - 1 means "random": seeds are drawn from [0, 2**32 - 2]. vLLM takes any
#: integer; the same space is used (its law is then the law under a seed uniform on that space).
UINT32_SEED_SPACE = 2**32 - 1
SPECULATION_SOURCES = ("timings", "metrics", "declared")
COMMANDS = ("collect", "certify")  # the commands a plugin adds its flags to


@dataclass(frozen=True)
class Connection:
    """How every request of a run is sent: its timeout, and its retries on connection errors, 5xx and 429."""

    request_timeout_s: float = 120.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def __post_init__(self) -> None:
        if not self.request_timeout_s > 0:
            raise ValueError(f"--request-timeout-s: must be > 0 (got {self.request_timeout_s:g})")


@dataclass(frozen=True)
class Capabilities:
    """What a dialect can do, which the collection reads instead of asking its name."""

    seed_space: int = UINT32_SEED_SPACE  # random seeds are drawn uniformly from [0, seed_space - 1]
    # "timings" (per reply), "metrics" (engine-wide counters) or "declared"
    speculation: str = "timings"
    # a server whose load the design sets (waves, lone requests, background load)
    has_server: bool = True
    prompt_cache: bool = False  # teacher forcing may ask the engine to reuse its prompt cache


class DialectClient(Protocol):
    """One end of an engine, as the collector uses it (``async with``). Optional members the collector looks for:
    ``draft_counters()`` (engine-wide counters: speculation "metrics"), ``report_after(prefix, chain)`` (a report
    without sampling) and ``complete_forced(prompt, prefix, seed, chain, extra)`` (teacher forcing primed)."""

    base_url: str
    requests_sent: int

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc_info: object) -> None: ...

    async def probe(self) -> None: ...  # `engine_errors.EngineUnreachable` when nothing answers

    async def complete(
        self, prompt_tokens: list[int], seed: int, chain: SamplerChain, extra: dict | None = None
    ) -> tuple[Reply, dict]: ...

    async def tokenize(self, text: str) -> list[int]: ...

    async def chat_tokenize(self, messages: list[dict]) -> list[int]: ...

    async def props(self) -> dict | None: ...


@dataclass(frozen=True)
class NoOptions:
    """The options of a dialect that has none."""


class DialectPlugin:
    """How to sample one kind of engine; subclass it, set the class attributes, override what differs."""

    name: ClassVar[str] = ""
    describe: ClassVar[str] = ""  # one line for --dialect's help
    capabilities: ClassVar[Capabilities] = Capabilities()
    options_type: ClassVar[type] = NoOptions
    # chosen with --dialect NAME (False: by a flag of its own, `selected_by`)
    by_name: ClassVar[bool] = True

    @property
    def group_title(self) -> str:
        """The title of this dialect's group of flags in --help."""
        return f"--dialect {self.name}"

    @property
    def only_with(self) -> str:
        """How a refused flag says which dialect it belongs to."""
        return f"--dialect {self.name}"

    def add_arguments(self, group: argparse._ArgumentGroup, command: str) -> None:
        """Add this dialect's own flags to `group` for `command` ("collect" or "certify")."""

    def selected_by(self, args: argparse.Namespace) -> bool:
        """Whether the command line chooses this dialect without --dialect (a flag of its own)."""
        return False

    def default_options(self) -> Any:
        return self.options_type()

    def options_from(self, args: argparse.Namespace, command: str) -> Any:
        """This dialect's options from the parsed command line (ValueError naming the flag)."""
        return self.default_options()

    def endpoints(
        self, options: Any, reference: tuple[str, ...], candidate: tuple[str, ...]
    ) -> dict[str, tuple]:
        """Role -> the URLs it is sampled at (the roles given only; ValueError naming the flag when one is bad)."""
        for flag, urls in (("--reference-url", reference), ("--candidate-url", candidate)):
            for url in urls:
                if not url.startswith(("http://", "https://")):
                    raise ValueError(
                        f"{flag}: {url!r} is not an http(s) URL, e.g. http://127.0.0.1:8080"
                    )
        return {
            role: urls
            for role, urls in (("reference", reference), ("candidate", candidate))
            if urls
        }

    def default_engine_name(self, options: Any) -> str:
        """The engine's name in the headers when --engine-name is not given."""
        return self.name

    def make_client(
        self, url: str, role: str, options: Any, connection: Connection
    ) -> DialectClient:
        raise NotImplementedError(f"dialect {self.name!r} has no client")

    def request_defaults(self, chain: SamplerChain, options: Any) -> dict:
        """The pinned sampler part of every request in this dialect."""
        return chain.request()

    def speculation_of(self, options: Any) -> str:
        """Where this run reads speculation (one of `SPECULATION_SOURCES`)."""
        return self.capabilities.speculation

    def forcing_extra(self, options: Any) -> dict | None:
        """What a teacher-forcing request adds (llama.cpp: reuse the prompt cache), or None."""
        return None


__all__ = [
    "COMMANDS",
    "Capabilities",
    "Connection",
    "DialectClient",
    "DialectPlugin",
    "NoOptions",
    "SPECULATION_SOURCES",
    "UINT32_SEED_SPACE",
]
