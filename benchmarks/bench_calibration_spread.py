"""How far apart repeated cost calibrations land, by the current method and by the one it replaced.

    python benchmarks/bench_calibration_spread.py [--loads 0,2] [--calibrations 4]

For each load (busy cores beside it, with the threads the CLI would choose), `--calibrations` calibrations of
v(n), n = 1..9, on SmolLM2 after the summarisation prompt's prefill, one after another.  Each calibration's
timings (7 interleaved repetitions, up to 21 on a busy machine) are fitted twice: as
`gpu_impl.cost.cost_calibration` fits them now (each width's undisturbed forwards) and as it did before
(calibration version 2: the median of per-repetition ratios, made non-decreasing), so both fits see the
same timings.  Reports v(n) per calibration and fit, and per fit the spread of v(9) and v(5) (max / min over
calibrations), and v(n) as the ratio of mean seconds over all of a load's timings (`mean_ratio`: what
forwards timed back to back pay on average).  Writes benchmarks/results/calibration_spread.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROMPTS, encode_prompt, log, write_result  # noqa: E402
from bench_cost_policy import start_load, stop_load  # noqa: E402

from exactspec.gpu_impl.cost.cost_calibration import fit_costs, measure_times, non_decreasing  # noqa: E402
from exactspec.gpu_impl.cost.k_policy import Costs, robust_centre  # noqa: E402


def median_of_ratios_fit(repetitions: list[dict[int, list[float]]]) -> Costs:
    """The replaced fit, as the baseline: per width the robust centre of each repetition's t(n) / (mean of its
    two width-1 times), made non-decreasing by the weighted least-squares fit."""
    widths = sorted(set(repetitions[0]) - {1})
    centres = [
        robust_centre([math.log(r[n][0] / statistics.mean(r[1])) for r in repetitions])
        for n in widths
    ]
    fitted = non_decreasing([c for c, _ in centres], [1 / e**2 for _, e in centres])
    return Costs({1: 1.0, **{n: math.exp(max(x, 0.0)) for n, x in zip(widths, fitted)}}, 0.0, None)


def calibrate_under(load: int, calibrations: int) -> dict:
    """`calibrations` calibrations with `load` busy cores: v(n) by both fits, and their spreads."""
    import torch

    from exactspec.gpu_impl import SpeculativeGenerator
    from exactspec.gpu_impl.drafts import PromptLookupDraft
    from exactspec.gpu_impl.models import load_default_model
    from exactspec.reference.warping import SamplingParams

    threads = int(os.environ.get("EXACTSPEC_BENCH_THREADS", "0"))
    if threads:
        torch.set_num_threads(threads)
    model, tokenizer = load_default_model()[:2]
    ids = encode_prompt(tokenizer, PROMPTS["summarisation"])
    generator = SpeculativeGenerator(
        model,
        PromptLookupDraft(ngram_max=3),
        k=4,
        sampling=SamplingParams(temperature=0.0),
        adaptive_k="fixed",
    )
    generator.generate(ids, 8)  # builds the target wrapper and its CPU kernel plan
    target = generator.target
    target.reset(1)
    target.forward(ids[:, :-1], None, last_only=True)
    fits: dict[str, list[dict]] = {"current": [], "before": []}
    every: list[dict[int, list[float]]] = []
    procs = start_load(load)
    try:
        for _ in range(calibrations):
            repetitions = measure_times(target.time_forward, list(range(1, 10)))
            every += repetitions
            for method, costs in (
                ("current", fit_costs(repetitions)),
                ("before", median_of_ratios_fit(repetitions)),
            ):
                fits[method].append(
                    {
                        "v": {n: round(x, 3) for n, x in costs.v.items()},
                        "repetitions": len(repetitions),
                    }
                )
            log(
                f"load {load}: v(9) now {fits['current'][-1]['v'][9]}, before {fits['before'][-1]['v'][9]}"
            )
    finally:
        stop_load(procs)
    spread = {
        method: {
            f"v{n}_max_over_min": round(
                max(f["v"][n] for f in rows) / min(f["v"][n] for f in rows), 3
            )
            for n in (5, 9)
        }
        for method, rows in fits.items()
    }
    return {
        "load": load,
        "torch_threads": torch.get_num_threads(),
        "calibrations": fits,
        "spread": spread,
        "mean_ratio": mean_ratio(every),
    }


def mean_ratio(repetitions: list[dict[int, list[float]]]) -> dict[int, float]:
    """v(n) as the ratio of mean seconds over every calibration's timings: what forwards timed back to back
    pay on average, the quantity both fits estimate."""
    one = statistics.mean(t for r in repetitions for t in r[1])
    return {n: round(statistics.mean(r[n][0] for r in repetitions) / one, 3) for n in range(2, 10)}


def in_child(load: int, calibrations: int) -> dict:
    """`calibrate_under` in a fresh process with the threads and OpenMP wait policy the CLI would choose with
    `load` cores busy (`plan_threads`; the wait policy only counts when set before torch starts)."""
    from exactspec.gpu_impl.cost.cpu_threads import plan_threads

    env = dict(os.environ)
    plan = plan_threads(load, os.cpu_count() or 1, None, env.get("OMP_WAIT_POLICY"))
    if plan.wait_policy:
        env["OMP_WAIT_POLICY"] = plan.wait_policy
    env["EXACTSPEC_BENCH_THREADS"] = str(plan.threads or 0)
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "row.json"
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                str(load),
                "--calibrations",
                str(calibrations),
                "--child-out",
                str(out),
            ],
            env=env,
            check=True,
        )
        return json.loads(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", default="0,2")
    parser.add_argument("--calibrations", type=int, default=4)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.calibrations < 2:
        parser.error("--calibrations must be at least 2: a spread needs two")
    if args.child is not None:
        Path(args.child_out).write_text(json.dumps(calibrate_under(args.child, args.calibrations)))
        return 0
    rows = [in_child(int(load), args.calibrations) for load in args.loads.split(",")]
    for row in rows:
        log(f"load {row['load']}: spread {row['spread']}")
    path = write_result(
        "calibration_spread",
        {"setup": {"loads": args.loads, "calibrations": args.calibrations}, "loads": rows},
    )
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
