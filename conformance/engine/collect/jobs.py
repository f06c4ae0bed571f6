"""Bounded, resumable request batches for the engine collector: jobs, the run's budget, the load.

A run's loops are bounded twice: by a request count and by a wall-clock deadline (`Budget`), whatever
the engine does; `run_bounded` keeps at most `concurrency` requests in flight and stops at the first
request that still fails after its retries (the output stays resumable). `run_waves` sends the requests of a load
design (`..load.load_segments`): in waves of C that reach the server together (`Wave`), or one at a time, with a
background load joining the loaded waves (`BackgroundLoad`). httpx-free.
"""

from __future__ import annotations

import asyncio
import math
import random
import sys
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Awaitable, Callable, TypeVar

from tqdm import tqdm

from ..load import Segment

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

    def __str__(self) -> str:
        return f"prompt {self.prompt_id!r}, seed {self.seed}" + (" (repeat)" if self.repeat else "")


def _job_in(item: object) -> object:
    """The `Job` inside a batch's item (run_waves' items are (i, (job, index))), else the item itself."""
    if isinstance(item, tuple):
        return next((found for found in map(_job_in, item) if isinstance(found, Job)), item)
    return item


def failure_text(item: object, error: BaseException) -> str:
    """One line for the request that stopped a batch: the error, where it went (an HTTP error's method and URL, when
    its message does not say), then the job."""
    job = _job_in(item)
    text = (str(error).splitlines() or [""])[0] or type(error).__name__
    try:
        # httpx's errors carry the request (RuntimeError when unset)
        request = getattr(error, "request", None)
    except RuntimeError:
        request = None
    url = str(getattr(request, "url", "") or "")
    where = f"{request.method} {url}: " if request is not None and url and url not in text else ""
    return f"{type(error).__name__}: {where}{text} ({job})"


def seed_list(n_seeds: int, seed_start: int) -> list[int]:
    """The seeds every prompt gets at both endpoints: distinct, consecutive from `seed_start`."""
    if n_seeds < 1:
        raise ValueError(f"seeds: {n_seeds} must be >= 1")
    if seed_start < 0 or seed_start + n_seeds > MAX_SEED + 1:
        raise ValueError(
            f"seed_start: seeds {seed_start}..{seed_start + n_seeds - 1} must lie in [0, {MAX_SEED}]"
        )
    return list(range(seed_start, seed_start + n_seeds))


def plan_jobs(prompt_ids: list[str], seeds: list[int], repeat_fraction: float) -> list[Job]:
    """All jobs, seed-major (an early stop leaves every prompt with about as many samples); the first
    ceil(repeat_fraction * len(seeds)) seeds of each prompt are requested a second time (repeat 1)."""
    if not 0.0 <= repeat_fraction <= 1.0:
        raise ValueError(f"repeat_fraction: {repeat_fraction} must lie in [0, 1]")
    jobs = [Job(pid, seed) for seed in seeds for pid in prompt_ids]
    repeated = seeds[: math.ceil(repeat_fraction * len(seeds))]
    return jobs + [Job(pid, seed, repeat=1) for seed in repeated for pid in prompt_ids]


@dataclass
class Outcome:
    """What one batch of requests did: records written, jobs left, and the first failure if any."""

    written: int = 0
    left: int = 0
    failure: str | None = None


async def run_bounded(
    jobs: list[_J],
    send: Callable[[_J], Awaitable[_R]],
    write: Callable[[_R], None],
    budget: Budget,
    concurrency: int,
    description: str,
    expected_errors: tuple[type[BaseException], ...] = (ValueError,),
) -> Outcome:
    """Send `jobs` with at most `concurrency` in flight, writing each result as it arrives; stops at the
    budget's bounds or at the first request that raises one of `expected_errors` (after its retries: the
    rest are not sent, the written records stay). Any other exception propagates: it is a bug."""
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
                outcome.failure = outcome.failure or failure_text(job, error)
                return
            write(record)
            outcome.written, outcome.left = outcome.written + 1, outcome.left - 1
            progress.update()

    tasks = [asyncio.create_task(one(job)) for job in jobs]
    try:
        done, pending = (
            await asyncio.wait(tasks, timeout=budget.remaining_s()) if tasks else (set(), set())
        )
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


#: How long a wave's ready requests wait for its other members at most (one held up elsewhere is then left behind).
WAVE_WAIT_S = 5.0


class Wave:
    """Requests meant to be in flight at the server together. Sending one HTTP request costs a Python client more time
    than a fast engine takes to answer it, so requests sent one after another are served one after another: the
    bytes of each member's request are held (`client`'s network stream) until every member is ready to send them
    (`send`) or gone (`leave`); then every member's write starts at once, back to back in one turn of the event
    loop, with no other work between them."""

    def __init__(self, size: int) -> None:
        self.waiting, self.opened = size, asyncio.Event()
        self.counted: set[asyncio.Task | None] = set()
        self.held: list[list[Any]] = []  # [write, its task once started] per member ready
        self.sent: list[
            Any
        ] = []  # what the members' writes note of each other (`client.WaveStream`)

    def _count(self) -> None:
        task = asyncio.current_task()
        if task not in self.counted:
            self.counted.add(task)
            self.waiting -= 1
            if self.waiting <= 0:
                self._open()

    def _open(self) -> None:
        if not self.opened.is_set():
            self.opened.set()
            for entry in self.held:
                entry[1] = asyncio.ensure_future(entry[0]())

    async def send(self, write: Callable[[], Awaitable[None]]) -> None:
        """This member's held request, `write()`, goes out with the others' once every member is ready (at most
        `WAVE_WAIT_S` after this one), or at once when the wave has gone."""
        if self.opened.is_set():
            return await write()
        entry: list[Any] = [write, None]
        self.held.append(entry)
        self._count()
        if entry[1] is None:
            try:
                await asyncio.wait_for(self.opened.wait(), WAVE_WAIT_S)
            except asyncio.TimeoutError:
                self._open()
        await entry[1]

    def leave(self) -> None:
        """This member sends nothing more in the wave (answered, failed, or never got to send)."""
        self._count()


#: The wave of the task's completion request (set by `run_waves` in each member's task), and the wave the HTTP
#: exchange going on may hold its bytes back for (set by `client.send_with_retries` around a completion's exchange).
WAVE: ContextVar[Wave | None] = ContextVar("exactspec_wave", default=None)
ARMED: ContextVar[Wave | None] = ContextVar("exactspec_armed", default=None)


async def _wave(
    jobs: list[_J], send: Callable[[_J], Awaitable[_R]], extras: list[Callable[[], Awaitable[None]]]
) -> list[Any]:
    """Send `jobs` and `extras` (background requests) together, one `Wave`; each job's result or the exception it
    raised, in order."""
    wave = Wave(len(jobs) + len(extras)) if len(jobs) + len(extras) > 1 else None

    async def member(request: Awaitable[Any]) -> Any:
        WAVE.set(wave)
        try:
            return await request
        finally:
            if wave is not None:
                wave.leave()

    results = await asyncio.gather(
        *(member(send(job)) for job in jobs),
        *(member(extra()) for extra in extras),
        return_exceptions=True,
    )
    return results[: len(jobs)]


async def _run_segment(
    segment: Segment,
    send: Callable[[_J], Awaitable[_R]],
    write: Callable[[_R], None],
    budget: Budget,
    outcome: Outcome,
    expected_errors: tuple[type[BaseException], ...],
    progress: Any,
    background: BackgroundLoad | None,
) -> None:
    """One segment's waves (a loaded one's with the background requests), each written in order once answered;
    stops at the budget or a failing request."""
    for start in range(0, len(segment.jobs), segment.wave):
        batch = []
        for job in segment.jobs[start : start + segment.wave]:
            if not budget.take():
                break
            batch.append(job)
        if not batch:
            return
        extras = (
            background.requests() if background is not None and segment.label == "loaded" else []
        )
        results = await _wave(batch, send, extras)
        for job, result in zip(batch, results):
            if isinstance(result, expected_errors):
                outcome.failure = outcome.failure or failure_text(job, result)
            elif not isinstance(result, BaseException):
                write(result)
                outcome.written, outcome.left = outcome.written + 1, outcome.left - 1
        progress.update(len(batch))
        unexpected = next(
            (
                r
                for r in results
                if isinstance(r, BaseException) and not isinstance(r, expected_errors)
            ),
            None,
        )
        if unexpected is not None:
            raise unexpected  # a bug, not a failing request
        if outcome.failure:
            return


async def run_waves(
    segments: list[Segment],
    send: Callable[[_J], Awaitable[_R]],
    write: Callable[[_R], None],
    budget: Budget,
    description: str,
    expected_errors: tuple[type[BaseException], ...] = (ValueError,),
    background: BackgroundLoad | None = None,
) -> Outcome:
    """Send each segment's jobs in waves of `segment.wave` requests that reach the server together (a loaded
    segment's waves with the `background` requests), writing each wave's results once it is answered. Stops at the
    budget's bounds or at the first request that raises one of `expected_errors` (after its retries)."""
    outcome = Outcome(left=sum(len(segment.jobs) for segment in segments))
    progress = tqdm(total=outcome.left, desc=description, unit="req", file=sys.stderr, disable=None)

    async def drive() -> None:
        for segment in segments:
            if outcome.failure or budget.stop_reason:
                return
            try:
                await _run_segment(
                    segment, send, write, budget, outcome, expected_errors, progress, background
                )
            finally:
                if background is not None:
                    background.flush()

    try:
        await asyncio.wait_for(drive(), timeout=max(budget.remaining_s(), 1e-3))
    except asyncio.TimeoutError:
        budget.stop_reason = budget.stop_reason or "time limit reached"
    finally:
        progress.close()
    return outcome


#: The background load stops after this many failed requests in a row (a server that refuses its sampling, say).
BACKGROUND_FAILURES = 3


@dataclass
class BackgroundLoad:
    """`in_flight` requests sent with every wave of loaded requests (`requests`), reaching the server with them, with
    `chain` (other sampling than the samples'), the prompts and `clients` in turn, seeds drawn apart from the
    design's; none is open during a serial request. `record(intervals, failed)` gets the requests sent since the
    last `flush` (called after each segment). Not budgeted (the waves bound them); their failures do not stop the
    run, but `BACKGROUND_FAILURES` in a row stop the background load."""

    clients: list[Any]
    prompts: dict[str, list[int]]
    chain: Any
    in_flight: int
    record: Callable[[list[tuple[float, float]], int], None]
    seed_space: int
    key: str | None = None
    expected_errors: tuple[type[BaseException], ...] = (ValueError,)
    sent: int = 0
    failed: int = 0
    streak: int = 0
    first_failure: str = ""
    intervals: list[tuple[float, float]] = field(default_factory=list)
    unflushed_failures: int = 0

    def requests(self) -> list[Callable[[], Awaitable[None]]]:
        """The background requests of one wave (none once `BACKGROUND_FAILURES` failed in a row)."""
        if self.streak >= BACKGROUND_FAILURES:
            return []
        self.sent += self.in_flight
        return [
            partial(self._send, number) for number in range(self.sent - self.in_flight, self.sent)
        ]

    async def _send(self, number: int) -> None:
        """Background request `number`; its (sent_at, received_at) as the client measured them (else around it)."""
        ids, client = list(self.prompts), self.clients[number % len(self.clients)]
        seed = random.Random(f"background/{self.key}/{number}").randrange(self.seed_space)
        started = time.time()
        try:
            reply, _ = await client.complete(self.prompts[ids[number % len(ids)]], seed, self.chain)
        except self.expected_errors as error:
            self.intervals.append((started, time.time()))
            self.failed, self.streak, self.unflushed_failures = (
                self.failed + 1,
                self.streak + 1,
                self.unflushed_failures + 1,
            )
            self.first_failure = self.first_failure or f"{type(error).__name__}: {error}"
            return
        self.streak = 0
        measured = reply.sent_at is not None and reply.received_at is not None
        self.intervals.append(
            (reply.sent_at, reply.received_at) if measured else (started, time.time())
        )

    def flush(self) -> None:
        """Record the requests sent since the last flush (one record; nothing when none were)."""
        if self.intervals:
            self.record(sorted(self.intervals), self.unflushed_failures)
        self.intervals, self.unflushed_failures = [], 0
