"""The cost policy against fixed k over many sampled texts: at T > 0 each seed is another text, and 5 seeds
(`bench_cost_policy.py`'s repetitions) can favour one k by what those 5 texts happen to copy.

    python benchmarks/bench_policy_seeds.py [--family code] [--temperature 0.7] [--seeds 16] [--first-seed 100] [--ks 2,4] [--out NAME]

SmolLM2-135M-Instruct, prompt-lookup draft, 64 new tokens (EOS honoured), the chat template.  For each seed
(one run each, contenders in a fixed order): plain decoding, the cost policy and each fixed k; speedup =
tokens/s over the same seed's plain run (calibration excluded); mean and median over seeds with the tokens
per target call.  Writes benchmarks/results/policy_seeds_<family>.json (or <NAME>.json with --out: use it for
smoke runs, so that the stored results stay).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROMPTS, encode_prompt, log, spread, write_result  # noqa: E402
from _speculation import lookup_run, run_seconds  # noqa: E402

from exactspec.reference.warping import SamplingParams  # noqa: E402


def run(
    model: Any, ids: Any, sampling: SamplingParams, name: str, seed: int, eos: Any
) -> tuple[float, float]:
    """(tokens/s, tokens per target call) of one contender: "plain", "cost" or "k<N>"."""
    result = lookup_run(model, ids, 64, sampling, name, seed, eos)
    return len(result.sequences[0]) / run_seconds(result), result.stats.tokens_per_target_call


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="code", choices=list(PROMPTS))
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--first-seed", type=int, default=100)
    parser.add_argument("--ks", default="2,4")
    parser.add_argument(
        "--out", default=None, help="results file name (default policy_seeds_<family>)"
    )
    args = parser.parse_args(argv)
    from exactspec.gpu_impl.models import load_default_model

    model, tokenizer = load_default_model()
    ids, sampling = (
        encode_prompt(tokenizer, PROMPTS[args.family]),
        SamplingParams(temperature=args.temperature),
    )
    names = ["plain", "cost", *(f"k{k}" for k in args.ks.split(","))]
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for name in names:
            figures[name].append(run(model, ids, sampling, name, seed, tokenizer.eos_token_id))
    plain = [rate for rate, _ in figures["plain"]]
    summary = {
        name: {
            "speedup": spread([rate / p for (rate, _), p in zip(values, plain)]),
            "speedup_mean": statistics.mean(rate / p for (rate, _), p in zip(values, plain)),
            "tokens_per_target_call_mean": statistics.mean(t for _, t in values),
        }
        for name, values in figures.items()
        if name != "plain"
    }
    write_result(
        args.out or f"policy_seeds_{args.family}", {"args": vars(args), "contenders": summary}
    )
    log(
        {
            name: (round(s["speedup_mean"], 3), round(s["speedup"]["median"], 3))
            for name, s in summary.items()
        }
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
