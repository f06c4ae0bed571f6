"""Mutant kill table of the sequence level: run every mutant (fail-fast) and the valid variants through the
quick profile and write docs/certificates/sequence/mutant-kill-table.{json,md}.

    python -m conformance.sequence.killtable [--profile quick] [--out docs/certificates/sequence]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from exactspec.conformance.sequence.mutants import BENIGN, MUTANTS
from exactspec.conformance.sequence.suite import run_sequence_suite


def kill_table(profile: str = "quick", include_valid: bool = True) -> dict:
    rows = []
    for mutant in MUTANTS:
        start = time.perf_counter()
        report = run_sequence_suite(mutant(), profile=profile, fail_fast=True)
        last = report["cases"][-1]
        failing = [c for c in last.get("checks", []) if not c["passed"]]
        worst = min(failing, key=lambda c: c["p_value"] if c["p_value"] is not None else 0.0) if failing else None
        rows.append({"mutant": mutant.name, "models": (mutant.__doc__ or "").split("\n")[0].strip(),
                     "killed": not report["passed"], "killed_by_case": last["case"] if not report["passed"] else None,
                     "failing_checks": [c["name"] for c in failing],
                     "strongest_evidence": worst["message"] if worst else None,
                     "seconds": round(time.perf_counter() - start, 1)})
    valid = []
    if include_valid:
        for impl in ["reference", *BENIGN]:
            adapter = impl() if isinstance(impl, type) else impl
            report = run_sequence_suite(adapter, profile=profile)
            valid.append({"impl": report["impl"], "certified": report["passed"], "failed_cases": report["failed_cases"],
                          "seconds": report["seconds"]})
    return {"profile": profile, "mutants": rows, "valid": valid,
            "all_mutants_killed": all(r["killed"] for r in rows),
            "all_valid_certified": all(v["certified"] for v in valid)}


def to_markdown(table: dict) -> str:
    lines = [f"# Sequence-level mutant kill table (profile `{table['profile']}`)", "",
             f"All mutants killed: **{table['all_mutants_killed']}**; all valid variants certified: "
             f"**{table['all_valid_certified']}**.", "",
             "| mutant | killed | first failing case | failing checks | strongest evidence |", "|---|---|---|---|---|"]
    for r in table["mutants"]:
        ev = (r["strongest_evidence"] or "").replace("|", "/")
        lines.append(f"| `{r['mutant']}` | {'yes' if r['killed'] else '**NO**'} | `{r['killed_by_case']}` | "
                     f"{', '.join(r['failing_checks'][:4])} | {ev} |")
    if table["valid"]:
        lines += ["", "| valid implementation / benign variant | certified | failed cases |", "|---|---|---|"]
        for v in table["valid"]:
            lines.append(f"| `{v['impl']}` | {'yes' if v['certified'] else '**NO**'} | {v['failed_cases']} |")
    lines += ["", "Produced by `python -m conformance.sequence.killtable`.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--out", default="docs/certificates/sequence")
    args = parser.parse_args(argv)
    table = kill_table(args.profile)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "mutant-kill-table.json").write_text(json.dumps(table, indent=1) + "\n")
    (out / "mutant-kill-table.md").write_text(to_markdown(table))
    print(to_markdown(table))
    return 0 if table["all_mutants_killed"] and table["all_valid_certified"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
