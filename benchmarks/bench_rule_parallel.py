"""Rule level, quick profile, on exactspec's torch adapter: one process (the way the suite ran before
issue 13) against case-level worker processes. Three subjects: `gpu_impl:TorchCPU` as shipped (it offers
verify_batch), the same verifier through `verify` only (a per-round adapter, the slow kind), and that
per-round path as it was at BEFORE_REV (git's copy of gpu_impl's sampler, categorical and randomness
modules, loaded into a throwaway package: the baseline of issue 13 item 6, a cheaper per-round call).

    python benchmarks/bench_rule_parallel.py [--workers 2] [--repeats 1] [--per-round-cases N]
        [--subjects batch per_round per_round_before]

Writes benchmarks/results/rule_parallel.json: wall and CPU seconds (this process and its workers) per
run, workers 1 (torch's default threads) and --workers processes (each with its share of the cores),
interleaved subject by subject; rows of subjects not run this time are kept from the file as they were.
The per-round subjects run on the first N suite cases only (default 8: a whole quick run would take long).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RESULTS_DIR, spread, write_result  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# the per-round path before issue 13 item 6
BEFORE_REV = os.environ.get("EXACTSPEC_BEFORE_REV", "920c07a")
SPECS = {
    "batch": "exactspec.conformance.adapters.gpu_impl:TorchCPU",
    "per_round": "bench_rule_parallel:PerRoundTorch",
    "per_round_before": "bench_rule_parallel:PerRoundTorchBefore",
}
# older labels
LEGACY = {
    "TorchCPU (verify_batch)": "batch",
    "TorchCPU per round (verify only)": "per_round",
}


class PerRoundTorch:
    """`gpu_impl:TorchCPU` through its per-round `verify` only (no verify_batch)."""

    def __init__(self):
        from exactspec.conformance.adapters.gpu_impl import TorchCPU

        self._inner = TorchCPU()

    def verify(self, target_probs, draft_probs, draft_tokens, rng):
        return self._inner.verify(target_probs, draft_probs, draft_tokens, rng)


def _package_at(rev: str):
    """gpu_impl's sampler (TorchVerifier then lived there), categorical and randomness as of git `rev`, as a
    throwaway package (imported once per process); the rest of exactspec is the checkout's."""
    name = f"_gpu_impl_{rev}"
    if name not in sys.modules:
        folder = Path(tempfile.mkdtemp(prefix="bench_rule_parallel_")) / name
        atexit.register(shutil.rmtree, folder.parent, True)
        folder.mkdir()
        (folder / "__init__.py").write_text("")
        for module in ("sampler", "categorical", "randomness"):
            source = subprocess.run(
                ["git", "-C", str(ROOT), "show", f"{rev}:gpu_impl/{module}.py"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            (folder / f"{module}.py").write_text(source)
        sys.path.insert(0, str(folder.parent))
        __import__(f"{name}.sampler")
    return sys.modules[f"{name}.sampler"]


class PerRoundTorchBefore:
    """The per-round path as it was at BEFORE_REV: that TorchVerifier, behind the adapter's warning filter."""

    def __init__(self):
        self._inner = _package_at(BEFORE_REV).TorchVerifier(device="cpu")

    def verify(self, target_probs, draft_probs, draft_tokens, rng):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            return self._inner.verify(target_probs, draft_probs, draft_tokens, rng)


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its reaped children (the workers), user and system."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _run(spec: str, workers: int, cases) -> tuple[float, float]:
    """(wall, CPU) seconds of one rule-level run (the 1-minute load average after it is printed); raises unless
    CERTIFIED."""
    from exactspec.conformance import certify

    start, cpu = time.perf_counter(), _cpu_seconds()
    names = None if cases is None else [c.name for c in cases]
    result = certify(spec, "rule", "quick", cases=names, hypothesis=False, workers=workers).result
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    if result.verdict != "CERTIFIED":
        raise RuntimeError(f"{spec}: {result.verdict}")
    print(
        f"  {spec} workers={workers}: {seconds:.1f} s wall, {cpu:.1f} s CPU, load {os.getloadavg()}",
        flush=True,
    )
    return seconds, cpu


def _measure(subjects: dict, workers: int, repeats: int) -> dict:
    """Interleaved runs: each repeat runs every subject once per process count."""
    runs = {label: {"wall_1": [], "cpu_1": [], "wall_n": [], "cpu_n": []} for label in subjects}
    for _ in range(repeats):
        for count, key in ((1, "1"), (workers, "n")):
            for label, (spec, cases) in subjects.items():
                wall, cpu = _run(spec, count, cases)
                runs[label][f"wall_{key}"].append(wall)
                runs[label][f"cpu_{key}"].append(cpu)
    rows = {}
    for label, r in runs.items():
        spec, cases = subjects[label]
        rows[label] = {
            "spec": spec,
            "cases": len(cases),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds_one_process": spread(r["wall_1"]),
            f"seconds_{workers}_workers": spread(r["wall_n"]),
            "cpu_seconds_one_process": spread(r["cpu_1"]),
            f"cpu_seconds_{workers}_workers": spread(r["cpu_n"]),
            "speedup": spread([b / c for b, c in zip(r["wall_1"], r["wall_n"])]),
        }
    if "per_round" in runs and "per_round_before" in runs:
        before, new = runs["per_round_before"], runs["per_round"]
        rows["per_round"]["speedup_vs_before_one_process"] = {
            "one_process": spread([b / c for b, c in zip(before["wall_1"], new["wall_1"])]),
            f"{workers}_workers": spread([b / c for b, c in zip(before["wall_1"], new["wall_n"])]),
            "cpu_one_process": spread([b / c for b, c in zip(before["cpu_1"], new["cpu_1"])]),
            "before_rev": BEFORE_REV,
        }
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--per-round-cases", type=int, default=8)
    parser.add_argument("--subjects", nargs="+", choices=list(SPECS), default=list(SPECS))
    args = parser.parse_args(argv)
    from exactspec.conformance.rule.cases import SUITE_CASES

    subjects = {
        label: (
            SPECS[label],
            list(SUITE_CASES if label == "batch" else SUITE_CASES[: args.per_round_cases]),
        )
        for label in args.subjects
    }
    rows = _measure(subjects, args.workers, args.repeats)
    previous = RESULTS_DIR / "rule_parallel.json"
    stored = json.loads(previous.read_text()) if previous.is_file() else {"rows": {}}
    kept = {
        LEGACY.get(label, label): {"date": stored["machine"]["date"], **row}
        for label, row in stored["rows"].items()
    }
    kept = {label: row for label, row in kept.items() if label in SPECS and label not in rows}
    write_result(
        "rule_parallel",
        {
            "workers": args.workers,
            "repeats": args.repeats,
            "profile": "quick",
            "load_average_after": os.getloadavg(),
            "rows": {**kept, **rows},
        },
    )
    for label, row in rows.items():
        print(f"{label}: {json.dumps(row)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
