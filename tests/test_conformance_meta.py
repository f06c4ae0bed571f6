"""Meta-test: the conformance suite (quick profile, fixed seeds) rejects every mutant of the zoo and
certifies every valid variant -- sampler-match as exact but not the standard rule."""

from __future__ import annotations

import pytest

from exactspec.conformance.rule.mutants.zoo import MUTANTS, VALID
from tests.rule_level import run_suite


def test_zoo_size():
    assert len(MUTANTS) >= 15 and len(VALID) >= 3
    assert all(m.models and m.kind == "mutant" for m in MUTANTS)


@pytest.mark.slow
@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda c: c.__name__)
def test_mutant_rejected(mutant):
    result = run_suite(mutant(), mutant.__name__, "quick", fail_fast=True)
    first = result.first_failure()
    assert result.verdict != "CERTIFIED", f"{mutant.__name__} ({mutant.models}) was certified"
    assert result.verdict in mutant.expected, (
        f"{mutant.__name__}: verdict {result.verdict}, expected one of {mutant.expected}; first failure: "
        f"{first.case}/{first.check}: {first.result.message}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("variant", VALID, ids=lambda c: c.__name__)
def test_valid_variant_certified(variant):
    result = run_suite(variant(), variant.__name__, "quick")
    bad = "\n".join(f"{r.case}/{r.check}: {r.result.message}" for r in result.failed)
    assert result.verdict in variant.expected, f"{variant.__name__}: {result.verdict}\n{bad}"
    assert all(
        r.passed for r in result.records if r.category in ("contract", "invariant", "exactness")
    ), bad
