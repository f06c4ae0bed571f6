"""Every synthetic-engine mode's measured mean per-token TV from the target, and the server's request latency.

    python benchmarks/synthetic_deviation_table.py [--n 40000] [--workers 2] [--latency-requests 500]
        [--out benchmarks/results/synthetic_deviation.json]

For every model profile (lm-like, code-like, flat) and every mode of `synthetic_engine.MODES`: the mean per-token TV at
positions 1..16 at T = 0.7, k = 4 (`synthetic_deviation.measure_mode`: estimate, lower and upper bound at 1 - 1e-3
each, the exact floor, per position; on the default prompt, and `by_prompt` on both prompts the kill table certifies), the two truncation bugs with the truncation they need (`PROBES`), the
load-dependent modes under a simulated in-flight count of 2 and also without load. Per profile: the mean entropy
(nats) of the warped target and the acceptance rate 1 - TV(p, q) along plain completions, and the in-process time
per completion. Then the server (its own process, `SyntheticServer`): the median latency of sequential 16-token
``/completion`` requests. Torch-free.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np
from exactspec.conformance.engine.serve import synthetic_deviation as deviation
from exactspec.conformance.engine.serve.synthetic_engine import MODES, NO_LOAD, generate
from exactspec.conformance.engine.serve.synthetic_model import (
    SyntheticModel,
    entropy_nats,
)

REPO = Path(__file__).resolve().parent.parent
PROFILE_NAMES = ("lm-like", "code-like", "flat")
#: The prompts measured: the default one, and the second prompt `synthetic_campaign` certifies (its prompts' modes
#: are the ones the kill table's verdicts must agree with).
SECOND_PROMPT = (7, 8, 9)
LATENCY_MODES = ("plain", "exact", "sampler-match")
OUT = REPO / "benchmarks" / "results" / "synthetic_deviation.json"


def machine() -> dict:
    info = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    try:
        with open("/proc/cpuinfo") as handle:
            info["cpu_model"] = next(
                line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")
            )
    except (OSError, StopIteration):
        pass
    return info


def measure(job: tuple[str, str, bool, int]) -> tuple[str, str, dict]:
    """One (profile, mode) measurement, on the default prompt and on the second one (`by_prompt`); `unloaded`
    measures a load-dependent mode without load."""
    profile, mode, unloaded, n = job
    started = time.perf_counter()
    load = NO_LOAD if unloaded else None
    result = deviation.measure_mode(mode, profile=profile, n=n, load=load).as_dict()
    second = deviation.measure_mode(
        mode, profile=profile, n=n, load=load, prompt=SECOND_PROMPT
    ).as_dict()
    result["by_prompt"] = {
        ",".join(map(str, deviation.DEFAULT_PROMPT)): {
            k: result[k] for k in ("estimate", "lower_bound", "upper_bound")
        },
        ",".join(map(str, SECOND_PROMPT)): {
            k: second[k] for k in ("estimate", "lower_bound", "upper_bound")
        },
    }
    result["seconds"] = round(time.perf_counter() - started, 1)
    return profile, f"{mode} (no load)" if unloaded else mode, result


def profile_facts(profile: str, n: int = 2000) -> dict:
    """Entropy and acceptance along plain completions, and the engine's time per completion (in process)."""
    model, chain = SyntheticModel(profile=profile), deviation.probe_chain("plain")
    prompt = list(deviation.DEFAULT_PROMPT)
    completions = [generate(model, "plain", prompt, 16, chain, seed).tokens for seed in range(n)]
    rows = np.concatenate([model.position_rows(prompt, tokens, chain) for tokens in completions])
    drafts = np.stack(
        [
            model.draft_row(prompt + tokens[:i], chain)
            for tokens in completions
            for i in range(len(tokens))
        ]
    )
    facts = {
        "entropy_nats": round(float(entropy_nats(rows).mean()), 3),
        "acceptance_rate": round(float(np.minimum(rows, drafts).sum(axis=1).mean()), 3),
        "mean_length": round(float(np.mean([len(t) for t in completions])), 2),
        "peaked_states": round(float((model.target_table(chain).max(axis=-1) >= 0.9).mean()), 3),
    }
    for mode in LATENCY_MODES:
        started = time.perf_counter()
        counters = [generate(model, mode, prompt, 16, chain, seed) for seed in range(n)]
        facts[f"engine_ms_per_completion_{mode}"] = round(
            1000 * (time.perf_counter() - started) / n, 3
        )
        if MODES[mode].speculative:
            accepted, drafted = (
                sum(g.draft_n_accepted for g in counters),
                sum(g.draft_n for g in counters),
            )
            facts[f"accepted_per_drafted_{mode}"] = round(accepted / drafted, 3)
    return facts


def server_latency(mode: str, requests: int) -> dict:
    """Median and 90th percentile of sequential 16-token /completion requests (keep-alive), in ms."""
    import httpx
    from exactspec.conformance.engine.collect.client import SamplerChain
    from exactspec.conformance.engine.serve.synthetic_server import SyntheticServer

    body = {
        **SamplerChain(temperature=0.7, max_tokens=16).request(),
        "prompt": list(deviation.DEFAULT_PROMPT),
    }
    with SyntheticServer(mode) as server, httpx.Client(base_url=server.base_url) as client:
        for seed in range(20):
            client.post("/completion", json={**body, "seed": seed}).raise_for_status()
        times, engine = [], []
        for seed in range(requests):
            started = time.perf_counter()
            answer = client.post("/completion", json={**body, "seed": 1000 + seed}).json()
            times.append(1000 * (time.perf_counter() - started))
            engine.append(answer["timings"]["predicted_ms"])
    times.sort()
    return {
        "requests": requests,
        "median_ms": round(statistics.median(times), 3),
        "p90_ms": round(times[int(0.9 * len(times))], 3),
        "engine_median_ms": round(statistics.median(engine), 3),
    }


def print_table(profiles: dict) -> None:
    for profile, data in profiles.items():
        print(
            f"\n{profile}: entropy {data['entropy_nats']} nats, acceptance {data['acceptance_rate']}"
        )
        print(
            f"{'mode':32s} {'exact':>5s} {'estimate':>9s} {'floor':>7s} {'lower':>7s} {'upper':>7s}"
        )
        for mode, row in data["modes"].items():
            exact = "yes" if MODES[mode.split(" ")[0]].exact else "no"
            print(
                f"{mode:32s} {exact:>5s} {row['estimate']:9.4f} {row['exact_floor']:7.4f} {row['lower_bound']:7.4f} "
                f"{row['upper_bound']:7.4f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40_000, help="completions per mode and profile")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--latency-requests", type=int, default=500)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--profiles", nargs="+", default=list(PROFILE_NAMES), choices=PROFILE_NAMES)
    args = parser.parse_args()
    if args.n < 100 or args.workers < 1 or args.latency_requests < 10:
        parser.error("need --n >= 100, --workers >= 1 and --latency-requests >= 10")
    started = time.perf_counter()
    names = tuple(args.profiles)
    jobs = [(profile, mode, False, args.n) for profile in names for mode in MODES]
    jobs += [
        (profile, mode, True, args.n)
        for profile in names
        for mode in MODES
        if MODES[mode].load_dependent
    ]
    with Pool(args.workers) as pool:
        measured = pool.map(measure, jobs, chunksize=1)
        facts = dict(zip(names, pool.map(profile_facts, names)))
    profiles = {profile: {**facts[profile], "modes": {}} for profile in names}
    for profile, name, result in sorted(measured, key=lambda item: (item[0], item[1])):
        profiles[profile]["modes"][name] = {
            "exact": MODES[name.split(" ")[0]].exact,
            "mechanism": (MODES[name.split(" ")[0]].__doc__ or "").strip(),
            **result,
        }
    latency = {mode: server_latency(mode, args.latency_requests) for mode in LATENCY_MODES}
    document = {
        "benchmark": "synthetic_deviation_table",
        "machine": machine(),
        "settings": {
            "n_completions": args.n,
            "positions": "1..16",
            "temperature": 0.7,
            "k": 4,
            "delta_each_bound": 1e-3,
            "probes": deviation.PROBES,
            "prompt": list(deviation.DEFAULT_PROMPT),
            "prompts": [list(deviation.DEFAULT_PROMPT), list(SECOND_PROMPT)],
            "vocab": 256,
            "model_seed": 0,
        },
        "profiles": profiles,
        "server_latency": latency,
        "seconds": round(time.perf_counter() - started, 1),
    }
    print_table(profiles)
    print("\nserver latency (16 tokens, sequential):", json.dumps(latency))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {args.out.relative_to(REPO) if args.out.is_relative_to(REPO) else args.out.name}")


if __name__ == "__main__":
    main()
