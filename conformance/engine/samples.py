"""The engine level's sample file: JSON Lines, schema "exactspec.engine.samples", version 1.0.

Line 1 is a header; every other line is a ``completion`` (one sampled completion of one prompt) or a
``prefix_probs`` record (the reference endpoint's reported next-token distribution after a prefix,
collected by teacher forcing). The full schema is in conformance/CONTRACT.md, "Engine level".

`read_samples(path)` parses and validates a file (a ValueError names the file, the line and the field);
`write_samples(path, header, records)` writes one. Readers ignore unknown fields, so a minor version may
add optional ones; a different major version is refused. Torch-free and httpx-free.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal, overload

from ..paths import portable_args
from .law_params import TEACHER_FORCING, request_mismatch

SCHEMA = "exactspec.engine.samples"
SCHEMA_VERSION = "1.0"
ROLES = ("reference", "candidate")
PROBS_KINDS = ("post_sampling", "raw")
#: The rounding tolerance of one reported probability (absolute): a top-N list may sum to at most
#: 1 + N * REPORT_ROUNDING, and the PIT widens its critical value by that much (`pit`, proofs C14). Float32
#: softmax outputs printed to JSON are within ~1e-7 of the engine's value; 1e-5 also covers 5 printed decimals.
REPORT_ROUNDING = 1e-5

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

    @property
    def speculation(self) -> dict | None:
        return self.engine.get("speculation")

    def to_dict(self) -> dict:
        d = {"kind": "header", "schema": SCHEMA, "schema_version": self.schema_version, "role": self.role,
             "engine": self.engine, "model": self.model, "request_defaults": self.request_defaults,
             "prompts": [{"prompt_id": k, "prompt_tokens": list(v)} for k, v in self.prompts.items()],
             "created": self.created, "exactspec_version": self.exactspec_version}
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

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tokens"] = list(self.tokens)
        if self.top_probs is not None:
            d["top_probs"] = [[[i, p] for i, p in row] for row in self.top_probs]
        return {"kind": "completion", **d}


@dataclass(frozen=True)
class PrefixProbs:
    """The reference's reported distribution of the next token after ``prefix_tokens`` (generated tokens)."""

    prompt_id: str
    prefix_tokens: tuple[int, ...]
    top_probs: TopProbs
    probs_kind: str
    request: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"kind": "prefix_probs", "prompt_id": self.prompt_id, "prefix_tokens": list(self.prefix_tokens),
                "top_probs": [[i, p] for i, p in self.top_probs], "probs_kind": self.probs_kind,
                "request": self.request}


@dataclass
class SampleFile:
    """A parsed sample file."""

    path: str
    header: Header
    completions: list[Completion]
    prefix_probs: list[PrefixProbs]

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
            raise self.error(name, f"expected {'/'.join(t.__name__ for t in types)}, got {type(value).__name__}")
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
            ok = (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], int)
                  and not isinstance(pair[0], bool) and pair[0] >= 0 and isinstance(pair[1], (int, float))
                  and not isinstance(pair[1], bool) and math.isfinite(pair[1]) and 0.0 <= pair[1] <= 1.0)
            if not ok:
                raise self.error(name, f"expected [token id >= 0, probability in [0, 1]], got {pair!r}")
            pairs.append((int(pair[0]), float(pair[1])))
        if len({i for i, _ in pairs}) != len(pairs):
            raise self.error(name, "a token id is listed twice")
        if sum(p for _, p in pairs) > 1.0 + len(pairs) * REPORT_ROUNDING:
            raise self.error(name, f"probabilities sum to {sum(p for _, p in pairs):.9g}, more than 1 + N x "
                             f"{REPORT_ROUNDING:g} (N = {len(pairs)} listed): more than rounding explains")
        return tuple(pairs)

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
        raise at.error("schema_version", f"this reader reads version {SCHEMA_VERSION} (major 1), got {version!r}")
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
            raise at.error("prompts", f"expected objects with prompt_id and prompt_tokens, got {entry!r}")
        pid = at.get(entry, "prompt_id", (str,))
        if pid in prompts:
            raise at.error("prompts", f"prompt_id {pid!r} listed twice")
        prompts[pid] = at.token_ids(entry, "prompt_tokens")
    return Header(role=role, engine=engine, model=model, request_defaults=at.get(record, "request_defaults", (dict,)),
                  prompts=prompts, created=at.get(record, "created", (str,)),
                  exactspec_version=at.get(record, "exactspec_version", (str,)), schema_version=version)


def _prompt_id(record: dict, header: Header, at: _Where) -> str:
    pid = at.get(record, "prompt_id", (str,))
    if pid not in header.prompts:
        raise at.error("prompt_id", f"{pid!r} is not one of the header's prompts")
    return pid


def _request(record: dict, header: Header, at: _Where, ignore: frozenset[str] = frozenset()) -> dict:
    """The record's request, which must sample the header's law: no law-changing parameter set otherwise."""
    request = at.get(record, "request", (dict,), optional=True) or {}
    mismatch = request_mismatch(request, header.request_defaults, ignore)
    if mismatch is not None:
        name, sent, declared = mismatch
        raise at.error(f"request.{name}", f"{sent!r}, but the header's request_defaults say {declared!r}: this "
                                          "record sampled another law than the file declares")
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
    return Completion(prompt_id=_prompt_id(record, header, at), seed=at.get(record, "seed", (int,)), tokens=tokens,
                      repeat=repeat, request=_request(record, header, at),
                      text=at.get(record, "text", (str,), optional=True) or "", top_probs=top,
                      probs_kind=at.probs_kind(record, optional=True),
                      finish_reason=at.get(record, "finish_reason", (str,), optional=True),
                      timings=at.get(record, "timings", (dict,), optional=True),
                      elapsed_s=float(elapsed or 0.0))


def _parse_prefix_probs(record: dict, header: Header, at: _Where) -> PrefixProbs:
    return PrefixProbs(prompt_id=_prompt_id(record, header, at), prefix_tokens=at.token_ids(record, "prefix_tokens"),
                       top_probs=at.top_probs(at.get(record, "top_probs", (list,)), "top_probs"),
                       probs_kind=at.probs_kind(record, optional=False),
                       request=_request(record, header, at, TEACHER_FORCING))


def _records(path: Path) -> Iterable[tuple[int, dict]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}: line {number}: not valid JSON: {error}") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}: line {number}: expected a JSON object, got {type(record).__name__}")
            yield number, record


def read_samples(path: str | os.PathLike) -> SampleFile:
    """Parse and validate the sample file at `path` (ValueError naming the file, line and field)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p}: no such sample file")
    header, completions, prefix = None, [], []
    for number, record in _records(p):
        at = _Where(str(p), number)
        if header is None:
            header = _parse_header(record, at)
        elif record.get("kind") == "completion":
            completions.append(_parse_completion(record, header, at))
        elif record.get("kind") == "prefix_probs":
            prefix.append(_parse_prefix_probs(record, header, at))
        else:
            raise at.error("kind", f"must be 'completion' or 'prefix_probs', got {record.get('kind')!r}")
    if header is None:
        raise ValueError(f"{p}: empty sample file (no header line)")
    return SampleFile(str(p), header, completions, prefix)


def write_samples(path: str | Path, header: Header, records: Iterable[Completion | PrefixProbs]) -> Path:
    """Write `header` and `records` to `path` as JSON Lines (strict JSON: no NaN); returns the path."""
    if not isinstance(header, Header):
        raise ValueError(f"header must be a samples.Header, got {type(header).__name__}")
    p = Path(path)
    with p.open("w", encoding="utf-8") as handle:
        for record in [header, *records]:
            if not isinstance(record, (Header, Completion, PrefixProbs)):
                raise ValueError(f"records must be Completion or PrefixProbs, got {type(record).__name__}")
            handle.write(json.dumps(record.to_dict(), allow_nan=False, separators=(",", ":")) + "\n")
    return p


# --- Append and resume (the collector's side) -------------------------------------------------------------

#: Header fields that define the sample: a file may only be resumed by a run that agrees on all of them
#: (a different chain, prompt set or engine configuration would mix two laws in one file).
DESIGN_FIELDS = ("role", "model", "request_defaults", "prompts")
ENGINE_DESIGN_FIELDS = ("name", "version", "flags", "speculation")  # version: the engine's build


@dataclass
class ResumeState:
    """What an existing file already holds: completion keys (prompt_id, seed, repeat), prefix keys."""

    path: Path
    completed: set[tuple[str, int, int]] = field(default_factory=set)
    prefixes: set[tuple[str, tuple[int, ...]]] = field(default_factory=set)
    discarded_partial_line: bool = False


def _line(record: Header | Completion | PrefixProbs | dict) -> str:
    data = record if isinstance(record, dict) else record.to_dict()
    return json.dumps(data, allow_nan=False, separators=(",", ":")) + "\n"


def append_records(path: str | Path, records: Iterable[Completion | PrefixProbs]) -> None:
    """Append `records` to the sample file at `path`, one whole line per write, flushed."""
    with Path(path).open("a", encoding="utf-8") as handle:
        for record in records:
            if not isinstance(record, (Completion, PrefixProbs)):
                raise ValueError(f"records must be Completion or PrefixProbs, got {type(record).__name__}")
            handle.write(_line(record))
            handle.flush()


def discard_partial_line(path: str | Path) -> bool:
    """Cut a half-written last line (no final newline, from an interrupted run); True if one was cut."""
    p = Path(path)
    data = p.read_bytes()
    if not data or data.endswith(b"\n"):
        return False
    with p.open("r+b") as handle:
        handle.truncate(data.rfind(b"\n") + 1)
    return True


def _design(header: Header) -> dict:
    """The header's design fields, normalised through JSON so a read-back header compares equal."""
    d = header.to_dict()
    design = {name: d[name] for name in DESIGN_FIELDS}
    design["engine"] = {name: d["engine"].get(name) for name in ENGINE_DESIGN_FIELDS}
    if isinstance(design["engine"]["flags"], list):  # a file written before paths were recorded portably
        design["engine"]["flags"] = portable_args(design["engine"]["flags"])
    return json.loads(json.dumps(design))


def design_differences(old: Header, new: Header) -> list[str]:
    """Names of the design fields in which two headers differ (empty: a file of `old` may be resumed)."""
    a, b = _design(old), _design(new)
    names = [name for name in DESIGN_FIELDS if a[name] != b[name]]
    return names + [f"engine.{name}" for name in ENGINE_DESIGN_FIELDS if a["engine"][name] != b["engine"][name]]


def start_or_resume(path: str | Path, header: Header, extra_header: dict | None = None) -> ResumeState:
    """Open the sample file at `path` for appending: write `header` if it is new or empty, else check that
    its header has the same design (ValueError naming the differing fields) and return what it holds.
    `extra_header` adds optional fields to a new header line (readers ignore unknown fields)."""
    p = Path(path)
    state = ResumeState(path=p)
    if p.exists():
        state.discarded_partial_line = discard_partial_line(p)
    if not p.exists() or p.stat().st_size == 0:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(_line({**header.to_dict(), **(extra_header or {})}), encoding="utf-8")
        return state
    existing = read_samples(p)
    differing = design_differences(existing.header, header)
    if differing:
        raise ValueError(f"{p}: cannot resume: this run differs from the file's header in {', '.join(differing)} "
                         "(use another output file)")
    state.completed = {(c.prompt_id, c.seed, c.repeat) for c in existing.completions}
    state.prefixes = {(r.prompt_id, r.prefix_tokens) for r in existing.prefix_probs}
    return state
