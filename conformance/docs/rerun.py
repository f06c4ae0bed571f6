"""What regenerates a committed certificate, and how long its run took: read from the certificate's own JSON (its
`certificate_run` for the engine benchmarks, else the command line its provenance records)."""

from __future__ import annotations

import shlex

from .catalogue import Certificate

#: Folders written by a benchmark script rather than by the command in their provenance.
VLLM_RULE_PREFIX = "engine/vllm-rejection-sampler"
SEQUENCE_MAIN = "conformance/sequence/__main__.py"


def seed_key(doc: dict) -> str | None:
    """The key the engine run drew its random seeds with (`engine.design`; None for consecutive seeds)."""
    design = ((doc.get("engine") or {}).get("design") or {}).get("candidate") or {}
    seeds = design.get("seeds") or {}
    return seeds.get("key") if seeds.get("kind") == "random" else None


def rerun_command(cert: Certificate) -> str:
    """The command, from the repository root, that regenerates `cert` (engine: the benchmark with the run's seed
    key; otherwise the recorded command line, the program named as a user runs it and --out the certificate's
    folder)."""
    run = cert.doc.get("certificate_run") or {}
    if run.get("config"):
        key = seed_key(cert.doc)
        return f".venv/bin/python benchmarks/engine_certificates.py --config {run['config']}" + (
            f" --seed-key {key}" if key else ""
        )
    if cert.name.startswith(VLLM_RULE_PREFIX):
        return (
            f".venv/bin/python benchmarks/vllm_rule_certificates.py --profile {cert.doc['profile']['name']} "
            f"--only {cert.name.split('/', 1)[1]}"
        )
    argv = list((cert.doc.get("provenance") or {}).get("command_line") or [])
    if not argv:
        return "(no command line recorded)"
    program = (
        ["python", "-m", "exactspec.conformance.sequence"]
        if argv[0] == SEQUENCE_MAIN
        else ["exactspec"]
        if argv[0].endswith("exactspec")
        else [argv[0]]
    )
    rest = argv[1:]
    if "--out" in rest:
        rest[rest.index("--out") + 1] = cert.folder.as_posix()
    return shlex.join(program + rest)


def expected_minutes(cert: Certificate) -> float | None:
    """The run's minutes as the certificate records them: the engine benchmark's whole run (servers included), else
    the campaign's, else the checks' time (`seconds`)."""
    run, campaign = cert.doc.get("certificate_run") or {}, cert.doc.get("campaign") or {}
    if run.get("runtime_s"):
        return run["runtime_s"] / 60
    if campaign.get("minutes"):
        return float(campaign["minutes"])
    seconds = cert.doc.get("seconds")
    return None if seconds is None else seconds / 60


__all__ = ["expected_minutes", "rerun_command", "seed_key"]
