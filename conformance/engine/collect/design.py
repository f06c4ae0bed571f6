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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .jobs import seed_list

BLOCK = 1024
SEED_KINDS = ("random", "consecutive")


@dataclass(frozen=True)
class SeedDesign:
    """Which seeds each prompt gets: drawn at random from the dialect's seed space by `key` (None: the key of the
    files being resumed, else a fresh one), or `start`, `start` + 1, ...; `count` per prompt (`engine collect
    --seeds`; `engine certify` grows the counts in rounds); with `shared` K only the first K are asked of both ends;
    `repeat_fraction` of them are asked twice (a determinism check)."""

    kind: str = "random"
    key: str | None = None
    count: int = 200
    start: int = 1
    shared: int | None = None
    repeat_fraction: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in SEED_KINDS:
            raise ValueError(f"seeds: {self.kind!r} must be one of {SEED_KINDS}")
        if isinstance(self.count, bool) or not (isinstance(self.count, int) and self.count >= 1):
            raise ValueError(f"--seeds: must be an integer >= 1 (got {self.count!r})")
        if not 0.0 <= self.repeat_fraction <= 1.0:
            raise ValueError(
                f"--repeat-fraction: must lie in [0, 1] (got {self.repeat_fraction:g})"
            )


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
    seeds = (
        {"kind": "random", "space": space, "key": key}
        if kind == "random"
        else {"kind": "consecutive"}
    )
    return {"seeds": seeds, "concurrency": concurrency}


def role_seeds(
    role: str, seeds: SeedDesign, space: int, key: str | None, count: int | None = None
) -> list[int]:
    """The seeds one end is asked for (`count`: this many, default `seeds.count`). With `seeds.shared` K only the
    first K are asked of both ends; the candidate's others follow after the reference's, so the two are disjoint."""
    n = seeds.count if count is None else count
    shared = seeds.shared
    total = n if shared is None or role == "reference" else n + max(0, n - shared)

    def draw(m: int) -> list[int]:
        return (
            random_seeds(str(key), space, m)
            if seeds.kind == "random"
            else seed_list(m, seeds.start)
        )

    if shared is None or role == "reference":
        return draw(n)
    if isinstance(shared, bool) or not isinstance(shared, int) or not 0 <= shared <= n:
        raise ValueError(f"--shared-seeds: {shared!r} must be an integer in [0, {n}]")
    drawn = draw(total)
    return drawn[:shared] + drawn[n:total]


def resolve_seed_key(out_dir: Path, seeds: SeedDesign) -> str | None:
    """The run's seed key: the design's, else the one the files being resumed hold, else a fresh one (None for
    consecutive seeds); ValueError when the two files were drawn with different keys."""
    if seeds.kind != "random":
        return None
    keys = set()
    for role in ("reference", "candidate"):
        path = out_dir / f"{role}.jsonl"
        if path.exists() and path.stat().st_size:
            with path.open(encoding="utf-8") as handle:
                try:
                    first = json.loads(handle.readline() or "{}")
                except ValueError as error:
                    raise ValueError(
                        f"{path}: line 1: not a sample file's header ({error})"
                    ) from None
            if not isinstance(first, dict):
                raise ValueError(f"{path}: line 1: not a sample file's header (a JSON object)")
            key = ((first.get("design") or {}).get("seeds") or {}).get("key")
            if key:
                keys.add(key)
    if len(keys) > 1:
        raise ValueError(
            f"{out_dir}: reference.jsonl and candidate.jsonl were drawn with different seed keys {keys}"
        )
    if seeds.key is not None:
        return seeds.key
    return keys.pop() if keys else new_key()


__all__ = [
    "BLOCK",
    "SEED_KINDS",
    "SeedDesign",
    "design_record",
    "new_key",
    "random_seeds",
    "resolve_seed_key",
    "role_seeds",
]
