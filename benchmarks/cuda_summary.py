"""OUT/summary.json for benchmarks/cuda.sh: each step's exit code and seconds, the test counts, the verdicts.

python benchmarks/cuda_summary.py OUT_DIR SCRATCH_DIR     (SCRATCH_DIR: cuda.sh's step records and junit XML)
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any


def steps(scratch: Path) -> dict[str, dict[str, int]]:
    rows = (line.split() for line in (scratch / "steps").read_text().splitlines() if line.strip())
    return {name: {"exit_code": int(rc), "seconds": int(seconds)} for name, rc, seconds in rows}


def test_counts(scratch: Path) -> dict[str, Any] | None:
    path = scratch / "junit.xml"
    if not path.exists():
        return None
    root = ElementTree.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
    counts["failed"] = [
        case.get("name")
        for case in suite.iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    ]
    return counts


def verdicts(out: Path) -> dict[str, Any]:
    found = {}
    for path in sorted(out.glob("cert_*.json")):
        report = json.loads(path.read_text())
        found[path.stem.removeprefix("cert_")] = {
            "verdict": report.get("verdict"),
            "passed": report.get("passed"),
            "profile": report.get("profile", {}).get("name"),
            "seconds": report.get("seconds"),
            "failed_checks": report.get("budget", {}).get("failed"),
        }
    return found


def main(argv: list[str]) -> int:
    out, scratch = Path(argv[0]), Path(argv[1])
    bench = out / "cuda_bench.json"
    summary = {
        "steps": steps(scratch),
        "tests": test_counts(scratch),
        "certificates": verdicts(out),
        "bench_written": bench.exists(),
    }
    if bench.exists():
        payload = json.loads(bench.read_text())
        summary["machine"] = payload.get("machine")
        summary["sampler_default_method"] = payload.get("sampler_default_method")
    summary["all_steps_passed"] = all(step["exit_code"] == 0 for step in summary["steps"].values())
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(
        json.dumps(
            {key: summary[key] for key in ("steps", "tests", "certificates", "all_steps_passed")},
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
