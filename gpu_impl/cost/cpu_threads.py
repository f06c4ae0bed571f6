"""How many CPU threads, and which OpenMP wait policy, `exactspec generate` starts with on a busy machine.

A thread that waits for a descheduled peer costs more than the peer gives: spinning threads then slow each
forward many times over, and even passive ones run slower and less evenly than one thread, while idle,
passive waits halve the speed (the figures: benchmarks/README.md#cpu-kernels-threads-and-the-quantized-draft).
So: one thread per core left free, at least one, while other work keeps cores busy, and passive waits while
it keeps all of them busy; torch's defaults otherwise.  Decided before torch loads (OpenMP reads
OMP_WAIT_POLICY once) and never over the user's `--threads` or OMP_WAIT_POLICY.

How busy: the share of CPU time other processes took over a short window (/proc/stat), not the 1-minute
load average, which still counts a run that just ended (ours, say) as other work for a minute.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

WINDOW_S = 0.25  # how long the busy cores are sampled for
IDLE_FIELDS = (3, 4)  # idle, iowait in /proc/stat's cpu line


@dataclass(frozen=True)
class ThreadPlan:
    """threads None: torch's default; wait_policy None: OpenMP's default (spinning); `reason` for the user."""

    threads: int | None = None
    wait_policy: str | None = None
    reason: str = ""


def _cpu_times() -> list[int] | None:
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    return [int(x) for x in fields[1:]] if fields and fields[0] == "cpu" else None


_last_measured: list[
    tuple[float, int]
] = []  # (time.monotonic(), busy cores) of the latest measurement


def busy_cores(cores: int, window_s: float = WINDOW_S) -> int:
    """Cores other processes keep busy: their CPU share over `window_s` seconds (this process sleeps through
    it) times `cores`, rounded; where /proc/stat is missing, the 1-minute load average, rounded down."""
    before = _cpu_times()
    if before is None:
        busy = int(os.getloadavg()[0]) if hasattr(os, "getloadavg") else 0
    else:
        time.sleep(window_s)
        after = _cpu_times() or before
        delta = [b - a for a, b in zip(before, after)]
        total = sum(delta)
        idle = sum(delta[i] for i in IDLE_FIELDS if i < len(delta))
        busy = min(cores, round((1 - idle / total) * cores)) if total > 0 else 0
    _last_measured[:] = [(time.monotonic(), busy)]
    return busy


def recent_busy_cores(cores: int, max_age_s: float = 30.0) -> int:
    """`busy_cores`, or its latest measurement when under `max_age_s` old (the CLI measures at start, the cost
    calibration asks again moments later; a benchmark builds many generators in a row)."""
    if _last_measured and time.monotonic() - _last_measured[0][0] < max_age_s:
        return _last_measured[0][1]
    return busy_cores(cores)


def plan_threads(
    busy: int, cores: int, threads: int | None = None, wait_policy: str | None = None
) -> ThreadPlan:
    """The plan for `busy` of `cores` cores taken by other work; the user's own `threads` / `wait_policy` win."""
    if busy >= cores and wait_policy is None:
        return ThreadPlan(
            threads or 1,
            "PASSIVE",
            f"machine busy ({busy} of {cores} cores): "
            f"{threads or 1} thread(s), waiting passively (OMP_WAIT_POLICY=PASSIVE); "
            "--threads N overrides",
        )
    if 1 <= busy < cores and threads is None and wait_policy is None:
        return ThreadPlan(
            cores - busy,
            None,
            f"{busy} of {cores} cores busy with other work: {cores - busy} "
            "thread(s), one per free core (--threads N overrides)",
        )
    return ThreadPlan(threads, None)


def plan_for_this_machine(threads: int | None = None) -> ThreadPlan:
    """`plan_threads` for the busy cores measured now, the user's --threads and OMP_WAIT_POLICY."""
    cores = os.cpu_count() or 1
    policy = os.environ.get("OMP_WAIT_POLICY")
    if cores == 1 or (threads is not None and policy is not None):
        return ThreadPlan(threads, None)
    return plan_threads(busy_cores(cores), cores, threads, policy)
