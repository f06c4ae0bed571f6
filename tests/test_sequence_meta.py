"""Meta-test of the sequence-level suite: every generation-level mutant is rejected, the law-preserving
variants and the cost policy are certified (quick profile, deterministic seeds). The reference loop and the
generator with fixed k are certified by conformance/sequence/test_sequence_level.py, which CI runs too."""

from __future__ import annotations

import re

import pytest

from tests.sequence_level import run_sequence_suite
from exactspec.conformance.sequence.mutants import BENIGN, MUTANTS
from exactspec.conformance.sequence.report import to_markdown


@pytest.mark.slow
@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutant_rejected(mutant):
    report = run_sequence_suite(mutant(), profile="quick", fail_fast=True)
    assert not report["passed"], f"{mutant.name} was certified"
    assert (
        report["verdict"] in ("NOT_EXACT", "CONTRACT_VIOLATION")
        and report["schema_version"] == "2.1"
    )
    # fail-fast: the run stopped there
    (failing,) = [c for c in report["cases"] if c["passed"] is False]
    assert failing["status"] in ("ok", "error") and any(not c["passed"] for c in failing["checks"])
    # the mutant raised on that case: the reason names the call and its exception
    if failing["status"] == "error":
        assert re.search(
            rf"{type(mutant()).__name__}\.generate(_batch)? raised", failing["reason"]
        ), failing["reason"]
    assert report["failed_cases"] == [failing["name"]]


@pytest.mark.slow
@pytest.mark.parametrize(
    "impl", BENIGN, ids=lambda x: x.name
)  # the reference: conformance/sequence's default run
def test_valid_certified(impl):
    report = run_sequence_suite(impl(), profile="quick")
    assert report["passed"] and report["verdict"] == "CERTIFIED", to_markdown(report)
    budget = report["budget"]
    assert budget["within_budget"] and budget["n_statistical_records"] == budget["n_checks"]
    assert budget["false_fail_rate_spent"] <= budget["total_false_fail"] * (1 + 1e-9)


@pytest.mark.slow
def test_gpu_impl_cost_policy_certified():
    """Our generator with the cost policy (k chosen each round from timings and outcomes).

    With fixed k it is certified on every quick case by conformance/test_sequence_level.py, which CI runs too;
    here the cases where the policy's k (0 to 2k) meets sampling, a batch, EOS and the widest k."""
    pytest.importorskip("exactspec.gpu_impl.loop.generator")
    cases = [
        "t1.0_k2",
        "batch2_k3",
        "eos_k4_n4",
        "k8_n4",
        "combo_t0.8_k4_p0.9_m0.05_k3",
        "pit_t1.0_k4",
    ]
    report = run_sequence_suite("gpu_impl-cost", profile="quick", cases=cases)
    assert report["passed"] and report["verdict"] == "CERTIFIED", to_markdown(report)
    assert sorted(c["name"] for c in report["cases"]) == sorted(cases)
