"""The engine level's meta-test at the standard profile: every served mutant whose mean per-token TV at the
drafted positions is at or above the profile's target (0.05) must be rejected, and the correct generators
CERTIFIED. Writes the kill table (docs/certificates/kill-tables/engine-standard/) and
benchmarks/results/engine_meta_standard.json (each row's verdict, failed checks, measured deviation, minutes).

1. Each zoo row's mean per-token TV at positions 2..4 is measured in-process (`engine.serve.zoo_deviation`: 20,000
   completions, estimate with one-sided 1 - 1e-3 bounds).
2. `exactspec kill-table --level engine --profile standard` runs the zoo: each row served over llama.cpp's protocol
   on 127.0.0.1 and certified by the one command's rounds (`collect.campaign`) until its verdict, against one
   shared reference (exactspec's plain loop, served; its samples handed from row to row).
3. The verdicts are checked against the deviations: a row fails when a mutant whose lower bound reaches the
   target is not rejected, or a valid row misses its verdict; a mutant below the target is recorded as allowed
   to pass.

    nice -n 10 .venv/bin/python benchmarks/engine_meta_standard.py [--profile standard] [--n-sim 20000]

Exit 0 when the table holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from exactspec.conformance.core.profiles import get_profile
from exactspec.conformance.engine.serve.zoo_deviation import measure
from exactspec.conformance.kill_table import choose, default_out, run_subjects, write_table

RESULTS = Path(__file__).resolve().parent / "results" / "engine_meta_standard.json"


def judge(row: dict, deviation: dict, target: float) -> str:
    """'ok', 'below target (allowed to pass)' or 'FAILED' for one row, from its verdict and measured deviation."""
    if row["kind"] != "mutant":  # a valid variant
        return "ok" if row["as_expected"] else "FAILED"
    if row["verdict"] in ("NOT_EXACT", "CONTRACT_VIOLATION"):
        return "ok"
    return "FAILED" if deviation["lower_bound"] >= target else "below target (allowed to pass)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="standard", choices=("quick", "standard", "full"))
    parser.add_argument(
        "--n-sim", type=int, default=20_000, help="in-process completions per row for the deviation"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    target = get_profile(args.profile).engine.target_tv
    subjects = choose("engine", args.profile)
    start = time.perf_counter()
    deviations = {s.name: measure(s.name, args.n_sim).as_dict() for s in subjects}
    measured_s = time.perf_counter() - start
    print(f"deviations measured in {measured_s / 60:.1f} min", file=sys.stderr, flush=True)
    table = run_subjects(
        "engine",
        args.profile,
        subjects,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    write_table(table, default_out("engine", args.profile))
    rows = [
        {
            **row,
            "mean_token_tv": deviations[row["name"]],
            "judged": judge(row, deviations[row["name"]], target),
        }
        for row in table["rows"]
    ]
    result = {
        "profile": args.profile,
        "target_mean_token_tv": target,
        "rows": rows,
        "passed": all(r["judged"] != "FAILED" for r in rows),
        "minutes": {
            "deviations": round(measured_s / 60, 1),
            "kill_table": round(table["summary"]["seconds"] / 60, 1),
            "total": round((time.perf_counter() - start) / 60, 1),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for r in rows:
        d = r["mean_token_tv"]
        print(
            f"{r['name']:36s} {r['verdict']:12s} TV {d['estimate']:.3f} [{d['lower_bound']:.3f}, {d['upper_bound']:.3f}]"
            f"  {r['judged']}"
        )
    print(f"{'PASSED' if result['passed'] else 'FAILED'}; {result['minutes']}; written {args.out}")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
