"""Bounded, resumable request batches for the engine collector: jobs, the run's budget, the prompt file.

A run's loops are bounded twice: by a request count and by a wall-clock deadline (`Budget`), whatever
the engine does; `run_bounded` keeps at most `concurrency` requests in flight and stops at the first
request that still fails after its retries (the output stays resumable). httpx-free.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Callable, TypeVar

_J = TypeVar("_J")  # one job of run_bounded
_R = TypeVar("_R")  # its result


class Budget:
    """The run's bounds, shared by all its requests: a request count and a wall-clock deadline."""

    def __init__(self, max_requests: int, time_limit_s: float) -> None:
        if max_requests < 1:
            raise ValueError(f"max_requests: {max_requests} must be >= 1")
        if not time_limit_s > 0:
            raise ValueError(f"time_limit_s: {time_limit_s} must be > 0")
        self.max_requests, self.used = max_requests, 0
        self.deadline = time.monotonic() + time_limit_s
        self.stop_reason: str | None = None

    def remaining_s(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def take(self) -> bool:
        """Claim one request; False (and the reason recorded) once either bound is reached."""
        if self.used >= self.max_requests:
            self.stop_reason = self.stop_reason or f"request limit ({self.max_requests}) reached"
        elif self.remaining_s() <= 0:
            self.stop_reason = self.stop_reason or "time limit reached"
        if self.stop_reason:
            return False
        self.used += 1
        return True


#: llama.cpp's seeds are uint32 and 2**32 - 1 (= -1) means "random": the largest seed that is a seed.
MAX_SEED = 2**32 - 2


@dataclass(frozen=True)
class Job:
    """One completion request: a prompt, a seed, and 0 or 1 for a determinism re-request."""

    prompt_id: str
    seed: int
    repeat: int = 0


def seed_list(n_seeds: int, seed_start: int) -> list[int]:
    """The seeds every prompt gets at both endpoints: distinct, consecutive from `seed_start`."""
    if n_seeds < 1:
        raise ValueError(f"seeds: {n_seeds} must be >= 1")
    if seed_start < 0 or seed_start + n_seeds > MAX_SEED + 1:
        raise ValueError(f"seed_start: seeds {seed_start}..{seed_start + n_seeds - 1} must lie in [0, {MAX_SEED}]")
    return list(range(seed_start, seed_start + n_seeds))


def plan_jobs(prompt_ids: list[str], seeds: list[int], repeat_fraction: float) -> list[Job]:
    """All jobs, seed-major (an early stop leaves every prompt with about as many samples); the first
    ceil(repeat_fraction * len(seeds)) seeds of each prompt are requested a second time (repeat 1)."""
    if not 0.0 <= repeat_fraction <= 1.0:
        raise ValueError(f"repeat_fraction: {repeat_fraction} must lie in [0, 1]")
    jobs = [Job(pid, seed) for seed in seeds for pid in prompt_ids]
    repeated = seeds[:math.ceil(repeat_fraction * len(seeds))]
    return jobs + [Job(pid, seed, repeat=1) for seed in repeated for pid in prompt_ids]


def _check_messages(messages: object, where: str) -> None:
    ok = isinstance(messages, list) and messages and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in messages)
    if not ok:
        raise ValueError(f"{where}: 'messages' must be a non-empty list of {{\"role\": str, \"content\": str}}")


def check_prompt(entry: object, where: str) -> dict:
    """One prompt entry, validated: {"prompt_id", and exactly one of "prompt_tokens": [ids], "text": str,
    "messages": [{"role", "content"}] (a chat, through the engine's own chat template)}."""
    if not isinstance(entry, dict) or not isinstance(entry.get("prompt_id"), str):
        raise ValueError(f"{where}: expected an object with a string 'prompt_id'")
    tokens, text, messages = entry.get("prompt_tokens"), entry.get("text"), entry.get("messages")
    if tokens is not None and not (isinstance(tokens, list) and tokens and all(
            isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in tokens)):
        raise ValueError(f"{where}: 'prompt_tokens' must be a non-empty list of token ids >= 0")
    if sum(x is not None for x in (tokens, text, messages)) != 1 or (text is not None and not isinstance(text, str)):
        raise ValueError(f"{where}: give exactly one of 'prompt_tokens' (ids), 'text' (a string) and 'messages' "
                         "(a chat)")
    if messages is not None:
        _check_messages(messages, where)
    return {"prompt_id": entry["prompt_id"], "prompt_tokens": tokens, "text": text, "messages": messages}


def check_prompts(entries: list, source: str) -> list[dict]:
    """A validated prompt list: at least one, prompt ids distinct."""
    prompts = [check_prompt(entry, f"{source}: entry {number}") for number, entry in enumerate(entries, start=1)]
    ids = [p["prompt_id"] for p in prompts]
    if not prompts:
        raise ValueError(f"{source}: no prompts")
    if len(set(ids)) != len(ids):
        raise ValueError(f"{source}: prompt_id {next(i for i in ids if ids.count(i) > 1)!r} listed twice")
    return prompts


def read_prompts(path: str | Path) -> list[dict]:
    """Prompts from JSON Lines: {"prompt_id", "prompt_tokens": [int]}, {"prompt_id", "text": str} or {"prompt_id",
    "messages": [...]}. Token ids are sent as they are (llama.cpp adds no BOS to a token prompt: include it if the
    model wants one); text is tokenised by the engine itself, special tokens included, as a string prompt would be;
    messages go through the engine's chat template (with the generation prompt), then its tokenizer."""
    if not Path(path).is_file():
        raise ValueError(f"prompts: no such file {path}")
    entries = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"prompts file {path}: line {number}: not valid JSON: {error}") from None
            entries.append(check_prompt(entry, f"prompts file {path}: line {number}"))
    return check_prompts(entries, f"prompts file {path}")


@dataclass
class Outcome:
    """What one batch of requests did: records written, jobs left, and the first failure if any."""

    written: int = 0
    left: int = 0
    failure: str | None = None


async def run_bounded(jobs: list[_J], send: Callable[[_J], Awaitable[_R]], write: Callable[[_R], None],
                      budget: Budget, concurrency: int, description: str,
                      expected_errors: tuple[type[BaseException], ...] = (ValueError,)) -> Outcome:
    """Send `jobs` with at most `concurrency` in flight, writing each result as it arrives; stops at the
    budget's bounds or at the first request that raises one of `expected_errors` (after its retries: the
    rest are not sent, the written records stay). Any other exception propagates: it is a bug."""
    from tqdm import tqdm

    if concurrency < 1:
        raise ValueError(f"concurrency: {concurrency} must be >= 1")
    outcome, gate = Outcome(left=len(jobs)), asyncio.Semaphore(concurrency)
    progress = tqdm(total=len(jobs), desc=description, unit="req", file=sys.stderr, disable=None)

    async def one(job: _J) -> None:
        async with gate:
            if outcome.failure or not budget.take():
                return
            try:
                record = await send(job)
            except expected_errors as error:
                outcome.failure = outcome.failure or f"{job}: {type(error).__name__}: {error}"
                return
            write(record)
            outcome.written, outcome.left = outcome.written + 1, outcome.left - 1
            progress.update()

    tasks = [asyncio.create_task(one(job)) for job in jobs]
    try:
        done, pending = await asyncio.wait(tasks, timeout=budget.remaining_s()) if tasks else (set(), set())
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        progress.close()
    if pending:
        budget.stop_reason = budget.stop_reason or "time limit reached"
    for task in done:
        task.result()  # an unexpected exception (a bug, not a failing request) is raised here
    return outcome
