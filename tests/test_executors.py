"""Cases on any executor: a certificate is the same, verdicts and p-values bit for bit apart from timings and
provenance, whether its cases ran serially, in local worker processes or on a Dask cluster (a real
`distributed.LocalCluster` on 127.0.0.1, two worker processes whose working directory does not hold the
adapter's module: `certify` sends it to them). Rule, tree and sequence levels; the rule level through the
command a user types, `exactspec certify --impl my_rule:Verifier --scheduler ADDRESS`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")

from exactspec.conformance import certify  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RULE_CASES = (
    "demo_mixed_draft,one_hot_target,rows_vary_by_round,gen_V3_k2_tiny-one_hot_q_s597914449"
)
#: What may differ between runs of the same certificate: when and where it ran, and how long each part took.
VOLATILE = {"seconds", "generated", "provenance"}


def comparable(doc: object) -> object:
    """`doc` without the fields that legitimately differ between executors (timings, provenance)."""
    if isinstance(doc, dict):
        return {k: comparable(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [comparable(v) for v in doc]
    return doc


def test_comparable_drops_only_timings_and_provenance():
    doc = {
        "verdict": "CERTIFIED",
        "seconds": 1.0,
        "checks": [{"p_value": 0.5, "details": {"seconds": 2.0}}],
    }
    assert comparable(doc) == {"verdict": "CERTIFIED", "checks": [{"p_value": 0.5, "details": {}}]}
    assert comparable(doc) != comparable({**doc, "checks": [{"p_value": 0.25, "details": {}}]})


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    """A two-process LocalCluster started from an empty directory; its scheduler's address."""
    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("dask-workers"))
    try:
        cluster = distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=40,
        )
    finally:
        os.chdir(here)
    yield cluster.scheduler_address
    cluster.close()


def _certify_command(
    cwd: Path, out: str, *extra: str, impl: str = "my_rule:Verifier", cases: str = RULE_CASES
) -> dict:
    """`exactspec certify` in a fresh process (nothing another test changed in this one can reach it)."""
    command = [
        sys.executable,
        "-m",
        "exactspec.cli",
        "certify",
        "--impl",
        impl,
        "--profile",
        "quick",
        "--cases",
        cases,
        "--no-progress",
        "--out",
        out,
        *extra,
    ]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads((cwd / out / "certificate.json").read_text())


@pytest.mark.slow
def test_rule_certificate_from_the_command_line_is_the_same_on_dask(scheduler, tmp_path):
    shutil.copy(REPO / "examples" / "my_rule.py", tmp_path / "my_rule.py")
    serial = _certify_command(tmp_path, "serial", "--workers", "1")
    on_dask = _certify_command(tmp_path, "dask", "--scheduler", scheduler)
    assert serial["verdict"] == "CERTIFIED" and len(serial["cases"]) == len(RULE_CASES.split(","))
    assert comparable(on_dask) == comparable(serial)


@pytest.mark.slow
def test_tree_certificate_is_the_same_on_dask_and_local_workers(scheduler):
    spec = "exactspec.conformance.tree.adapters:TreeReference"
    serial = certify(spec, "tree", "quick").document()
    assert serial["verdict"] == "CERTIFIED"
    assert comparable(certify(spec, "tree", "quick", scheduler=scheduler).document()) == comparable(
        serial
    )
    assert comparable(certify(spec, "tree", "quick", workers=2).document()) == comparable(serial)


@pytest.mark.slow
def test_sequence_certificate_is_the_same_on_dask(scheduler, tmp_path):
    pytest.importorskip("torch")
    cases = "t1.0_k2,pit_t1.0_k4,greedy_tiny"
    serial = _certify_command(tmp_path, "serial", "--workers", "1", impl="reference", cases=cases)
    on_dask = _certify_command(
        tmp_path, "dask", "--scheduler", scheduler, impl="reference", cases=cases
    )
    assert serial["verdict"] == "CERTIFIED" and serial["budget"]["n_statistical_records"] > 0
    assert comparable(on_dask) == comparable(serial)


def test_an_unreachable_scheduler_is_a_usage_error(tmp_path, monkeypatch):
    from exactspec.conformance.certify_command import main

    monkeypatch.setattr("exactspec.conformance.core.executor.CONNECT_TIMEOUT_S", 1)
    code = main(
        [
            "--impl",
            "exactspec.conformance.adapters.reference:Reference",
            "--profile",
            "quick",
            "--cases",
            "demo_mixed_draft",
            "--scheduler",
            "tcp://127.0.0.1:9",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 2
