"""What the CPU kernel plan buys on the default model: one forward of n tokens, per plan, in one process.

    python benchmarks/bench_cpu_kernels.py [--threads 1,2] [--repeats 7]

SmolLM2-135M-Instruct (`load_default_model`, float32) on a 40-token prompt's KV cache: a forward of
n = 1..9 tokens (a plain step, then verifications of 1..8 drafts) and a 64-token prefill, timed with
`CachedModel.time_forward` (the cache is left as it was) under four plans, interleaved repetition by
repetition: "stock" (`F.linear` everywhere), "mm" (the pre-packing plan: the faster of `(W xᵀ)ᵀ` with or
without a padded row up to 4 rows, `F.linear` above), "packed" (oneDNN on weights packed once, every width)
and "auto" (the plan this machine measured and cached, `--cpu-matmul auto`).  Medians in ms, each plan's
v(n) (n tokens over one) and its speed over stock.  Writes benchmarks/results/cpu_kernels.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import log, write_result  # noqa: E402

import torch  # noqa: E402

WIDTHS = list(range(1, 10))
PREFILL = 64
PLANS = {
    "stock": None,
    "mm": {1: "mm_pad", 2: "mm", 3: "mm_pad", 4: "mm", **{n: "linear" for n in range(5, 17)}},
    "packed": {n: "packed" for n in range(1, 17)},
}


def measure(threads: int, repeats: int) -> dict:
    """Median ms of each width per plan at `threads` threads, plans interleaved each repetition."""
    from exactspec.gpu_impl.cost.cpu_matmul import cpu_plan
    from exactspec.gpu_impl.loop.kv import CachedModel
    from exactspec.gpu_impl.models import load_default_model

    torch.set_num_threads(threads)
    model, tokenizer = load_default_model()
    prompt = tokenizer("def fibonacci(n):\n    " * 8, return_tensors="pt").input_ids[:, :40]
    plans = {**PLANS, "auto": cpu_plan("auto")}
    cached = {}
    for name, plan in plans.items():
        cached[name] = CachedModel(model, "stock" if plan is None else "auto")
        cached[
            name
        ].plan = plan  # this plan, whatever the machine's cache says (weights pack on first use)
        cached[name].reset(1)
        cached[name].forward(prompt)
    seconds = {name: {n: [] for n in [*WIDTHS, PREFILL]} for name in plans}
    for _ in range(repeats + 1):  # the first pass warms up and is dropped below
        for name, model_cache in cached.items():
            for n in [*WIDTHS, PREFILL]:
                seconds[name][n].append(model_cache.time_forward(n))
    out = {"plans": {name: plan for name, plan in plans.items()}}
    for name in plans:
        ms = {n: 1e3 * statistics.median(times[1:]) for n, times in seconds[name].items()}
        out[name] = {"ms": ms, "v": {n: ms[n] / ms[1] for n in WIDTHS}}
    for name in plans:
        out[name]["speed_over_stock"] = {
            n: out["stock"]["ms"][n] / out[name]["ms"][n] for n in [*WIDTHS, PREFILL]
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    results = {}
    for threads in [int(t) for t in args.threads.split(",")]:
        results[threads] = measure(threads, args.repeats)
        for name in results[threads]["plans"]:
            row = results[threads][name]
            log(
                f"{threads} threads, {name}: "
                + ", ".join(f"{n}: {row['ms'][n]:.1f}" for n in [*WIDTHS, PREFILL])
                + f" ms; v(9) = {row['v'][9]:.2f}"
            )
    path = write_result(
        "cpu_kernels",
        {
            "setup": {"widths": WIDTHS, "prefill": PREFILL, "repeats": args.repeats},
            "threads": results,
        },
    )
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
