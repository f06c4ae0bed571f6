"""One path to a verdict: `pytest --pyargs exactspec.conformance` and `exactspec certify` run the same driver, so on
the same implementation, profile and cases they give the same verdict and the same records (ids, outcomes and
p-values), the confirmation phase included (SamplerMatch: exact, not the standard rule, so its standard-rule
failures are confirmed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from exactspec.conformance.certify_command import main as certify_main

CASE = "demo_mixed_draft"


def _records(doc: dict) -> list[tuple]:
    return [
        (c["case"], c["check"], c["category"], c["passed"], c["p_value"]) for c in doc["checks"]
    ]


def _by_pytest(impl: str, out: Path) -> tuple[int, dict]:
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        "exactspec.conformance",
        "--exactspec-impl",
        impl,
        "--exactspec-profile",
        "quick",
        "--exactspec-report",
        str(out),
        "-q",
        "-p",
        "no:cacheprovider",
        "-k",
        f"{CASE} or generated or verdict",
    ]
    done = subprocess.run(command, cwd=out.parent, capture_output=True, text=True, timeout=600)
    written = list(out.glob("*-rule/certificate.json"))
    assert len(written) == 1, done.stdout[-3000:] + done.stderr[-2000:]
    return done.returncode, json.loads(written[0].read_text())


@pytest.mark.parametrize(
    "impl, verdict",
    [
        ("exactspec.conformance.adapters.reference:Reference", "CERTIFIED"),
        ("exactspec.conformance.rule.mutants.zoo:SamplerMatch", "EXACT_NOT_STANDARD"),
    ],
)
def test_pytest_and_certify_give_the_same_verdict_and_records(tmp_path, capsys, impl, verdict):
    status, under_pytest = _by_pytest(impl, tmp_path / "pytest")
    assert (
        certify_main(
            [
                "--impl",
                impl,
                "--profile",
                "quick",
                "--cases",
                CASE,
                "--workers",
                "1",
                "--out",
                str(tmp_path / "certify"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    by_certify = json.loads((tmp_path / "certify" / "certificate.json").read_text())
    assert under_pytest["verdict"] == by_certify["verdict"] == verdict
    assert _records(under_pytest) == _records(by_certify)
    assert [c["name"] for c in under_pytest["cases"]] == [CASE]
    assert any(c["check"] == "generated_cases" for c in under_pytest["checks"])
    if verdict == "EXACT_NOT_STANDARD":  # the driver's confirmation ran under pytest too
        assert any(c["check"].startswith("confirm_") for c in under_pytest["checks"])
        # its per-case standard-rule test fails, saying so; the certificate is EXACT_NOT_STANDARD
        assert status == 1
    else:
        assert status == 0
