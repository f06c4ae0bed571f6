"""Rule level, quick profile, on exactspec's torch adapter: one process (the way the suite ran before
issue 13) against case-level worker processes. Two adapters: `gpu_impl:TorchCPU` as shipped (it offers
verify_batch) and the same verifier through `verify` only (a per-round adapter, the slow kind).

    python benchmarks/bench_rule_parallel.py [--workers 2] [--repeats 1] [--per-round-cases N]

Writes benchmarks/results/rule_parallel.json: seconds per run (baseline = workers 1, torch's default
threads; candidate = --workers processes, each with its share of the cores) and their ratio, interleaved.
The per-round adapter runs on the first N suite cases only (default 8: a whole quick run would take long).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, spread, write_result  # noqa: E402


class PerRoundTorch:
    """`gpu_impl:TorchCPU` through its per-round `verify` only (no verify_batch)."""

    def __init__(self):
        from exactspec.conformance.adapters.gpu_impl import TorchCPU

        self._inner = TorchCPU()

    def verify(self, target_probs, draft_probs, draft_tokens, rng):
        return self._inner.verify(target_probs, draft_probs, draft_tokens, rng)


def _run(spec: str, workers: int, cases) -> float:
    from exactspec.conformance.harness import load_impl
    from exactspec.conformance.runner import run_suite

    start = time.perf_counter()
    result = run_suite(load_impl(spec), spec, "quick", cases=cases, hypothesis=False, workers=workers, spec=spec)
    seconds = time.perf_counter() - start
    if result.verdict != "CERTIFIED":
        raise RuntimeError(f"{spec}: {result.verdict}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--per-round-cases", type=int, default=8)
    args = parser.parse_args(argv)
    from exactspec.conformance.cases import SUITE_CASES

    subjects = {"TorchCPU (verify_batch)": ("exactspec.conformance.adapters.gpu_impl:TorchCPU", None),
                "TorchCPU per round (verify only)": ("bench_rule_parallel:PerRoundTorch",
                                                     list(SUITE_CASES[: args.per_round_cases]))}
    rows = {}
    for label, (spec, cases) in subjects.items():
        base, cand = [], []
        for _ in range(args.repeats):
            base.append(_run(spec, 1, cases))
            cand.append(_run(spec, args.workers, cases))
        ratios = [b / c for b, c in zip(base, cand)]
        rows[label] = {"spec": spec, "cases": len(cases) if cases else len(SUITE_CASES),
                       "seconds_one_process": spread(base), f"seconds_{args.workers}_workers": spread(cand),
                       "speedup": spread(ratios)}
        print(f"{label}: {rows[label]}", flush=True)
    write_result("rule_parallel", {"machine": machine_info(), "workers": args.workers, "repeats": args.repeats,
                                   "profile": "quick", "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
