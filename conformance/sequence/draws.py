"""How the sequence suite draws its samples from an adapter: one `generate` call per sample, or rows of
`generate_batch` calls.

A case needs 10^2-10^5 sequences, so where the adapter offers `generate_batch` each call draws
`rows_per_call` samples at once (`SequenceSettings.rows_for(case.level)`, `run.rows_per_call`; the quick
profile draws its PIT cases one `generate(prompt, seed)` call per sample, seed `base + i`, so the batch-1
path's law is certified there too): the same prompt repeated `rows_per_call` times (a multi-prompt case:
its prompts repeated), seed `base + j * rows_per_call` for call j (seeds of consecutive calls are spaced by
the batch size, so an implementation that gives row r the stream of seed + r draws every sample from its
own seed, the same seeds a batch-1 run would use). Exactness then requires every row to follow the law *and*
the rows of one call to be independent (a batch that shares one stream position across rows, or mixes rows
up, is a defect and shows as a failed law: duplicated samples inflate every count). Adapters without
`generate_batch` are called once per sample at every profile.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..loader import call_implementation
from ...errors import Unsupported


def batched(adapter: Any, rows_per_call: int) -> bool:
    """True when the samples come as rows of generate_batch calls (rows_per_call > 1 and the adapter offers it)."""
    return rows_per_call > 1 and callable(getattr(adapter, "generate_batch", None))


def rows_used(adapter: Any, rows_per_call: int) -> int:
    """Samples each call gives: rows_per_call when batched, else 1."""
    return rows_per_call if batched(adapter, rows_per_call) else 1


def _as_ids(out: Sequence[Any]) -> list[int]:
    return [int(t) for t in out]


def draw(run: Any, prompt: Sequence[int], k: int, n: int) -> tuple[list[list[int]], list[int]]:
    """n samples of the case from `prompt`, and the seed of the call each came from (a batched call's rows share it)."""
    case, rows = run.case, run.rows_per_call
    if not batched(run.adapter, rows):
        seeds = [run.base + i for i in range(n)]
        return [run.generate(prompt, k, seed) for seed in seeds], seeds
    samples, seeds = [], []
    for j in range(-(-n // rows)):
        take = min(rows, n - j * rows)
        out = call_implementation(
            run.adapter.generate_batch,
            run.target,
            run.draft,
            [list(prompt)] * take,
            case.max_new_tokens,
            k,
            case.sampling,
            run.base + j * rows,
        )
        if len(out) != take:
            raise ValueError(f"generate_batch returned {len(out)} rows for {take} prompts")
        samples += [_as_ids(o) for o in out]
        seeds += [run.base + j * rows] * take
    return samples, seeds


def draw_rows(run: Any, n: int) -> tuple[list[list[list[int]]], list[int]]:
    """n samples per batch row of the case (rows[b][i]) and the seed of the call each came from. A one-row case
    goes through `draw`; a multi-row case calls generate_batch with the case's different prompts, repeated
    rows_per_call // batch times per call when batched (copy r of prompt b is row r * batch + b; seeds spaced
    by the call's size), else once per call with seed base + i."""
    case = run.case
    if case.batch == 1:
        samples, seeds = draw(run, run.prompts[0], case.k, n)
        return [samples], seeds
    if not callable(getattr(run.adapter, "generate_batch", None)):
        raise Unsupported("adapter offers no generate_batch")
    prompts = [list(p) for p in run.prompts[: case.batch]]
    copies = max(1, rows_used(run.adapter, run.rows_per_call) // case.batch)
    rows: list[list[list[int]]] = [[] for _ in prompts]
    seeds = []
    for j in range(-(-n // copies)):
        take = min(copies, n - j * copies)
        seed = run.base + j * copies * case.batch if copies > 1 else run.base + j
        out = call_implementation(
            run.adapter.generate_batch,
            run.target,
            run.draft,
            prompts * take,
            case.max_new_tokens,
            case.k,
            case.sampling,
            seed,
        )
        if len(out) != take * case.batch:
            raise ValueError(
                f"generate_batch returned {len(out)} rows for {take * case.batch} prompts"
            )
        for i, o in enumerate(out):
            rows[i % case.batch].append(_as_ids(o))
        seeds += [seed] * take
    return rows, seeds
