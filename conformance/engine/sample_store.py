"""Appending to and resuming sample files (`samples`): what a collection run needs to be interrupted and rerun.

A record is appended as whole lines, flushed; a half-written last line (an interrupted run) is cut before a run
resumes; a file is resumed only by a run whose header agrees on every design field (`design_differences`), so one
file never mixes two laws, two engine builds or two seed lists. Torch-free and httpx-free.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..paths import portable_args
from .samples import RECORD_TYPES, Header, Record, read_samples

#: Header fields that define the sample: a file may only be resumed by a run that agrees on all of them
#: (a different chain, prompt set or engine configuration would mix two laws in one file).
DESIGN_FIELDS = ("role", "model", "request_defaults", "prompts", "design")
ENGINE_DESIGN_FIELDS = ("name", "version", "flags", "speculation")  # version: the engine's build


@dataclass
class ResumeState:
    """What an existing file already holds: completion keys (prompt_id, seed, repeat), prefix keys."""

    path: Path
    completed: set[tuple[str, int, int]] = field(default_factory=set)
    prefixes: set[tuple[str, tuple[int, ...]]] = field(default_factory=set)
    discarded_partial_line: bool = False


def _line(record: Header | Record | dict) -> str:
    data = record if isinstance(record, dict) else record.to_dict()
    return json.dumps(data, allow_nan=False, separators=(",", ":")) + "\n"


def append_records(path: str | Path, records: Iterable[Record]) -> None:
    """Append `records` to the sample file at `path`, whole lines, flushed once."""
    lines = []
    for record in records:
        if not isinstance(record, RECORD_TYPES):
            raise ValueError(
                "records must be Completion, PrefixProbs, Counters or Background, got "
                f"{type(record).__name__}"
            )
        lines.append(_line(record))
    with Path(path).open("a", encoding="utf-8") as handle:
        handle.write("".join(lines))
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
    engine = {name: d["engine"].get(name) for name in ENGINE_DESIGN_FIELDS}
    if isinstance(engine["flags"], list):  # a file written before paths were recorded portably
        engine["flags"] = portable_args(engine["flags"])
    design = {**{name: d.get(name) for name in DESIGN_FIELDS}, "engine": engine}
    return json.loads(json.dumps(design))


def design_differences(old: Header, new: Header) -> list[str]:
    """Names of the design fields in which two headers differ (empty: a file of `old` may be resumed)."""
    a, b = _design(old), _design(new)
    names = [name for name in DESIGN_FIELDS if a[name] != b[name]]
    return names + [
        f"engine.{name}" for name in ENGINE_DESIGN_FIELDS if a["engine"][name] != b["engine"][name]
    ]


def start_or_resume(
    path: str | Path, header: Header, extra_header: dict | None = None
) -> ResumeState:
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
        raise ValueError(
            f"{p}: cannot resume: this run differs from the file's header in {', '.join(differing)} "
            "(use another output file)"
        )
    state.completed = {(c.prompt_id, c.seed, c.repeat) for c in existing.completions}
    state.prefixes = {(r.prompt_id, r.prefix_tokens) for r in existing.prefix_probs}
    return state
