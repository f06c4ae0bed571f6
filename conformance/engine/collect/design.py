"""The sampling design: which seeds each prompt gets, drawn at random from the engine's seed space.

The coupling certificate (`stat_tests.coupling`) bounds the TV between the two laws by the chance that a seed drawn
*uniformly from the seed space* gives two different outputs, and the law checks read the completions as draws from
the engine's law: so seeds are drawn at random, not counted from 1. `random_seeds(key, space, n)` is the first n
distinct values of a PCG64 stream keyed by `key` (drawn in fixed blocks, so the list for n is a prefix of the list
for any larger n: later rounds extend it). The key is fresh for every new run (`new_key`, from the OS's entropy)
and recorded in both files' headers (`design`), so a run resumes with the same seeds and a reader knows how they
were drawn.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import numpy as np

BLOCK = 1024


def new_key() -> str:
    """A fresh seed key: 128 bits from the operating system's entropy, as hex."""
    return secrets.token_hex(16)


def random_seeds(key: str, space: int, count: int) -> list[int]:
    """The first `count` distinct seeds of the stream keyed by `key`, uniform on [0, space - 1] without replacement."""
    if not (isinstance(count, int) and count >= 0 and isinstance(space, int) and space >= 2):
        raise ValueError(f"count must be >= 0 and space >= 2, got {count!r}, {space!r}")
    if count > space:
        raise ValueError(f"count: {count} distinct seeds do not fit a seed space of {space}")
    try:
        state = int(key, 16)
    except (TypeError, ValueError):
        raise ValueError(f"seed key: {key!r} is not a hex string") from None
    rng = np.random.Generator(np.random.PCG64(state))
    out: list[int] = []
    seen: set[int] = set()
    while len(out) < count:
        for value in rng.integers(0, space, size=BLOCK).tolist():
            if value not in seen:
                seen.add(value)
                out.append(value)
    return out[:count]


def design_record(kind: str, space: int | None, key: str | None, concurrency: int) -> dict:
    """The header's `design`: how the seeds were drawn, and how many candidate requests were in flight."""
    seeds = {"kind": "random", "space": space, "key": key} if kind == "random" else {"kind": "consecutive"}
    return {"seeds": seeds, "concurrency": concurrency}


def resolve_seed_key(out_dir: Path, settings: Any) -> str | None:
    """The run's seed key: the settings', else the one the files being resumed hold, else a fresh one (None for
    consecutive seeds); ValueError when the two files were drawn with different keys."""
    if settings.seeds != "random":
        return None
    keys = set()
    for role in ("reference", "candidate"):
        path = out_dir / f"{role}.jsonl"
        if path.exists() and path.stat().st_size:
            with path.open(encoding="utf-8") as handle:
                first = json.loads(handle.readline() or "{}")
            key = ((first.get("design") or {}).get("seeds") or {}).get("key")
            if key:
                keys.add(key)
    if len(keys) > 1:
        raise ValueError(f"{out_dir}: reference.jsonl and candidate.jsonl were drawn with different seed keys {keys}")
    if settings.seed_key is not None:
        return settings.seed_key
    return keys.pop() if keys else new_key()


__all__ = ["BLOCK", "design_record", "new_key", "random_seeds", "resolve_seed_key"]
