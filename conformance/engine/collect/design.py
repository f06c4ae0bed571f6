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

import secrets

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


__all__ = ["BLOCK", "design_record", "new_key", "random_seeds"]
