"""The verification costs v(n) of the "cost" k policy, measured robustly once and cached per machine.

v(n) = seconds of a target forward scoring n tokens / seconds of one scoring 1 token.  Why robust: on a
shared CPU one forward can take 10x its usual time, so a single timing per width (what this replaced)
could make drafting look hopeless or free.  Each repetition times width 1, every other width in a
rotated order, then width 1 again; v(n) is the median over repetitions of t(n) / (mean of that
repetition's two width-1 times), so slow drifts of the machine cancel, and its noise is the standard
error of that median (from the MAD).  Why cached: the measurement takes seconds idle and tens of
seconds on a busy machine; the result depends only on the machine, torch and its thread count, the
model, dtype, device, CPU kernel plan and batch size, which make the key (as the CPU kernel plan is
cached in `cpu_matmul`).  The run's own timers refine the cached values online (`k_policy`).

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

from ..cache import CALIBRATION_VERSION, cache_root

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


def measure_costs(time_one: Callable[[int], float], widths: list[int], reps: int = 7, min_reps: int = 3,
                  budget_s: float = 20.0, progress: Callable[[str], None] | None = None) -> Costs:
    """v(n) for every width from `time_one(n)` (seconds of one forward of n tokens), interleaved and robust.

    Stops after `min_reps` repetitions once `budget_s` is spent (a very busy machine); `progress` receives
    a line when it starts and one per repetition.
    """
    ratios, ones = measure_ratios(time_one, widths, reps, min_reps, budget_s, progress)
    return fit_costs(ratios, statistics.median(ones))


def measure_ratios(time_one: Callable[[int], float], widths: list[int], reps: int = 7, min_reps: int = 3,
                   budget_s: float = 20.0, progress: Callable[[str], None] | None = None
                   ) -> tuple[dict[int, list[float]], list[float]]:
    """`measure_costs`' raw data: per width n > 1 each repetition's t(n) / (mean of its two width-1 times),
    in order, and every width-1 time."""
    if 1 not in widths:
        raise ValueError(f"widths must include 1, got {widths!r}")
    others = sorted(set(widths) - {1})
    if progress is not None:
        progress(f"calibrating the cost policy: v(n) for n = 1..{max(widths)}, {reps} interleaved repetitions "
                 f"(once per machine, model and thread count; cached)")
    for n in [1, *others]:  # warm-up, dropped
        time_one(n)
    ratios: dict[int, list[float]] = {n: [] for n in others}
    ones: list[float] = []
    start = time.perf_counter()
    for rep in range(reps):
        shift = rep % max(1, len(others))
        order = others[shift:] + others[:shift]
        before = time_one(1)
        seconds = {n: time_one(n) for n in order}
        after = time_one(1)
        ones += [before, after]
        for n, t in seconds.items():
            ratios[n].append(t / ((before + after) / 2))
        spent = time.perf_counter() - start
        if progress is not None:
            progress(f"calibrating the cost policy: {rep + 1}/{reps} repetitions done, {spent:.1f} s")
        if rep + 1 >= min_reps and spent > budget_s:
            break
    return ratios, ones


def fit_costs(ratios: dict[int, list[float]], t1_s: float) -> Costs:
    """Costs from each width's ratios: the robust centre and its error, made non-decreasing in n.

    Scoring more tokens is never cheaper (a noisy v(2) < 1 once pinned the policy to k = 1).  Why a
    least-squares monotone fit and not a running maximum: the maximum of noisy medians ratchets upward,
    so under load every wide forward looked dearer than it was."""
    widths = sorted(ratios)
    centres = [robust_centre([math.log(r) for r in ratios[n]]) for n in widths]
    fitted = non_decreasing([c for c, _ in centres], [1 / e**2 for _, e in centres])
    v = {1: 1.0, **{n: math.exp(max(log_v, 0.0)) for n, log_v in zip(widths, fitted)}}  # clipped at v(1): still the fit
    return Costs(v, 0.0, {1: 0.0, **{n: e for n, (_, e) in zip(widths, centres)}}, t1_s=t1_s)


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
    digest.update((config.to_json_string(use_diff=False) if hasattr(config, "to_json_string") else repr(config)).encode())
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            flat = tensor.detach().reshape(-1)
            digest.update(f"{name}{tuple(tensor.shape)}{tensor.dtype}".encode())
            sample = flat[:: max(1, flat.numel() // 64)][:64].float().cpu()
            digest.update(sample.numpy().tobytes())
    return digest.hexdigest()[:16]


def calibration_key(model: torch.nn.Module, batch: int, plan: dict | None, widths: list[int]) -> dict:
    """What v(n) depends on: machine, torch and threads, model, dtype, device, CPU kernel plan, batch, widths."""
    parameter = next(model.parameters())
    device = parameter.device
    return {
        "version": CALIBRATION_VERSION, "machine": platform.machine(), "cpu": _cpu_name(),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "torch": torch.__version__, "threads": torch.get_num_threads(), "device": device.type,
        "dtype": str(parameter.dtype), "model": model_fingerprint(model), "cpu_matmul_plan": plan,
        "batch": batch, "widths": sorted(widths),
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
        return Costs({int(n): x for n, x in data["v"].items()}, 0.0, data["v_noise"], t1_s=data["t1_s"]), ""
    except (OSError, ValueError, KeyError, TypeError):
        return None, "no readable calibration cached"


def save_costs(key: dict, costs: Costs, busy: int) -> Path:
    """Write the measurement and the busy cores it was taken with atomically: a reader sees the old file or the new."""
    path = calibration_file(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"key": key, "measured": time.strftime("%Y-%m-%dT%H:%M:%S"), "busy_cores": busy, **asdict(costs)}
    temporary = path.with_suffix(f".tmp{id(record)}")
    temporary.write_text(json.dumps(record, indent=1, default=str))
    temporary.replace(path)
    return path


def measure_and_store(model: torch.nn.Module, batch: int, plan: dict | None, widths: list[int],
                      time_one: Callable[[int], float], progress: Callable[[str], None] | None = None,
                      use_cache: bool = True) -> Costs:
    """Measure v(n) for `widths` (`measure_costs`) and, with `use_cache`, replace the cached record."""
    busy = busy_cores_now()  # before measuring: the measurement's own work is not the machine's load
    costs = measure_costs(time_one, widths, progress=progress)
    if use_cache:
        try:
            save_costs(calibration_key(model, batch, plan, widths), costs, busy)
        except OSError:  # a read-only cache costs a re-measurement next time, nothing else
            pass
    return costs


def cached_costs(model: torch.nn.Module, batch: int, plan: dict | None, widths: list[int],
                 time_one: Callable[[int], float], progress: Callable[[str], None] | None = None,
                 use_cache: bool = True) -> tuple[Costs, str]:
    """(v(n) for `widths`, where it came from): "cache", or "measured" with the reason a cached one was not used."""
    costs, why = load_costs(calibration_key(model, batch, plan, widths)) if use_cache else (None, "")
    if costs is not None:
        return costs, "cache"
    costs = measure_and_store(model, batch, plan, widths, time_one, progress, use_cache)
    return costs, f"measured again: {why}" if why.startswith("the cached") else "measured"
