"""The engine level's sample file: JSON Lines, schema "exactspec.engine.samples", version 1.2.

Line 1 is a header; every other line is a ``completion`` (one sampled completion of one prompt), a ``prefix_probs``
record (the reference endpoint's reported next-token distribution after a prefix, collected by teacher forcing), a
``counters`` record (speculation counters read around a batch of requests, for engines that report them only
engine-wide) or a ``background`` record (requests sent to the candidate beside its loaded ones: their load only,
`load.Background`). The full schema is in conformance/CONTRACT.md, "Engine level". 1.1 added the ``counters``
record, a completion's ``index`` (its place in the design's seed list) and the header's ``design``; 1.2 a
completion's ``sent_at``, ``received_at`` (the load measured: `load`) and ``load`` (``serial`` or ``loaded``), the
``background`` record and ``design.load``. `read_samples(path)` parses and validates a file (a ValueError names the
file, the line and the field); `write_samples(path, header, records)` writes one; `sample_store` appends to and
resumes one. Readers ignore unknown fields, so a minor version may add optional ones; a different major version is
refused; older files read as before. Torch-free and httpx-free.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Literal, overload

from .law_params import TEACHER_FORCING, request_mismatch
from .load import LOAD_LABELS, Background, check_load_design, parse_background

SCHEMA = "exactspec.engine.samples"
SCHEMA_VERSION = "1.2"
# draft: the draft model served plain, its reports (diagnosis only)
ROLES = (
    "reference",
    "candidate",
    "draft",
)
PROBS_KINDS = ("post_sampling", "raw")
#: The report tolerance (CONTRACT.md "Report tolerance"): each reported probability p' is within
#: TOLERANCE_RELATIVE * p' + TOLERANCE_ABSOLUTE of the law the engine samples from: relative 1e-3 (float32 logits
#: and log-probabilities through any batch shape), absolute 1e-5 (probabilities printed with 5 decimals). A top-N
#: list may then sum to at most (1 + N a) / (1 - rho); the law checks widen every bound by it (`law_stream`).
TOLERANCE_RELATIVE, TOLERANCE_ABSOLUTE = 1e-3, 1e-5

TopProbs = tuple[tuple[int, float], ...]  # (token id, probability), as the engine reported them


@dataclass(frozen=True)
class Header:
    """Line 1: what was sampled, from which engine, with which pinned request parameters."""

    role: str
    engine: dict
    model: dict
    request_defaults: dict
    prompts: dict  # prompt_id -> prompt token ids (tuple of int)
    created: str
    exactspec_version: str
    schema_version: str = SCHEMA_VERSION
    # how the seeds were drawn, and the collection's concurrency (`Design`)
    design: dict | None = None

    @property
    def speculation(self) -> dict | None:
        return self.engine.get("speculation")

    @property
    def random_seeds(self) -> int | None:
        """The size of the seed space the seeds were drawn from uniformly (without replacement), or None when the
        design does not say they were (consecutive seeds from an older collector)."""
        seeds = (self.design or {}).get("seeds") or {}
        return int(seeds["space"]) if seeds.get("kind") == "random" else None

    def to_dict(self) -> dict:
        d = {
            "kind": "header",
            "schema": SCHEMA,
            "schema_version": self.schema_version,
            "role": self.role,
            "engine": self.engine,
            "model": self.model,
            "request_defaults": self.request_defaults,
            "prompts": [
                {"prompt_id": k, "prompt_tokens": list(v)} for k, v in self.prompts.items()
            ],
            "created": self.created,
            "exactspec_version": self.exactspec_version,
        }
        if self.design is not None:
            d["design"] = self.design
        return d


@dataclass(frozen=True)
class Completion:
    """One sampled completion; ``top_probs[t]`` is the engine's reported top-N at generated position t."""

    prompt_id: str
    seed: int
    tokens: tuple[int, ...]
    repeat: int = 0
    request: dict = field(default_factory=dict)
    text: str = ""
    top_probs: tuple[TopProbs, ...] | None = None
    probs_kind: str | None = None
    finish_reason: str | None = None
    timings: dict | None = None
    elapsed_s: float = 0.0
    # the seed's place in the design's seed list (the order the law checks read)
    index: int | None = None
    # its first byte written, its answer's first byte read (time.time(): `load`)
    sent_at: float | None = None
    received_at: float | None = None
    # candidate: "serial" (sampled alone) or "loaded" (with the run's concurrency)
    load: str | None = None

    def to_dict(self) -> dict:
        """The record's line (a shallow copy: writing a record is cheap); optional fields left out when unset."""
        d = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if getattr(self, f.name) is not None or f.name not in _OPTIONAL
        }
        d["tokens"] = list(self.tokens)
        if self.top_probs is not None:
            d["top_probs"] = [[[i, p] for i, p in row] for row in self.top_probs]
        return {"kind": "completion", **d}


_OPTIONAL = ("index", "sent_at", "received_at", "load")


@dataclass(frozen=True)
class PrefixProbs:
    """The reference's reported distribution of the next token after ``prefix_tokens`` (generated tokens)."""

    prompt_id: str
    prefix_tokens: tuple[int, ...]
    top_probs: TopProbs
    probs_kind: str
    request: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "kind": "prefix_probs",
            "prompt_id": self.prompt_id,
            "prefix_tokens": list(self.prefix_tokens),
            "top_probs": [[i, p] for i, p in self.top_probs],
            "probs_kind": self.probs_kind,
            "request": self.request,
        }


@dataclass(frozen=True)
class Counters:
    """Speculation counters read around a batch of candidate requests (engines that count only engine-wide):
    ``draft_n`` / ``draft_n_accepted`` drafted and accepted in the batch, over ``completions`` completions."""

    draft_n: int
    draft_n_accepted: int
    completions: int
    source: str = ""

    def to_dict(self) -> dict:
        return {"kind": "counters", **asdict(self)}


@dataclass
class SampleFile:
    """A parsed sample file."""

    path: str
    header: Header
    completions: list[Completion]
    prefix_probs: list[PrefixProbs]
    counters: list[Counters] = field(default_factory=list)
    background: list[Background] = field(default_factory=list)

    def by_prompt(self, repeat: int | None = 0) -> dict[str, list[Completion]]:
        """Completions per prompt id (header order), only those with ``repeat == repeat`` (None: all)."""
        out: dict[str, list[Completion]] = {pid: [] for pid in self.header.prompts}
        for c in self.completions:
            if repeat is None or c.repeat == repeat:
                out[c.prompt_id].append(c)
        return out


class _Where:
    """Builds the ValueError of one line: file, line number, field."""

    def __init__(self, path: str, line: int):
        self.path, self.line = path, line

    def error(self, name: str, message: str) -> ValueError:
        return ValueError(f"{self.path}: line {self.line}: field {name!r}: {message}")

    def get(self, record: dict, name: str, types: tuple, optional: bool = False) -> Any:
        if name not in record:
            if optional:
                return None
            raise self.error(name, "missing")
        value = record[name]
        if value is None and optional:
            return None
        if isinstance(value, bool) and bool not in types:
            raise self.error(name, f"expected {'/'.join(t.__name__ for t in types)}, got {value!r}")
        if not isinstance(value, types):
            raise self.error(
                name, f"expected {'/'.join(t.__name__ for t in types)}, got {type(value).__name__}"
            )
        return value

    def token_ids(self, record: dict, name: str) -> tuple[int, ...]:
        values = self.get(record, name, (list,))
        if not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in values):
            raise self.error(name, "expected a list of non-negative integer token ids")
        return tuple(values)

    def top_probs(self, row: Any, name: str) -> TopProbs:
        if not isinstance(row, list):
            raise self.error(name, "expected a list of [token id, probability] pairs")
        pairs = []
        for pair in row:
            ok = (
                isinstance(pair, list)
                and len(pair) == 2
                and isinstance(pair[0], int)
                and not isinstance(pair[0], bool)
                and pair[0] >= 0
                and isinstance(pair[1], (int, float))
                and not isinstance(pair[1], bool)
                and math.isfinite(pair[1])
                and 0.0 <= pair[1] <= 1.0
            )
            if not ok:
                raise self.error(
                    name, f"expected [token id >= 0, probability in [0, 1]], got {pair!r}"
                )
            pairs.append((int(pair[0]), float(pair[1])))
        if len({i for i, _ in pairs}) != len(pairs):
            raise self.error(name, "a token id is listed twice")
        allowed = (1.0 + len(pairs) * TOLERANCE_ABSOLUTE) / (1.0 - TOLERANCE_RELATIVE)
        if sum(p for _, p in pairs) > allowed:
            raise self.error(
                name,
                f"probabilities sum to {sum(p for _, p in pairs):.9g}, more than {allowed:.9g} "
                f"((1 + N a) / (1 - rho), N = {len(pairs)} listed): more than the report tolerance explains",
            )
        return tuple(pairs)

    def interval(self, sent: Any, received: Any, name: str) -> tuple[float, float]:
        """(sent_at, received_at): wall-clock times in seconds (finite, >= 0), the answer not before the request."""
        for suffix, value in (("sent_at", sent), ("received_at", received)):
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise self.error(
                    name + suffix,
                    f"expected a time in seconds (a finite number >= 0), got {value!r}",
                )
        if received < sent:
            raise self.error(f"{name}received_at", f"{received!r} is before sent_at {sent!r}")
        return float(sent), float(received)

    @overload
    def probs_kind(self, record: dict, optional: Literal[False]) -> str: ...

    @overload
    def probs_kind(self, record: dict, optional: bool) -> str | None: ...

    def probs_kind(self, record: dict, optional: bool) -> str | None:
        kind = self.get(record, "probs_kind", (str,), optional=optional)
        if kind is not None and kind not in PROBS_KINDS:
            raise self.error("probs_kind", f"must be one of {PROBS_KINDS}, got {kind!r}")
        return kind


def _parse_header(record: dict, at: _Where) -> Header:
    if record.get("kind") != "header":
        raise at.error("kind", f"line 1 must be the header record, got kind {record.get('kind')!r}")
    if at.get(record, "schema", (str,)) != SCHEMA:
        raise at.error("schema", f"expected {SCHEMA!r}, got {record['schema']!r}")
    version = at.get(record, "schema_version", (str,))
    if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise at.error(
            "schema_version",
            f"this reader reads version {SCHEMA_VERSION} (major 1), got {version!r}",
        )
    role = at.get(record, "role", (str,))
    if role not in ROLES:
        raise at.error("role", f"must be one of {ROLES}, got {role!r}")
    engine = at.get(record, "engine", (dict,))
    at.get(engine, "name", (str,))
    spec = at.get(engine, "speculation", (dict,), optional=True)
    if spec is not None and not isinstance(spec.get("expect_seed_coupled", False), bool):
        raise at.error("engine.speculation.expect_seed_coupled", "expected a boolean")
    model = at.get(record, "model", (dict,))
    at.get(model, "name", (str,))
    prompts: dict[str, tuple[int, ...]] = {}
    for entry in at.get(record, "prompts", (list,)):
        if not isinstance(entry, dict):
            raise at.error(
                "prompts", f"expected objects with prompt_id and prompt_tokens, got {entry!r}"
            )
        pid = at.get(entry, "prompt_id", (str,))
        if pid in prompts:
            raise at.error("prompts", f"prompt_id {pid!r} listed twice")
        prompts[pid] = at.token_ids(entry, "prompt_tokens")
    design = at.get(record, "design", (dict,), optional=True)
    if design is not None:
        _check_design(design, at)
    return Header(
        role=role,
        engine=engine,
        model=model,
        request_defaults=at.get(record, "request_defaults", (dict,)),
        prompts=prompts,
        created=at.get(record, "created", (str,)),
        exactspec_version=at.get(record, "exactspec_version", (str,)),
        schema_version=version,
        design=design,
    )


def _check_design(design: dict, at: _Where) -> None:
    """design.seeds: {"kind": "random", "space": N >= 2, "key": str} or {"kind": "consecutive"}; concurrency >= 1;
    load (`load.check_load_design`)."""
    seeds = at.get(design, "seeds", (dict,), optional=True) or {}
    kind = seeds.get("kind", "consecutive")
    if kind not in ("random", "consecutive"):
        raise at.error("design.seeds.kind", f"must be 'random' or 'consecutive', got {kind!r}")
    if kind == "random" and not (
        isinstance(seeds.get("space"), int)
        and seeds["space"] >= 2
        and isinstance(seeds.get("key"), str)
    ):
        raise at.error(
            "design.seeds",
            f"random seeds need an integer 'space' >= 2 and a string 'key', got {seeds!r}",
        )
    concurrency = design.get("concurrency")
    if concurrency is not None and not (isinstance(concurrency, int) and concurrency >= 1):
        raise at.error("design.concurrency", f"must be an integer >= 1, got {concurrency!r}")
    check_load_design(at.get(design, "load", (dict,), optional=True), at)


def _prompt_id(record: dict, header: Header, at: _Where) -> str:
    pid = at.get(record, "prompt_id", (str,))
    if pid not in header.prompts:
        raise at.error("prompt_id", f"{pid!r} is not one of the header's prompts")
    return pid


def _request(
    record: dict, header: Header, at: _Where, ignore: frozenset[str] = frozenset()
) -> dict:
    """The record's request, which must sample the header's law: no law-changing parameter set otherwise."""
    request = at.get(record, "request", (dict,), optional=True) or {}
    mismatch = request_mismatch(request, header.request_defaults, ignore)
    if mismatch is not None:
        name, sent, declared = mismatch
        raise at.error(
            f"request.{name}",
            f"{sent!r}, but the header's request_defaults say {declared!r}: this "
            "record sampled another law than the file declares",
        )
    return request


def _parse_completion(record: dict, header: Header, at: _Where) -> Completion:
    tokens = at.token_ids(record, "tokens")
    rows = at.get(record, "top_probs", (list,), optional=True)
    top = None
    if rows is not None:
        if len(rows) != len(tokens):
            raise at.error("top_probs", f"has {len(rows)} positions but tokens has {len(tokens)}")
        top = tuple(at.top_probs(row, f"top_probs[{t}]") for t, row in enumerate(rows))
    repeat = at.get(record, "repeat", (int,), optional=True) or 0
    if repeat < 0:
        raise at.error("repeat", f"must be >= 0, got {repeat}")
    elapsed = at.get(record, "elapsed_s", (int, float), optional=True)
    index = at.get(record, "index", (int,), optional=True)
    if index is not None and index < 0:
        raise at.error("index", f"must be >= 0, got {index}")
    sent, received = record.get("sent_at"), record.get("received_at")
    if (sent is None) != (received is None):
        raise at.error(
            "sent_at" if sent is None else "received_at",
            "give both sent_at and received_at, or neither",
        )
    sent, received = (None, None) if sent is None else at.interval(sent, received, "")
    load = at.get(record, "load", (str,), optional=True)
    if load is not None and load not in LOAD_LABELS:
        raise at.error("load", f"must be one of {LOAD_LABELS}, got {load!r}")
    return Completion(
        prompt_id=_prompt_id(record, header, at),
        seed=at.get(record, "seed", (int,)),
        tokens=tokens,
        repeat=repeat,
        request=_request(record, header, at),
        text=at.get(record, "text", (str,), optional=True) or "",
        top_probs=top,
        probs_kind=at.probs_kind(record, optional=True),
        finish_reason=at.get(record, "finish_reason", (str,), optional=True),
        timings=at.get(record, "timings", (dict,), optional=True),
        elapsed_s=float(elapsed or 0.0),
        index=index,
        sent_at=sent,
        received_at=received,
        load=load,
    )


def _parse_counters(record: dict, at: _Where) -> Counters:
    values = {
        name: at.get(record, name, (int,))
        for name in ("draft_n", "draft_n_accepted", "completions")
    }
    if any(v < 0 for v in values.values()):
        raise at.error("draft_n", f"counters must be >= 0, got {values}")
    return Counters(**values, source=at.get(record, "source", (str,), optional=True) or "")


def _parse_prefix_probs(record: dict, header: Header, at: _Where) -> PrefixProbs:
    return PrefixProbs(
        prompt_id=_prompt_id(record, header, at),
        prefix_tokens=at.token_ids(record, "prefix_tokens"),
        top_probs=at.top_probs(at.get(record, "top_probs", (list,)), "top_probs"),
        probs_kind=at.probs_kind(record, optional=False),
        request=_request(record, header, at, TEACHER_FORCING),
    )


def _records(path: Path) -> Iterable[tuple[int, dict]]:
    """The file's records by line number (a `.gz` file is read through gzip, as committed certificates store it)."""
    with (
        gzip.open(path, "rt", encoding="utf-8")
        if path.suffix == ".gz"
        else path.open(encoding="utf-8")
    ) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}: line {number}: not valid JSON: {error}") from None
            if not isinstance(record, dict):
                raise ValueError(
                    f"{path}: line {number}: expected a JSON object, got {type(record).__name__}"
                )
            yield number, record


def read_samples(path: str | os.PathLike) -> SampleFile:
    """Parse and validate the sample file at `path` (ValueError naming the file, line and field)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p}: no such sample file")
    header, completions, prefix, counters, background = None, [], [], [], []
    for number, record in _records(p):
        at = _Where(str(p), number)
        if header is None:
            header = _parse_header(record, at)
        elif record.get("kind") == "completion":
            completions.append(_parse_completion(record, header, at))
        elif record.get("kind") == "prefix_probs":
            prefix.append(_parse_prefix_probs(record, header, at))
        elif record.get("kind") == "counters":
            counters.append(_parse_counters(record, at))
        elif record.get("kind") == "background":
            background.append(parse_background(record, at))
        else:
            raise at.error(
                "kind",
                "must be 'completion', 'prefix_probs', 'counters' or 'background', got "
                f"{record.get('kind')!r}",
            )
    if header is None:
        raise ValueError(f"{p}: empty sample file (no header line)")
    return SampleFile(str(p), header, completions, prefix, counters, background)


Record = Completion | PrefixProbs | Counters | Background
RECORD_TYPES = (Completion, PrefixProbs, Counters, Background)


def write_samples(path: str | Path, header: Header, records: Iterable[Record]) -> Path:
    """Write `header` and `records` to `path` as JSON Lines (strict JSON: no NaN); returns the path."""
    if not isinstance(header, Header):
        raise ValueError(f"header must be a samples.Header, got {type(header).__name__}")
    p = Path(path)
    with p.open("w", encoding="utf-8") as handle:
        for record in [header, *records]:
            if not isinstance(record, (Header, *RECORD_TYPES)):
                raise ValueError(
                    "records must be Completion, PrefixProbs, Counters or Background, got "
                    f"{type(record).__name__}"
                )
            handle.write(
                json.dumps(record.to_dict(), allow_nan=False, separators=(",", ":")) + "\n"
            )
    return p
