"""Run the suite on every member of the zoo and record, per mutant, the first profile that rejects it
(quick -> standard -> full), the check and case that caught it, and whether valid variants are
certified. Writes docs/certificates/mutant_kill.json.

    python -m conformance.mutants.kill_table [--out docs/certificates/mutant_kill.json] [--max-profile full]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from exactspec.conformance.mutants.zoo import MUTANTS, VALID
from exactspec.conformance.runner import run_suite

ORDER = ("quick", "standard", "full")


def classify(cls, max_profile: str = "full") -> dict:
    entry = {"name": cls.__name__, "kind": cls.kind, "models": cls.models, "expected": list(cls.expected),
             "runs": []}
    profiles = ORDER[: ORDER.index(max_profile) + 1]
    if cls.kind == "valid":
        profiles = profiles[:1]  # valid variants: the CI profile (a full run of every profile is the certify job)
    for prof in profiles:
        t = time.perf_counter()
        res = run_suite(cls(), cls.__name__, prof, fail_fast=False)
        first = res.first_failure()
        failed = res.failed
        by_check: dict[str, int] = {}
        for r in failed:
            key = r.check if not r.check.startswith("position_") or r.check == "position_1" else "position_j>1"
            by_check[key] = by_check.get(key, 0) + 1
        entry["runs"].append({"profile": prof, "verdict": res.verdict, "seconds": round(time.perf_counter() - t, 2),
                              "caught_by": None if first is None else f"{first.case}/{first.check} ({first.category})",
                              "message": None if first is None else first.result.message[:400],
                              "failed_checks_by_kind": by_check,
                              # Would a suite that only tests the first-token marginal (plus the contract and an
                              # ordinary-Generator invariant check) have caught it?
                              "visible_to_first_token_only": any(
                                  r.check in ("position_1", "invariants", "invariants_statistical_rounds",
                                              "determinism", "single_round_path") or r.category == "contract"
                                  for r in failed)})
        entry["verdict"] = res.verdict
        entry["correct"] = res.verdict in cls.expected
        if cls.kind == "mutant" and res.verdict != "CERTIFIED":
            entry["first_caught_by_profile"] = prof
            break
    else:
        if cls.kind == "mutant":
            entry["first_caught_by_profile"] = None
    return entry


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/certificates/mutant_kill.json")
    parser.add_argument("--max-profile", default="full", choices=ORDER)
    args = parser.parse_args(argv)
    entries = []
    for cls in MUTANTS + VALID:
        e = classify(cls, args.max_profile)
        print(f"{e['name']:28s} {e['kind']:7s} {e['verdict']:20s} {'ok' if e['correct'] else 'WRONG'} "
              f"{e.get('first_caught_by_profile', '')} {e['runs'][-1]['caught_by'] or ''}", flush=True)
        entries.append(e)
    mutants = [e for e in entries if e["kind"] == "mutant"]
    valid = [e for e in entries if e["kind"] == "valid"]
    summary = {
        "mutants": len(mutants),
        "mutants_rejected": sum(e["verdict"] != "CERTIFIED" for e in mutants),
        "mutants_classified_as_expected": sum(e["correct"] for e in mutants),
        "kill_rate": sum(e["verdict"] != "CERTIFIED" for e in mutants) / len(mutants),
        "valid_variants": len(valid),
        "valid_variants_certified_as_expected": sum(e["correct"] for e in valid),
        "first_caught_by_profile": {p: sum(e.get("first_caught_by_profile") == p for e in mutants) for p in ORDER},
        "mutants_invisible_to_first_token_only": [e["name"] for e in mutants
                                                  if not e["runs"][-1]["visible_to_first_token_only"]],
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"summary": summary, "entries": entries}, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0 if summary["mutants_classified_as_expected"] == len(mutants) and \
        summary["valid_variants_certified_as_expected"] == len(valid) else 1


if __name__ == "__main__":
    raise SystemExit(main())
