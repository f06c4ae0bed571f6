"""The plan of a collection: what `engine collect` and every round of `engine certify` are told, in small parts.

    CollectionPlan
      law        SamplerChain   the law both ends are asked for: temperature, top-k, top-p, min-p, max tokens, ...
      seeds      SeedDesign     random (by a key) or consecutive seeds, how many, shared by both ends or not
      limits     Limits         requests and seconds at most; `engine certify`'s first round and per-prompt cap
      transport  Transport      the dialect and its own options, the URLs of each end, concurrency, timeouts, retries
      identity   Identity       the engine's name, version and flags, its speculation, the model (headers only)
      forcing    Forcing        the reference's reports: top-N when teacher-forced and while sampling, positions
      load       LoadDesign     the candidate's load: the share of lone requests, a background load

Each command builds its plan explicitly (`engine_collect.plan_from`, `engine_certify.plan_from`); the campaign and
the collector hand each part to what needs it (the dialect gets its options and the connection, the seed functions
the seed design, the header the identity). The methods here compute what several parts decide together (the request
defaults, the load design), so that no module has to reach back for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from .client import SamplerChain
from .design import SeedDesign
from .dialect_plugin import Connection, DialectClient, DialectPlugin
from .dialects import DEFAULT_DIALECT, get_dialect

DEFAULT_SERIAL_SHARE = 0.25
DEFAULT_BACKGROUND_SAMPLING = (("temperature", 1.3), ("top_k", 5))
BACKGROUND_KEYS = {
    "temperature": float,
    "top_k": int,
    "top_p": float,
    "min_p": float,
    "max_tokens": int,
}


def _positive_int(value: Any, flag: str) -> None:
    if isinstance(value, bool) or not (isinstance(value, int) and value >= 1):
        raise ValueError(f"{flag}: must be an integer >= 1 (got {value!r})")


@dataclass(frozen=True)
class Limits:
    """The run's bounds: completion requests and seconds (`engine collect`; `engine certify` sizes each round's
    requests from its counts), completions per prompt in round 1 and at most (`engine certify`)."""

    max_requests: int = 20_000
    time_limit_s: float = 3600.0
    first_round: int = 32
    max_per_prompt: int = 50_000

    def __post_init__(self) -> None:
        for flag, value in (
            ("--max-requests", self.max_requests),
            ("--first-round", self.first_round),
            ("--max-per-prompt", self.max_per_prompt),
        ):
            _positive_int(value, flag)
        if not self.time_limit_s > 0:
            raise ValueError(f"--time-limit-s: must be > 0 (got {self.time_limit_s:g})")


@dataclass(frozen=True)
class Transport:
    """How both ends are reached: the dialect (a plugin, or its name) with its own options, each role's URLs
    (replicas: requests spread over them), the requests in flight per role, and each request's connection."""

    dialect: DialectPlugin | str = DEFAULT_DIALECT
    options: Any = None  # the dialect's options (None: its defaults)
    reference_urls: tuple[str, ...] = ()
    candidate_urls: tuple[str, ...] = ()
    concurrency: int = 4  # candidate requests in flight
    reference_concurrency: int | None = None  # None: `concurrency`
    connection: Connection = field(default_factory=Connection)

    def __post_init__(self) -> None:
        plugin = get_dialect(self.dialect) if isinstance(self.dialect, str) else self.dialect
        object.__setattr__(self, "dialect", plugin)
        if self.options is None:
            object.__setattr__(self, "options", plugin.default_options())
        if not isinstance(self.options, plugin.options_type):
            raise ValueError(
                f"dialect {plugin.name}: options must be {plugin.options_type.__name__}, got "
                f"{type(self.options).__name__}"
            )
        for name in ("reference_urls", "candidate_urls"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        _positive_int(self.concurrency, "--concurrency")
        if self.reference_concurrency is not None:
            _positive_int(self.reference_concurrency, "--reference-concurrency")

    @property
    def plugin(self) -> DialectPlugin:
        assert isinstance(self.dialect, DialectPlugin), "__post_init__ resolves a name"
        return self.dialect

    def endpoints(self) -> dict[str, tuple[str, ...]]:
        """Role -> its URLs, for the roles given (`DialectPlugin.endpoints`: ValueError naming the flag)."""
        return self.plugin.endpoints(self.options, self.reference_urls, self.candidate_urls)

    def client(self, url: str, role: str) -> DialectClient:
        return self.plugin.make_client(url, role, self.options, self.connection)

    def in_flight(self, role: str) -> int:
        """The requests of `role` in flight at once."""
        return (
            self.concurrency
            if role == "candidate"
            else self.reference_concurrency or self.concurrency
        )

    def speculation(self) -> str:
        """Where this run reads speculation: per reply (timings), at /metrics around batches, or declared."""
        return self.plugin.speculation_of(self.options)


@dataclass(frozen=True)
class Identity:
    """What the sample files' headers say the engine is: recorded, never sent."""

    engine_name: str | None = None  # None: the dialect's name
    engine_version: str | None = None  # None: what the engine's props say
    engine_flags: tuple[str, ...] = ()
    candidate_flags: tuple[str, ...] = ()  # the candidate's extra flags (its speculation)
    # {"type", "draft_sampling", "expect_seed_coupled"[, "evidence": "declared"]}
    speculation: dict | None = None
    model_name: str | None = None  # None: the file name of the engine's model path
    model_sha256: str | None = None


@dataclass(frozen=True)
class Forcing:
    """The reference's reports: its top-N after each teacher-forced prefix, only at prefixes shorter than
    `positions` (None: all), and its own top-N while sampling (`reference_n_probs`; None: the law's n_probs)."""

    teacher_n_probs: int = 20
    positions: int | None = None
    reference_n_probs: int | None = None

    def __post_init__(self) -> None:
        _positive_int(self.teacher_n_probs, "--teacher-n-probs")


@dataclass(frozen=True)
class LoadDesign:
    """The candidate's load: the share of its seeds asked one request at a time (None: 0.25 over HTTP, 0 in
    process), and `background_load` more requests with every loaded wave, with `background_sampling`."""

    serial_share: float | None = None
    background_load: int = 0
    # BACKGROUND_KEYS' values
    background_sampling: tuple[tuple[str, Any], ...] = DEFAULT_BACKGROUND_SAMPLING

    def __post_init__(self) -> None:
        share, extra = self.serial_share, self.background_load
        if share is not None and (
            isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1
        ):
            raise ValueError(f"--serial-share: must be a number in [0, 1] (got {share!r})")
        if isinstance(extra, bool) or not isinstance(extra, int) or extra < 0:
            raise ValueError(f"--background-load: must be an integer >= 0 (got {extra!r})")
        unknown = sorted(set(dict(self.background_sampling)) - set(BACKGROUND_KEYS))
        if unknown:
            raise ValueError(
                f"--background-sampling: {unknown[0]!r} is not one of {', '.join(BACKGROUND_KEYS)}"
            )


@dataclass(frozen=True)
class CollectionPlan:
    """Everything a collection is told but the prompts and the output folder (see the module's docstring)."""

    law: SamplerChain = field(default_factory=SamplerChain)
    seeds: SeedDesign = field(default_factory=SeedDesign)
    limits: Limits = field(default_factory=Limits)
    transport: Transport = field(default_factory=Transport)
    identity: Identity = field(default_factory=Identity)
    forcing: Forcing = field(default_factory=Forcing)
    load: LoadDesign = field(default_factory=LoadDesign)

    def __post_init__(self) -> None:
        in_process = not self.transport.plugin.capabilities.has_server
        if in_process and (self.load.serial_share or self.load.background_load):
            flag = "--serial-share" if self.load.serial_share else "--background-load"
            raise ValueError(
                f"{flag}: an in-process engine (--engine-adapter) has no server whose load it could "
                "set; leave it out"
            )
        if self.load.background_load:
            self.background_chain()

    def request_defaults(self) -> dict:
        """The pinned sampler part of every request, in this dialect (a sample file's request defaults)."""
        return self.transport.plugin.request_defaults(self.law, self.transport.options)

    def role_chain(self, role: str) -> SamplerChain:
        """The chain a role's completions are asked with: the reference reports its top-N when asked to."""
        if role == "reference" and self.forcing.reference_n_probs is not None:
            return replace(self.law, n_probs=self.forcing.reference_n_probs)
        return self.law

    def serial_share(self) -> float:
        """The share of the candidate's seeds asked one request at a time (the default over HTTP; 0 in process)."""
        if self.load.serial_share is not None:
            return float(self.load.serial_share)
        return DEFAULT_SERIAL_SHARE if self.transport.plugin.capabilities.has_server else 0.0

    def background_chain(self) -> SamplerChain:
        """The background requests' chain: the run's, with the background sampling's values, no reports."""
        try:
            return replace(self.law, n_probs=0, **dict(self.load.background_sampling))
        except (TypeError, ValueError) as error:
            raise ValueError(f"--background-sampling: {error}") from None

    def load_design(self) -> dict | None:
        """Both headers' ``design.load`` (None in process): the candidate's concurrency, serial share and background
        load, and the reference's concurrency."""
        if not self.transport.plugin.capabilities.has_server:
            return None
        load = self.load
        background = (
            {"in_flight": load.background_load, "sampling": dict(load.background_sampling)}
            if load.background_load
            else None
        )
        return {
            "concurrency": self.transport.concurrency,
            "serial_share": self.serial_share(),
            "background": background,
            "reference_concurrency": self.transport.in_flight("reference"),
        }

    def with_urls(
        self, reference: tuple[str, ...] | list[str], candidate: tuple[str, ...] | list[str]
    ) -> CollectionPlan:
        """The same plan at other URLs (a shared plan served at each candidate's server)."""
        return replace(
            self,
            transport=replace(
                self.transport, reference_urls=tuple(reference), candidate_urls=tuple(candidate)
            ),
        )

    def with_seed_key(self, key: str | None) -> CollectionPlan:
        return replace(self, seeds=replace(self.seeds, key=key))


__all__ = [
    "BACKGROUND_KEYS",
    "CollectionPlan",
    "DEFAULT_BACKGROUND_SAMPLING",
    "DEFAULT_SERIAL_SHARE",
    "Forcing",
    "Identity",
    "LoadDesign",
    "Limits",
    "SeedDesign",
    "Transport",
]
