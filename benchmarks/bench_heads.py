"""The prediction-heads draft on SmolLM2-135M-Instruct (CPU), beside prompt lookup and the int8 self-draft.

    python benchmarks/bench_heads.py [--max-new-tokens 48] [--repeats 1] [--threads 1]

Needs the heads `exactspec train-heads` saved (it stops with that command otherwise). Writes
benchmarks/results/heads.json (rewritten after every configuration, so a partial run keeps its finished part):
* per prompt family (README's code / summarisation / chat, none of them in the heads' training text) and
  temperature (0, 0.7): each draft's acceptance per position alpha_i (for heads: head i) at fixed k = 3;
* the draft cost c = one draft step / one plain target step (micro-benchmark at batch 1, same process);
* the speedup of the decoding phase (wall minus prefill and the cost policy's one-time calibration) over plain
  decoding, interleaved rep by rep, with fixed k = 3 and with the cost policy (k in 0..6; heads cap it at 3);
* the walltime model E[N] / (c k + v(k+1)) for the measured alpha_i, at this CPU's c and v and at a GPU-like
  c = 0.05, v(k+1) = 1 (exactspec.reference.speedup), with the k that model would pick.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROMPTS, encode_prompt, log, spread, write_result  # noqa: E402

import torch  # noqa: E402

from _speculation import make_draft, summarise_stats  # noqa: E402

from exactspec.reference.speedup import expected_tokens_per_position, optimal_k  # noqa: E402
from exactspec.reference.warping import SamplingParams  # noqa: E402

K = 3
DRAFTS = ("heads", "prompt-lookup", "int8-dynamic")
GPU_LIKE = {"c": 0.05, "v": 1.0}


def decoding_seconds(result: Any) -> float:
    stats = result.stats
    return stats.wall_time_s - stats.prefill_time_s - stats.calibration_time_s


def draft_for(name: str, model: Any, cache: dict, heads_path: str | None = None) -> Any:
    if name != "heads":
        return make_draft(name, model, cache)
    if "heads" not in cache:
        from exactspec.gpu_impl.drafts import HeadsDraft
        from exactspec.gpu_impl.drafts.heads import default_heads_path, load_heads

        cache["heads"] = HeadsDraft(
            model, load_heads(heads_path or default_heads_path(model), model)
        )
    return cache["heads"]


def draft_cost(draft: Any, model: Any, ids: torch.Tensor) -> dict[str, float]:
    """c = one draft step / one plain target step, both at batch 1 after this prompt's prefill."""
    from exactspec.gpu_impl import SpeculativeGenerator

    generator = SpeculativeGenerator(model, draft, k=K, adaptive_k="fixed")
    generator.generate(ids, 1)  # prefill both, leave the caches on this prompt
    target_step = statistics.median(generator.target.time_widths([1], reps=5)[1] for _ in range(3))
    draft_step = statistics.median(draft.step_seconds() for _ in range(3))
    v = generator.target.time_widths([K + 1], reps=5)[K + 1] / target_step
    return {
        "c": draft_step / target_step,
        "v_k_plus_1": v,
        "target_step_s": target_step,
        "draft_step_s": draft_step,
    }


def predictions(alpha: list, c: float, v: float) -> dict[str, Any]:
    """The walltime model for per-position acceptance `alpha` (k = len), at the measured and at a GPU-like cost."""
    rates = [0.0 if a is None else float(a) for a in alpha[:K]]
    e_n = expected_tokens_per_position(rates)
    mean_alpha = statistics.fmean(rates) if rates else 0.0
    best_k, best = optimal_k(min(mean_alpha, 0.999), GPU_LIKE["c"], None, k_max=K)
    return {
        "E_N": e_n,
        "predicted_speedup_here": e_n / (c * K + v),
        "predicted_speedup_gpu_like": e_n / (GPU_LIKE["c"] * K + GPU_LIKE["v"]),
        "gpu_like_optimal_k_at_mean_alpha": best_k,
        "gpu_like_speedup_at_optimal_k": best,
    }


def alpha_only(
    model: Any, ids: torch.Tensor, draft: Any, sampling: SamplingParams, args: argparse.Namespace
) -> dict:
    """This draft at fixed k only (acceptance per position; no timing against plain decoding)."""
    from exactspec.gpu_impl import SpeculativeGenerator

    generator = SpeculativeGenerator(model, draft, k=K, sampling=sampling, adaptive_k="fixed")
    results = [
        generator.generate(ids, args.max_new_tokens, seed=rep) for rep in range(args.repeats)
    ]
    return {
        "fixed": {key: value for key, value in summarise_stats(results).items() if key != "per_run"}
    }


def beside(family: str, temperature: float) -> dict[str, Any]:
    """Prompt lookup's and the int8 self-draft's figures for the same family and T from smollm2_drafts.json (k = 4)."""
    import json

    path = Path(__file__).resolve().parent / "results" / "smollm2_drafts.json"
    for config in json.loads(path.read_text())["configs"]:
        if config["prompt"] == family and config["temperature"] == temperature:
            return {
                name: {
                    "k": d["k"],
                    "alpha": d["alpha"],
                    "alpha_per_position": d["alpha_per_position"],
                    "c_micro": d["c_micro"],
                    "v_micro": d["v_micro"],
                    "speedup_fixed_k": d["speedup_vs_plain"]["median"],
                    "speedup_cost_policy": d["cost_policy"]["speedup_vs_plain"]["median"],
                }
                for name, d in config["drafts"].items()
            }
    return {}


def run_config(
    model: Any, ids: torch.Tensor, draft: Any, sampling: SamplingParams, args: argparse.Namespace
) -> dict:
    """Plain vs this draft at fixed k and with the cost policy, interleaved rep by rep."""
    from exactspec.gpu_impl import SpeculativeGenerator, generate_plain

    generators = {
        policy: SpeculativeGenerator(model, draft, k=K, sampling=sampling, adaptive_k=policy)
        for policy in ("fixed", "cost")
    }
    # the cost policy's one-time calibration, outside the timing
    generators["cost"].generate(ids, 2, seed=99)
    times: dict[str, list[float]] = {"plain": [], "fixed": [], "cost": []}
    results: dict[str, list[Any]] = {"fixed": [], "cost": []}
    for rep in range(args.repeats):
        plain = generate_plain(model, ids, args.max_new_tokens, sampling, seed=rep)
        times["plain"].append(decoding_seconds(plain) / len(plain.sequences[0]))
        for policy, generator in generators.items():
            result = generator.generate(ids, args.max_new_tokens, seed=rep)
            results[policy].append(result)
            times[policy].append(decoding_seconds(result) / len(result.sequences[0]))
    out = {}
    for policy in ("fixed", "cost"):
        ratios = [p / s for p, s in zip(times["plain"], times[policy])]
        out[policy] = {
            "speedup": spread(ratios),
            **{
                key: value
                for key, value in summarise_stats(results[policy]).items()
                if key != "per_run"
            },
        }
    out["plain_seconds_per_token"] = spread(times["plain"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--drafts", nargs="+", default=list(DRAFTS))
    parser.add_argument("--families", nargs="+", default=list(PROMPTS))
    parser.add_argument("--temperatures", nargs="+", type=float, default=[0.0, 0.7])
    parser.add_argument(
        "--heads", default=None, help="heads file (default: the one `exactspec train-heads` saved)"
    )
    parser.add_argument("--out-name", default="heads", help="results file name (default heads)")
    parser.add_argument(
        "--alpha-only",
        action="store_true",
        help="acceptance at fixed k only, no speed runs (for a machine too loaded to time anything)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from exactspec.gpu_impl.models import load_default_model

    model, tokenizer = load_default_model()
    cache: dict = {}
    drafts = {name: draft_for(name, model, cache, args.heads) for name in args.drafts}
    heads_info = getattr(drafts.get("heads"), "heads", None)
    payload: dict[str, Any] = {
        "k": K,
        "max_new_tokens": args.max_new_tokens,
        "repeats": args.repeats,
        "alpha_only": args.alpha_only,
        "load_average_at_start": os.getloadavg(),
        "gpu_like_cost": GPU_LIKE,
        "heads_training": getattr(heads_info, "info", None),
        "costs": {},
        "runs": [],
    }
    start = time.perf_counter()
    first_ids = encode_prompt(tokenizer, PROMPTS["chat"])
    for name, draft in drafts.items():
        payload["costs"][name] = (
            {"c": 0.0, "v_k_plus_1": None}
            if name == "prompt-lookup"
            else draft_cost(draft, model, first_ids)
        )
        log("cost", name, payload["costs"][name])
    for family in args.families:
        ids = encode_prompt(tokenizer, PROMPTS[family])
        for temperature in args.temperatures:
            for name, draft in drafts.items():
                measure = alpha_only if args.alpha_only else run_config
                row = {
                    "family": family,
                    "temperature": temperature,
                    "draft": name,
                    **measure(model, ids, draft, SamplingParams(temperature), args),
                }
                cost = payload["costs"][name]
                v = cost["v_k_plus_1"] or payload["costs"].get("heads", {}).get("v_k_plus_1") or 1.0
                row["model"] = predictions(row["fixed"]["alpha_per_position"], cost["c"], v)
                row["beside_from_smollm2_drafts_json"] = (
                    beside(family, temperature) if name == "heads" else None
                )
                payload["runs"].append(row)
                payload["elapsed_s"] = time.perf_counter() - start
                write_result(args.out_name, payload)
                log(
                    family,
                    temperature,
                    name,
                    "alpha_i",
                    [round(a or 0, 3) for a in row["fixed"]["alpha_per_position"]],
                    *(
                        []
                        if args.alpha_only
                        else [
                            "speedup fixed",
                            round(row["fixed"]["speedup"]["median"], 3),
                            "cost",
                            round(row["cost"]["speedup"]["median"], 3),
                        ]
                    ),
                    "model here / GPU-like",
                    round(row["model"]["predicted_speedup_here"], 3),
                    round(row["model"]["predicted_speedup_gpu_like"], 3),
                )


if __name__ == "__main__":
    main()
