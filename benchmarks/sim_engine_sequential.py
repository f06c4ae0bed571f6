"""Delivered rates of the engine level's sequential statistics and coupling certificate, by simulation.

    python benchmarks/sim_engine_sequential.py [--runs 400] [--out benchmarks/results/engine_sequential.json]

Each run draws a synthetic engine (next-token rows over 40 tokens keyed by the prefix, reported as their top 20
and a tail), samples completions of 6 tokens from a candidate law, and looks after every round of the one
command's schedule (32, 128, 384, ... completions) with the engine level's own code (`law_stream`, `law_checks`,
`stat_tests.sequential`, `stat_tests.coupling`), stopping at the first verdict, as `exactspec engine certify` does.
Rates are measured at levels large enough to see (alpha, beta = 0.05), and at the standard profile's for the
completions a verdict takes. Scenarios:

* `exact`: the false-fail rate of each e-process under looks (drift, context, near-zero) <= alpha;
* `at_target_pull` / `at_target_strata`: a candidate whose per-token TV is the target at every position (a pull to
  the argmax; or pull and flatten by confidence stratum): the law route certifies with probability <= beta;
* `residual_context`: the review's residual-from-p with a direction that depends on the context (mean per-token TV
  ~0.14): how often the run rejects, and how many completions it takes;
* `flagrant`: per-token TV ~0.3: completions to rejection;
* `coupling_at_target`: mismatches at rate target / 2 (the largest the route must not certify): certified with
  probability <= beta under looks (k-spending); `coupling_exact`: completions to certify.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks._common import machine_info  # noqa: E402
from exactspec.conformance.engine.law_checks import context_log_e, drift_stream, near_zero_log_e  # noqa: E402
from exactspec.conformance.engine.law_stream import token_stream  # noqa: E402
from exactspec.conformance.engine.samples import Completion, PrefixProbs  # noqa: E402
from exactspec.stat_tests.binomial import clopper_pearson  # noqa: E402
from exactspec.stat_tests.coupling import mismatch_upper_bound  # noqa: E402
from exactspec.stat_tests.sequential import drift_bound, drift_log_e, log_e_process_reject  # noqa: E402

VOCAB, TOP_N, LENGTH, TARGET = 40, 20, 6, 0.05
SCHEDULE = (32, 128, 384, 1152, 3456)


class Engine:
    """Rows keyed by the prefix (a seeded generator per engine), and the candidate's warping of each row."""

    def __init__(self, seed: int, warp: str):
        self.seed, self.warp, self.rows, self.reports = seed, warp, {}, {}

    def row(self, prefix: tuple) -> np.ndarray:
        if prefix not in self.rows:
            rng = np.random.default_rng([self.seed, *prefix, len(prefix)])
            logits = rng.normal(0.0, 2.5, VOCAB)
            p = np.exp(logits - logits.max())
            self.rows[prefix] = p / p.sum()
            top = np.argsort(-self.rows[prefix])[:TOP_N]
            self.reports[prefix] = PrefixProbs("A", prefix, tuple((int(i), float(self.rows[prefix][i])) for i in top),
                                               "post_sampling")
        return self.rows[prefix]

    def candidate_row(self, prefix: tuple) -> np.ndarray:
        p = self.row(prefix)
        if not prefix or self.warp == "exact":
            return p
        top = int(np.argmax(p))
        if self.warp in ("pull", "strata", "flagrant"):
            size = 0.3 if self.warp == "flagrant" else TARGET
            flatten = self.warp == "strata" and p[top] < 0.5  # low-confidence stratum: too flat, else too sharp
            if flatten:
                u = np.full(VOCAB, 1.0 / VOCAB)
                eps = min(1.0, size / max(1e-9, 0.5 * np.abs(u - p).sum()))
                return (1 - eps) * p + eps * u
            eps = min(1.0, size / max(1e-9, 1.0 - p[top]))
            return (1 - eps) * p + eps * np.eye(VOCAB)[top]
        q = p ** (3.0 if hash((self.seed, prefix)) % 2 else 0.3)  # residual from p, direction by context
        q /= q.sum()
        overlap = np.minimum(p, q)
        return overlap + (1 - overlap.sum()) * p

    def sample(self, n: int, rng: np.random.Generator) -> list[Completion]:
        out = []
        for i in range(n):
            tokens: list[int] = []
            for _ in range(LENGTH):
                q = self.candidate_row(tuple(tokens))
                self.row(tuple(tokens))
                tokens.append(int(rng.choice(VOCAB, p=q)))
            out.append(Completion("A", i, tuple(tokens), index=i))
        return out


def _look(engine: Engine, completions: list[Completion], alpha: float, beta: float) -> dict:
    drifted = token_stream("A", completions, engine.reports, 2, LENGTH)
    every = token_stream("A", completions, engine.reports, 1, LENGTH)
    stream = drift_stream(drifted)
    return {"drift": log_e_process_reject(drift_log_e(stream), alpha),
            "context": log_e_process_reject(context_log_e(every)[0], alpha),
            "near_zero": log_e_process_reject(near_zero_log_e(every)[0], alpha),
            "certify": 2 * drift_bound(stream, beta) <= TARGET}


def law_run(warp: str, seed: int, alpha: float, beta: float) -> dict:
    """One run: looks on the schedule until a rejection or a certification; what happened, and when."""
    engine, rng = Engine(seed, warp), np.random.default_rng(seed + 10**6)
    completions: list[Completion] = []
    rejected = {"drift": False, "context": False, "near_zero": False}
    for n in SCHEDULE:
        completions += engine.sample(n - len(completions), rng)
        look = _look(engine, completions, alpha, beta)
        for key in rejected:
            rejected[key] |= look[key]
        if any(rejected.values()):
            return {"rejected": True, "certified": False, "completions": n, **{f"by_{k}": v for k, v in rejected.items()}}
        if look["certify"]:
            return {"rejected": False, "certified": True, "completions": n}
    return {"rejected": False, "certified": False, "completions": SCHEDULE[-1]}


def coupling_run(pi: float, seed: int, beta: float, space: int = 2**32 - 1) -> dict:
    rng = np.random.default_rng(seed)
    mismatches, seen = 0, 0
    for n in (32, 128, 320, 640, 1280, 2560):
        mismatches += int(rng.binomial(n - seen, pi))
        seen = n
        if 2 * mismatch_upper_bound(mismatches, n, beta, space) <= TARGET:
            return {"certified": True, "completions": n, "mismatches": mismatches}
    return {"certified": False, "completions": seen, "mismatches": mismatches}


def _summary(results: list[dict], key: str) -> dict:
    k, n = sum(bool(r.get(key)) for r in results), len(results)
    low, high = clopper_pearson(k, n, 0.95)
    done = [r["completions"] for r in results if r.get(key)]
    return {"rate": k / n, "count": k, "runs": n, "ci95": [low, high],
            "median_completions": float(np.median(done)) if done else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/engine_sequential.json"))
    args = parser.parse_args(argv)
    started, alpha, beta = time.perf_counter(), 0.05, 0.05
    scenarios: dict = {}
    exact = [law_run("exact", s, alpha, beta) for s in range(args.runs)]
    scenarios["exact"] = {"alpha": alpha, "false_fail": _summary(exact, "rejected"),
                          "by_check": {k: _summary(exact, f"by_{k}") for k in ("drift", "context", "near_zero")
                                       if any(f"by_{k}" in r for r in exact)},
                          "certified": _summary(exact, "certified")}
    for name, warp in (("at_target_pull", "pull"), ("at_target_strata", "strata")):
        runs = [law_run(warp, 10**4 + s, 1e-9, beta) for s in range(args.runs)]  # rejection off: only certification
        scenarios[name] = {"beta": beta, "false_pass": _summary(runs, "certified")}
    for name, warp in (("residual_context", "residual"), ("flagrant", "flagrant")):
        runs = [law_run(warp, 2 * 10**4 + s, 1e-4 / 8, 1e-3) for s in range(max(50, args.runs // 4))]
        scenarios[name] = {"alpha": 1e-4 / 8, "rejected": _summary(runs, "rejected"),
                           "certified": _summary(runs, "certified")}
    standard = [law_run("exact", 3 * 10**4 + s, 1e-4 / 8, 1e-3) for s in range(max(50, args.runs // 4))]
    scenarios["exact_standard"] = {"alpha": 1e-4 / 8, "beta": 1e-3, "certified": _summary(standard, "certified"),
                                   "rejected": _summary(standard, "rejected")}
    coupled = [coupling_run(TARGET / 2, s, beta) for s in range(20 * args.runs)]
    scenarios["coupling_at_target"] = {"beta": beta, "pi": TARGET / 2, "false_pass": _summary(coupled, "certified")}
    exact_coupled = [coupling_run(0.0, s, 1e-3) for s in range(10)]
    scenarios["coupling_exact"] = {"beta": 1e-3, "certified": _summary(exact_coupled, "certified")}
    doc = {"benchmark": "sim_engine_sequential", "machine": machine_info(), "runs": args.runs, "target": TARGET,
           "schedule": list(SCHEDULE), "seconds": round(time.perf_counter() - started, 1), "scenarios": scenarios,
           "checks": {"false_fail_within_alpha": scenarios["exact"]["false_fail"]["ci95"][0] <= alpha,
                      "law_false_pass_within_beta": all(scenarios[s]["false_pass"]["ci95"][0] <= beta
                                                        for s in ("at_target_pull", "at_target_strata")),
                      "coupling_false_pass_within_beta": scenarios["coupling_at_target"]["false_pass"]["ci95"][0]
                      <= beta,
                      "residual_context_caught": scenarios["residual_context"]["rejected"]["rate"] >= 0.9,
                      "flagrant_in_tens": (scenarios["flagrant"]["rejected"]["median_completions"] or math.inf) <= 128}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({"seconds": doc["seconds"], "checks": doc["checks"],
                      **{k: {kk: vv for kk, vv in v.items() if kk != "by_check"} for k, v in scenarios.items()}},
                     indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
