"""The engine level end to end on synthetic engines: delivered false-fail and false-pass rates under the one
command's looks, and completions to NOT_EXACT (issue 50, item 6).

    nice -n 10 python benchmarks/sim_engine_sequential.py [--runs 200] [--workers 2] [--quick] [--out FILE]

Each run draws a synthetic engine, samples completions at both ends, builds the two `samples.SampleFile` objects in
memory and calls `level.certify_samples` after every round of the one command's schedule (32, 128, 512, 2048
completions per prompt, up to the row's cap), stopping where `exactspec engine certify` stops (`rounds.next_counts`:
CERTIFIED or NOT_EXACT, void reports, the cap; QUALIFIED and INCONCLUSIVE go on). The profile is quick's with rates
large enough to see in a few hundred runs: total false-fail 0.05, false-pass 0.05 (beta / 2 per route), target
per-token TV 0.08.

The engine: V = 1009 tokens (a prime). At each prefix, a hash of (engine, prefix) picks a Zipf law over ranks,
p(r) ~ r^-s, s on a grid of 12 from 1.15 to 2.4 (top-1 mass 0.20-0.72, top-20 mass 0.62-0.99: a few tokens with most
of the mass, a long tail), and an affine permutation mod V from ranks to token ids. Reports are the top 20 (the
tail: the rest), each probability cast to float32 and printed with 6 decimals; a prefix's report is the same
whichever end asks (decode-time and teacher-forced), and every prefix of both ends' completions is teacher-forced.
m = 8 tokens a completion, no end token, 1 prompt, random seeds (space 2^32 - 1, concurrency 4), the reference's
tokens and a non-coupled candidate's drawn by inverse CDF from independent uniforms; candidate seed indices labelled
"serial" one in four (`load.is_serial`, share 0.25, as the HTTP command does) and "loaded" otherwise. A deviating
candidate's row is (1 - lam) p + lam d, lam chosen per s so that its TV from p on the report's categories (top 20 and
the tail) is exactly the size stated (1.05 x the target, "just above" it): a run's realised mean per-token TV is
then known exactly.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks._common import machine_info  # noqa: E402
from exactspec.conformance.core import get_profile  # noqa: E402
from exactspec.conformance.engine.collect.design import random_seeds  # noqa: E402
from exactspec.conformance.engine.collect.rounds import next_counts  # noqa: E402
from exactspec.conformance.engine.engine_level import certify_samples  # noqa: E402
from exactspec.conformance.engine.load import is_serial  # noqa: E402
from exactspec.conformance.engine.samples import Completion, Header, PrefixProbs, SampleFile  # noqa: E402
from exactspec.stat_tests.binomial import clopper_pearson  # noqa: E402

V, TOP_N, M, SPACE = 1009, 20, 8, 2**32 - 1
S_GRID = np.linspace(1.15, 2.4, 12)
SCHEDULE, QUICK_SCHEDULE = (32, 128, 512, 2048), (32, 128)
TARGET, FALSE_FAIL, FALSE_PASS, SERIAL_SHARE = 0.08, 0.05, 0.05, 0.25
AT_TARGET = 1.05 * TARGET  # "just above the target": per-token TV at every deviating prefix
PROMPT = "A"
DEFAULTS = {
    "temperature": 1.0,
    "top_k": 0,
    "top_p": 1.0,
    "min_p": 0.0,
    "max_tokens": M,
    "n_probs": TOP_N,
    "post_sampling_probs": True,
}


def profile():
    """quick, with total false-fail 0.05, false-pass 0.05 and target 0.08."""
    quick = get_profile("quick")
    engine = dataclasses.replace(quick.engine, total_false_fail=FALSE_FAIL, target_tv=TARGET)
    return dataclasses.replace(quick.with_settings(engine=engine), false_pass_rate=FALSE_PASS)


def zipf(s: float) -> np.ndarray:
    p = np.arange(1, V + 1, dtype=np.float64) ** -s
    return p / p.sum()


def tv_cats(q: np.ndarray, p: np.ndarray) -> float:
    """TV on the report's categories: the top 20 ranks one by one, the rest as the tail."""
    return 0.5 * float(np.abs(q[:TOP_N] - p[:TOP_N]).sum() + abs(q[TOP_N:].sum() - p[TOP_N:].sum()))


def _at(d: np.ndarray, p: np.ndarray, size: float) -> np.ndarray:
    """(1 - lam) p + lam d with TV `size` on the categories (lam <= 1 on this grid: asserted)."""
    lam = size / tv_cats(d, p)
    assert lam <= 1.0, (size, tv_cats(d, p))
    return (1.0 - lam) * p + lam * d


def _rows() -> dict[str, list[np.ndarray]]:
    """Per row kind, the law over ranks at each s of the grid."""
    out: dict[str, list[np.ndarray]] = {
        k: [] for k in ("p", "report_hot", "pull", "hot", "cold", "spread", "late_hot", "flagrant")
    }
    for s in S_GRID:
        p, hot, cold = zipf(s), zipf(s / 1.5), zipf(s * 1.5)
        rows = {
            "p": p,
            "report_hot": zipf(s / 1.04),
            "pull": _at(np.eye(V)[0], p, AT_TARGET),
            "hot": _at(hot, p, AT_TARGET),
            "cold": _at(cold, p, AT_TARGET),
            "spread": _at(0.5 * hot + 0.5 * cold, p, AT_TARGET),
            "late_hot": _at(hot, p, 2 * AT_TARGET),
            "flagrant": _at(np.full(V, 1.0 / V), p, 0.3),
        }
        for kind, row in rows.items():
            out[kind].append(row)
    return out


PROFILE = profile()
ROWS = _rows()
CDF = {kind: [np.cumsum(row) for row in rows] for kind, rows in ROWS.items()}
TV = {
    kind: [tv_cats(row, ROWS["p"][i]) for i, row in enumerate(rows)] for kind, rows in ROWS.items()
}
REPORTED = {
    kind: [
        tuple(round(float(np.float32(x)), 6) for x in ROWS[kind][i][:TOP_N])
        for i in range(len(S_GRID))
    ]
    for kind in ("p", "report_hot")
}


def _candidate_kind(family: str, h: int, position: int, load: str) -> str:
    """The candidate's row kind at a prefix (hash `h`) at 1-based `position`, for a completion of load `load`:
    a pull to the argmax; a fair mixture of the law tempered by 1.5 and by 1 / 1.5 (a mean-preserving spread);
    hotter (temperature 1.5) or colder (1 / 1.5) by a bit of the prefix's hash; hotter at positions 5..8 only (TV
    twice the size there); hotter on loaded completions only; towards the uniform law (TV 0.3)."""
    if family in ("monotone_at_target", "flagrant", "spread"):
        return {"monotone_at_target": "pull", "flagrant": "flagrant", "spread": "spread"}[family]
    if family == "context_split":
        return "hot" if (h >> 40) & 1 else "cold"
    if family == "late":
        return "late_hot" if position > M // 2 else "p"
    if family == "load_dependent":
        return "hot" if load == "loaded" else "p"
    return "p"


#: row: (family, seed-coupled, reports, runs as a share of --runs, what is judged, cap of completions per prompt)
SCENARIOS = {
    "exact": ("exact", False, "p", 1.0, "false_fail", 512),
    "exact_common_mode_reports": ("exact", False, "report_hot", 0.5, "false_fail", 512),
    "monotone_at_target": ("monotone_at_target", False, "p", 0.75, "monotone", 512),
    "spread": ("spread", False, "p", 0.375, "shape", 512),
    "context_split": ("context_split", False, "p", 0.375, "shape", 512),
    "late": ("late", False, "p", 0.375, "shape", 2048),
    "spread_to_2048": ("spread", False, "p", 0.05, "power", 2048),
    "context_split_to_2048": ("context_split", False, "p", 0.05, "power", 2048),
    "load_dependent": ("load_dependent", False, "p", 0.1, "power", 2048),
    "coupling_at_target": ("exact", True, "p", 0.75, "coupling", 512),
    "flagrant": ("flagrant", False, "p", 0.1, "power", 2048),
}


class Engine:
    """One synthetic engine pair: the reference's law and reports, the candidate's rows, both ends' tokens."""

    def __init__(self, name: str, seed: int):
        self.family, self.coupled, self.report_kind = SCENARIOS[name][:3]
        self.seed = seed
        self.reports: dict[tuple, PrefixProbs] = {}
        self.rng = np.random.default_rng([seed, 7])

    def key(self, prefix: tuple) -> tuple[int, int, int, int]:
        """(s index, a, b, hash): the prefix's law p(r) ~ r^-S_GRID[s], rank r -> token (a r + b) mod V."""
        h = hash((self.seed, prefix)) & (2**62 - 1)  # ints only: no hash randomisation
        return h % len(S_GRID), 1 + (h >> 8) % (V - 1), (h >> 20) % V, h

    def report(self, prefix: tuple) -> PrefixProbs:
        if prefix not in self.reports:
            s, a, b, _ = self.key(prefix)
            probs = REPORTED[self.report_kind][s]
            self.reports[prefix] = PrefixProbs(
                PROMPT,
                prefix,
                tuple(((a * r + b) % V, probs[r]) for r in range(TOP_N)),
                "post_sampling",
            )
        return self.reports[prefix]

    def _draw(self, kind: str, s: int, u: float) -> int:
        return min(V - 1, int(np.searchsorted(CDF[kind][s], u, side="right")))

    def complete(
        self, u: np.ndarray, kind_of=None, differ: tuple | None = None
    ) -> tuple[tuple, float]:
        """Tokens drawn by inverse CDF from uniforms `u` (kind_of(h, position): the row kind; None: the law);
        `differ` = (position, token): at that position draw from the law conditioned to avoid token. Also the
        summed per-token TV on the categories."""
        tokens: list[int] = []
        tv = 0.0
        for t in range(M):
            prefix = tuple(tokens)
            s, a, b, h = self.key(prefix)
            kind = "p" if kind_of is None else kind_of(h, t + 1)
            if differ is not None and differ[0] == t:
                avoid = (differ[1] - b) * pow(a, -1, V) % V
                row = ROWS["p"][s].copy()
                row[avoid] = 0.0
                rank = min(
                    V - 1, int(np.searchsorted(np.cumsum(row / row.sum()), u[t], side="right"))
                )
            else:
                rank = self._draw(kind, s, u[t])
            tv += TV[kind][s]
            tokens.append((a * rank + b) % V)
        return tuple(tokens), tv


def _completion(
    seed: int, index: int, tokens: tuple, tops=None, load: str | None = None
) -> Completion:
    timings = {"draft_n": 6, "draft_n_accepted": 3} if tops is None else {}
    return Completion(
        PROMPT,
        seed,
        tokens,
        top_probs=tops,
        probs_kind="post_sampling",
        finish_reason="length",
        timings=timings,
        index=index,
        load=load,
    )


def grow(engine: Engine, ref: list, cand: list, seeds: list[int], n: int, state: dict) -> None:
    """Sample seed indices len(ref)..n-1 at both ends (the coupled candidate reuses the reference's uniforms)."""
    rng = engine.rng
    for index in range(len(ref), n):
        u_ref = rng.random(M)
        tokens, _ = engine.complete(u_ref)
        ref.append(
            _completion(
                seeds[index],
                index,
                tokens,
                tuple(engine.report(tokens[:t]).top_probs for t in range(M)),
            )
        )
        load = "serial" if is_serial(index, SERIAL_SHARE) else "loaded"
        differ = None
        if engine.coupled:
            u_cand = u_ref.copy()
            if rng.random() < TARGET / 2:
                position = int(rng.integers(M))
                differ, u_cand[position:] = (position, tokens[position]), rng.random(M - position)
        else:
            u_cand = rng.random(M)
        c_tokens, tv = engine.complete(
            u_cand, lambda h, pos, load=load: _candidate_kind(engine.family, h, pos, load), differ
        )
        cand.append(_completion(seeds[index], index, c_tokens, load=load))
        state["tv"] += tv
        state["mismatches"] += c_tokens != tokens
        for c in (ref[-1], cand[-1]):
            for t in range(M):
                engine.report(c.tokens[:t])


def _header(role: str, design: dict, coupled: bool) -> Header:
    spec = (
        {"type": "draft-model", "draft_sampling": "probabilistic", "expect_seed_coupled": coupled}
        if role == "candidate"
        else None
    )
    return Header(
        role=role,
        engine={"name": "sim", "version": "1", "speculation": spec},
        model={"name": "zipf-1009", "sha256": None},
        request_defaults=dict(DEFAULTS),
        prompts={PROMPT: (1, 2, 3)},
        created="2026-12-06T00:00:00+00:00",
        exactspec_version="sim",
        design=design,
    )


def _look(result, n: int) -> dict:
    """What one look's EngineResult says: verdict, failing checks and the load they name, each route's bound."""
    entry = result.extra["engine"]["ruled_out"]["per_prompt"].get(PROMPT, {})
    bounds = {r["route"]: float(r["bound"]) for r in entry.get("routes", [])}
    failed = [r for r in result.counted if not r.passed]
    return {
        "verdict": result.verdict,
        "completions": n,
        "failed": sorted({r.check for r in failed}),
        "strongest_load": sorted(
            {
                str(r.result.details.get("strongest_load"))
                for r in failed
                if "strongest_load" in r.result.details
            }
        ),
        "void": bool(result.invalid),
        "bounds": bounds,
    }


def one_run(task: tuple[str, int, bool]) -> dict:
    """One run: a look after every round of the schedule, up to the scenario's cap, stopping when the one command
    would (`rounds.next_counts`: a final verdict, void reports or inputs that more samples cannot mend, the cap)."""
    name, run, quick = task
    t0 = time.perf_counter()
    cap = QUICK_SCHEDULE[-1] if quick else SCENARIOS[name][5]
    engine = Engine(name, 1_000_003 * run + zlib.crc32(name.encode()))
    key = f"{engine.seed:032x}"
    design = {
        "seeds": {"kind": "random", "space": SPACE, "key": key},
        "concurrency": 4,
        "load": {"concurrency": 4, "serial_share": SERIAL_SHARE},
    }
    seeds = random_seeds(key, SPACE, cap)
    ref: list[Completion] = []
    cand: list[Completion] = []
    state = {"tv": 0.0, "mismatches": 0}
    looks = []
    for n in (n for n in SCHEDULE if n <= cap):
        grow(engine, ref, cand, seeds, n, state)
        reference = SampleFile(
            "sim/reference.jsonl",
            _header("reference", design, False),
            list(ref),
            list(engine.reports.values()),
        )
        candidate = SampleFile(
            "sim/candidate.jsonl", _header("candidate", design, engine.coupled), list(cand), []
        )
        result = certify_samples(reference, candidate, PROFILE)
        looks.append(_look(result, n))
        if next_counts(result, {PROMPT: n}, SCHEDULE[0], cap).counts is None:
            break
    return {
        **looks[-1],
        "scenario": name,
        "run": run,
        "looks": [look["verdict"] for look in looks],
        "realised_tv": state["tv"] / (M * len(cand)),
        "mismatch_rate": state["mismatches"] / len(cand),
        "qualified_ever": any(look["verdict"] == "QUALIFIED" for look in looks),
        "seconds": time.perf_counter() - t0,
    }


def _rate(runs: list[dict], hit, stated: float | None = None) -> dict:
    k, n = sum(1 for r in runs if hit(r)), len(runs)
    low, high = clopper_pearson(k, n, 0.95)
    out = {"count": k, "runs": n, "rate": k / n, "ci95": [low, high], "upper": high}
    if stated is not None:
        out.update(stated=stated, upper_within_stated=high <= stated)
    return out


def _median(values: list) -> float | None:
    return float(np.median(values)) if values else None


#: the events a row counts, and which of them each kind of scenario is judged by (against which stated rate)
EVENTS = {
    "not_exact": ("NOT_EXACT",),
    "certified": ("CERTIFIED",),
    "qualified": ("QUALIFIED",),
    "inconclusive": ("INCONCLUSIVE",),
    "certified_or_qualified": ("CERTIFIED", "QUALIFIED"),
}
JUDGED = {
    "false_fail": {"not_exact": FALSE_FAIL},
    "monotone": {"certified_or_qualified": FALSE_PASS / 2},
    "shape": {"certified": FALSE_PASS},
    "coupling": {"certified": FALSE_PASS},
    "power": {},
}


def summarise(name: str, runs: list[dict]) -> dict:
    """The scenario's row: each verdict's rate with its Clopper-Pearson interval (and the stated rate where it is
    judged), completions to NOT_EXACT, the checks that failed and the load they name, the routes' last bounds."""
    judged = JUDGED[SCENARIOS[name][4]]
    rates = {
        event: _rate(runs, lambda r, vs=verdicts: r["verdict"] in vs, judged.get(event))
        for event, verdicts in EVENTS.items()
    }
    not_exact = [r["completions"] for r in runs if r["verdict"] == "NOT_EXACT"]
    any_shape = [
        min(r["bounds"].get("coupling", 1.0), r["bounds"].get("law_any", 1.0)) for r in runs
    ]
    return {
        "runs": len(runs),
        "judged": {event: rates[event] for event in judged},
        "rates": rates,
        "final_verdicts": {
            verdicts[0]: rates[event]["count"]
            for event, verdicts in EVENTS.items()
            if len(verdicts) == 1
        },
        "completions_at_end": {str(n): sum(r["completions"] == n for r in runs) for n in SCHEDULE},
        "median_completions_to_not_exact": _median(not_exact),
        "completions_to_not_exact": {str(n): not_exact.count(n) for n in sorted(set(not_exact))},
        "failed_checks": {
            c: sum(c in r["failed"] for r in runs)
            for c in sorted({c for r in runs for c in r["failed"]})
        },
        "strongest_load_of_failures": {
            k: sum(k in r["strongest_load"] for r in runs) for k in ("all", "serial", "loaded")
        },
        "reports_void": sum(r["void"] for r in runs),
        "cpu_seconds": round(sum(r["seconds"] for r in runs), 1),
        "qualified_at_some_look": sum(r["qualified_ever"] for r in runs),
        "realised_tv": None
        if SCENARIOS[name][1]
        else {  # seed-coupled: not computed
            "mean": float(np.mean([r["realised_tv"] for r in runs])),
            "min": float(np.min([r["realised_tv"] for r in runs])),
        },
        "mismatch_rate_mean": float(np.mean([r["mismatch_rate"] for r in runs])),
        "best_any_shape_bound_at_end": {
            "min": float(min(any_shape)),
            "median": float(np.median(any_shape)),
        },
        "median_bound_at_end": {
            route: _median([r["bounds"][route] for r in runs if route in r["bounds"]])
            for route in ("coupling", "law_any", "law_monotone")
        },
    }


def _version() -> str:
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _table(doc: dict) -> str:
    head = (
        "| scenario | runs | NOT_EXACT / CERTIFIED / QUALIFIED / INCONCLUSIVE | judged: rate (95 % upper end) vs "
        "stated | median completions to NOT_EXACT |"
    )
    lines = [head, "|---|---|---|---|---|"]
    for name, row in doc["scenarios"].items():
        v = row["final_verdicts"]
        judged = "; ".join(
            f"{event} {r['rate']:.3f} ({r['upper']:.3f}) vs {r['stated']:g} "
            + ("within" if r["upper_within_stated"] else "ABOVE")
            for event, r in row["judged"].items()
        )
        lines.append(
            f"| {name} | {row['runs']} | {v['NOT_EXACT']} / {v['CERTIFIED']} / {v['QUALIFIED']} / "
            f"{v['INCONCLUSIVE']} | {judged or '-'} | {row['median_completions_to_not_exact']} |"
        )
    return "\n".join(lines)


def _parameters(args: argparse.Namespace) -> dict:
    return {
        "runs": args.runs,
        "quick": args.quick,
        "workers": args.workers,
        "schedule": list(SCHEDULE),
        "quick_schedule": list(QUICK_SCHEDULE),
        "vocabulary": V,
        "top_n": TOP_N,
        "max_tokens": M,
        "zipf_exponents": S_GRID.round(4).tolist(),
        "target_tv": TARGET,
        "at_target_tv": AT_TARGET,
        "total_false_fail": FALSE_FAIL,
        "false_pass_rate": FALSE_PASS,
        "route_false_pass": FALSE_PASS / 2,
        "serial_share": SERIAL_SHARE,
        "seed_space": SPACE,
        "prompts": 1,
        "rounding": "float32, then 6 decimals",
        "profile": "quick, with total_false_fail, target_tv and false_pass_rate replaced by the values above",
        "scenarios": {
            k: dict(zip(("family", "coupled", "reports", "runs_share", "judged", "cap"), v))
            for k, v in SCENARIOS.items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs", type=int, default=200, help="runs of `exact`; the others: their share of it"
    )
    parser.add_argument(
        "--quick", action="store_true", help="3 runs each, looks at 32 and 128: checks the script"
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="worker processes (runs are independent)"
    )
    parser.add_argument("--only", nargs="*", default=None, help="scenarios to run (default: all)")
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/engine_sequential.json"))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    names = [name for name in SCENARIOS if not args.only or name in args.only]
    tasks = sorted(
        (
            (name, run, args.quick)
            for name in names  # the long rows first: the workers end together
            for run in range(3 if args.quick else max(10, round(SCENARIOS[name][3] * args.runs)))
        ),
        key=lambda task: -SCENARIOS[task[0]][5],
    )
    runs: dict[str, list[dict]] = {name: [] for name in names}
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        for done, result in enumerate(pool.imap_unordered(one_run, tasks), start=1):
            runs[result["scenario"]].append(result)
            if done % 20 == 0 or done == len(tasks):
                print(
                    f"{done}/{len(tasks)} runs, {time.perf_counter() - started:.0f} s", flush=True
                )
    doc = {
        "benchmark": "sim_engine_sequential",
        "machine": machine_info(),
        "code_version": _version(),
        "parameters": _parameters(args),
        "seconds": round(time.perf_counter() - started, 1),
        "scenarios": {
            name: summarise(name, sorted(runs[name], key=lambda r: r["run"])) for name in names
        },
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(_table(doc))
    print(f"wall time {doc['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
