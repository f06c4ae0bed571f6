"""The verification costs v(n) of the "cost" k policy, measured robustly once and cached per machine.

v(n) = seconds of a target forward scoring n tokens / seconds of one scoring 1 token.  Why robust: on a
shared CPU one forward can take 10x its usual time, so a single timing per width (what this replaced)
could make drafting look hopeless or free.  Each repetition times width 1, every other width in a
rotated order, then width 1 again; v(n) is the ratio of each width's undisturbed cost (the median of
its forwards within 15 % of its fastest, `undisturbed_log_seconds`) to width 1's, with the standard
error of the two medians; repetitions go on while a width may not yet have run undisturbed.  Why
cached: the measurement takes seconds idle and tens of seconds on a busy machine; the result depends
only on the machine, torch and its thread count, the model, dtype, device, CPU kernel plan and batch
size, which make the key (as the CPU kernel plan is cached in `cpu_matmul`).  The run's own timers
refine the cached values online (`k_policy`).  Measured figures: benchmarks/README.md#cost-calibration-constants
and the cost policy section before it.

Three guards against a calibration that no longer describes the machine: v(n) is made non-decreasing in
n by a least-squares monotone fit (`fit_costs`); each record
keeps how many cores other work kept busy when it was taken, and a run that finds another number busy
measures again (a calibration taken under load once made a later idle run pick k = 1); and a run whose
own timers contradict the record (`k_policy.CostModelK.calibration_disagrees`) sets it aside and
measures it again once done (`measure_and_store`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch

from ...cache import CALIBRATION_VERSION, cache_root

from .cpu_matmul import _cpu_name
from .cpu_threads import recent_busy_cores
from .k_policy import Costs, robust_centre


def non_decreasing(values: list[float], weights: list[float]) -> list[float]:
    """The weighted least-squares non-decreasing fit of `values` (pool adjacent violators)."""
    blocks: list[tuple[float, float, int]] = []  # (mean, weight, count)
    for value, weight in zip(values, weights):
        blocks.append((value, weight, 1))
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m2, w2, c2), (m1, w1, c1) = blocks.pop(), blocks.pop()
            blocks.append(((m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, c1 + c2))
    return [mean for mean, _, count in blocks for _ in range(count)]


#: A forward within this factor of its width's fastest ran undisturbed (`undisturbed_log_seconds`).
UNDISTURBED = 1.15
#: Repetitions continue past `reps` (up to `max_reps`, within the budget) while the largest standard error is
#: above this (benchmarks/README.md#cost-calibration-constants).
TARGET_NOISE = 0.04
#: ... or while some width may not yet have run undisturbed once: widths x (share of disturbed forwards) **
#: (forwards per width) above this (benchmarks/README.md#cost-calibration-constants).
MISSED_UNDISTURBED = 0.002


def measure_costs(
    time_one: Callable[[int], float],
    widths: list[int],
    reps: int = 7,
    max_reps: int = 21,
    min_reps: int = 3,
    budget_s: float = 20.0,
    progress: Callable[[str], None] | None = None,
) -> Costs:
    """v(n) for every width from `time_one(n)` (seconds of one forward of n tokens), interleaved and robust.

    `reps` repetitions, then more (up to `max_reps`) while the estimate is noisier than TARGET_NOISE or a
    width may not yet have run undisturbed (`_settled`); stops after `min_reps` once `budget_s` is spent (a
    very busy machine); `progress` receives a line when it starts and one per repetition.
    """
    repetitions = measure_times(time_one, widths, reps, max_reps, min_reps, budget_s, progress)
    return fit_costs(repetitions)


def measure_times(
    time_one: Callable[[int], float],
    widths: list[int],
    reps: int = 7,
    max_reps: int = 21,
    min_reps: int = 3,
    budget_s: float = 20.0,
    progress: Callable[[str], None] | None = None,
) -> list[dict[int, list[float]]]:
    """`measure_costs`' raw data: per repetition, the seconds of each width (width 1 twice: first and last)."""
    if 1 not in widths:
        raise ValueError(f"widths must include 1, got {widths!r}")
    others = sorted(set(widths) - {1})
    if progress is not None:
        progress(
            f"calibrating the cost policy: v(n) for n = 1..{max(widths)}, {reps} interleaved repetitions "
            f"(up to {max(reps, max_reps)} on a busy machine; once per machine, model and thread count; cached)"
        )
    for n in [1, *others]:  # warm-up, dropped
        time_one(n)
    repetitions: list[dict[int, list[float]]] = []
    start = time.perf_counter()
    for rep in range(max(reps, max_reps)):
        shift = rep % max(1, len(others))
        before = time_one(1)
        seconds = {n: [time_one(n)] for n in others[shift:] + others[:shift]}
        repetitions.append({1: [before, time_one(1)], **seconds})
        spent = time.perf_counter() - start
        if progress is not None:
            progress(f"calibrating the cost policy: repetition {rep + 1} done, {spent:.1f} s")
        if rep + 1 >= min_reps and spent > budget_s:
            break
        if rep + 1 >= reps and _settled(repetitions):
            break
    return repetitions


def _settled(repetitions: list[dict[int, list[float]]]) -> bool:
    """Is the estimate within TARGET_NOISE, with every width likely to have run undisturbed at least once?"""
    pooled = _pooled(repetitions)
    disturbed = [s > min(seconds) * UNDISTURBED for seconds in pooled.values() for s in seconds]
    share = sum(disturbed) / len(disturbed)
    noise = max(fit_costs(repetitions).v_noise.values())
    return noise <= TARGET_NOISE and len(pooled) * share ** len(repetitions) <= MISSED_UNDISTURBED


def undisturbed_log_seconds(seconds: list[float]) -> tuple[float, float]:
    """(log of the median of the forwards within UNDISTURBED of the fastest, its standard error): what the
    width costs when it runs.

    Why not the median of all: on a CPU shared with other processes a forward either runs undisturbed or is
    descheduled for about as long again (both cores busy: ~75 % of forwards here); the median then lands in
    either mode, and four calibrations in a row ran v(9) from 1.36 to 1.85.  Time-slicing delays forwards
    timed back to back about in proportion, so the undisturbed ratio is also their ratio of mean seconds
    (benchmarks/bench_calibration_spread.py measures both: 1.35-1.45 against 1.44 for v(9))."""
    fastest = min(seconds)
    return robust_centre([math.log(s) for s in seconds if s <= fastest * UNDISTURBED])


def _pooled(repetitions: list[dict[int, list[float]]]) -> dict[int, list[float]]:
    """Every width's seconds over all `repetitions`."""
    pooled: dict[int, list[float]] = {}
    for repetition in repetitions:
        for n, seconds in repetition.items():
            pooled.setdefault(n, []).extend(seconds)
    return pooled


def fit_costs(repetitions: list[dict[int, list[float]]]) -> Costs:
    """Costs from the timings: each width's undisturbed cost over width 1's, made non-decreasing in n.

    The standard error combines the two undisturbed medians' (their spread; that every width ran undisturbed
    at least once is `measure_times`' stopping rule).  Scoring more tokens is never cheaper (a noisy v(2) < 1
    once pinned the policy to k = 1).  Why a weighted least-squares monotone fit and not a running maximum:
    the maximum of noisy estimates ratchets upward, so under load every wide forward looked dearer than it was."""
    pooled = _pooled(repetitions)
    one, one_error = undisturbed_log_seconds(pooled.pop(1))
    widths = sorted(pooled)
    centres = [undisturbed_log_seconds(pooled[n]) for n in widths]
    errors = [math.hypot(error, one_error) for _, error in centres]
    fitted = non_decreasing([centre - one for centre, _ in centres], [1 / e**2 for e in errors])
    # clipped at v(1): still the fit
    v = {
        1: 1.0,
        **{n: math.exp(max(log_v, 0.0)) for n, log_v in zip(widths, fitted)},
    }
    t1_s = statistics.median(t for repetition in repetitions for t in repetition[1])
    return Costs(v, 0.0, {1: 0.0, **dict(zip(widths, errors))}, t1_s=t1_s)


def busy_cores_now() -> int:
    """Cores other processes keep busy now (`cpu_threads`: a 0.25 s sample, or one under 30 s old)."""
    return recent_busy_cores(os.cpu_count() or 1)


def load_changed(recorded: int | None, now: int) -> str:
    """Why a calibration recorded with `recorded` busy cores no longer describes a machine with `now`
    ("" when it still does): v(n) depends on how many cores the forward gets."""
    if recorded is None:
        return "the cached calibration does not say how busy the machine was"
    if recorded != now:
        return f"the cached calibration was taken with {recorded} of {os.cpu_count() or 1} cores busy, now {now}"
    return ""


def model_fingerprint(model: torch.nn.Module) -> str:
    """A short hash of the model's config, parameter shapes and a strided sample of its weights (cheap)."""
    digest = hashlib.sha256()
    config = getattr(model, "config", None)
    digest.update(
        (
            config.to_json_string(use_diff=False)
            if hasattr(config, "to_json_string")
            else repr(config)
        ).encode()
    )
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            flat = tensor.detach().reshape(-1)
            digest.update(f"{name}{tuple(tensor.shape)}{tensor.dtype}".encode())
            sample = flat[:: max(1, flat.numel() // 64)][:64].float().cpu()
            digest.update(sample.numpy().tobytes())
    return digest.hexdigest()[:16]


def calibration_key(
    model: torch.nn.Module, batch: int, plan: dict | None, widths: list[int]
) -> dict:
    """What v(n) depends on: machine, torch and threads, model, dtype, device, CPU kernel plan, batch, widths."""
    parameter = next(model.parameters())
    device = parameter.device
    return {
        "version": CALIBRATION_VERSION,
        "machine": platform.machine(),
        "cpu": _cpu_name(),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "device": device.type,
        "dtype": str(parameter.dtype),
        "model": model_fingerprint(model),
        "cpu_matmul_plan": plan,
        "batch": batch,
        "widths": sorted(widths),
    }


def calibration_file(key: dict) -> Path:
    """cache_root()/calibration/<hash of the key>.json."""
    name = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]
    return cache_root() / "calibration" / f"{name}.json"


def load_costs(key: dict) -> tuple[Costs | None, str]:
    """(the cached measurement for `key`, "") or (None, why not): absent, unreadable, written for another
    key, or taken while another number of cores was busy (`load_changed`)."""
    try:
        data = json.loads(calibration_file(key).read_text())
        if data["key"] != json.loads(json.dumps(key, default=str)):
            return None, "no calibration cached for this key"
        changed = load_changed(data.get("busy_cores"), busy_cores_now())
        if changed:
            return None, changed
        return Costs(
            {int(n): x for n, x in data["v"].items()}, 0.0, data["v_noise"], t1_s=data["t1_s"]
        ), ""
    except (OSError, ValueError, KeyError, TypeError):
        return None, "no readable calibration cached"


def save_costs(key: dict, costs: Costs, busy: int) -> Path:
    """Write the measurement and the busy cores it was taken with atomically: a reader sees the old file or the new."""
    path = calibration_file(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "key": key,
        "measured": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "busy_cores": busy,
        **asdict(costs),
    }
    temporary = path.with_suffix(f".tmp{id(record)}")
    temporary.write_text(json.dumps(record, indent=1, default=str))
    temporary.replace(path)
    return path


def measure_and_store(
    model: torch.nn.Module,
    batch: int,
    plan: dict | None,
    widths: list[int],
    time_one: Callable[[int], float],
    progress: Callable[[str], None] | None = None,
    use_cache: bool = True,
) -> Costs:
    """Measure v(n) for `widths` (`measure_costs`) and, with `use_cache`, replace the cached record."""
    # before measuring: the measurement's own work is not the machine's load
    busy = busy_cores_now()
    costs = measure_costs(time_one, widths, progress=progress)
    if use_cache:
        try:
            save_costs(calibration_key(model, batch, plan, widths), costs, busy)
        except OSError:  # a read-only cache costs a re-measurement next time, nothing else
            pass
    return costs


def cached_costs(
    model: torch.nn.Module,
    batch: int,
    plan: dict | None,
    widths: list[int],
    time_one: Callable[[int], float],
    progress: Callable[[str], None] | None = None,
    use_cache: bool = True,
) -> tuple[Costs, str]:
    """(v(n) for `widths`, where it came from): "cache", or "measured" with the reason a cached one was not used."""
    costs, why = (
        load_costs(calibration_key(model, batch, plan, widths)) if use_cache else (None, "")
    )
    if costs is not None:
        return costs, "cache"
    costs = measure_and_store(model, batch, plan, widths, time_one, progress, use_cache)
    return costs, f"measured again: {why}" if why.startswith("the cached") else "measured"
