"""The rule and tree levels' diagnosis (`conformance.rule.mechanism`, `tree.mechanism`): where the draft's law is
known, a NOT_EXACT names the mutant of the zoo whose outcomes fit the candidate's best; the exact rule names none."""

from __future__ import annotations

import pytest

from exactspec.conformance.core.driver import run_level
from exactspec.conformance.rule.cases import SUITE_CASES
from exactspec.conformance.rule.harness import Harness
from exactspec.conformance.rule.mechanism import name_mechanism
from exactspec.conformance.rule.mutants import zoo

CASE = next(c for c in SUITE_CASES if c.name == "rows_differ_k3")


@pytest.mark.parametrize(
    "mutant",
    [zoo.SharedCoin, zoo.ResidualFromP, zoo.BonusFromDraftRow, zoo.DraftTemperatureMismatch],
)
def test_a_mutant_is_named_as_its_own_mechanism(mutant):
    entry = name_mechanism(Harness(mutant(), "candidate"), CASE)
    assert mutant.__name__ in [entry["named"], *entry["tied"]], entry["ranking"]
    assert entry["ranking"][0]["gain_nats"] > 50


def test_the_exact_rule_names_nothing():
    assert name_mechanism(Harness(zoo.Rule(), "candidate"), CASE)["named"] is None


def test_a_not_exact_rule_report_carries_the_diagnosis_and_a_certified_one_does_not():
    bad = run_level("rule", zoo.ResidualFromP(), "ResidualFromP", profile="quick", cases=[CASE])
    assert (
        bad.verdict == "NOT_EXACT"
        and bad.extra["diagnosis"]["mechanism"]["family"] == "ResidualFromP"
    )
    good = run_level("rule", zoo.Rule(), "Rule", profile="quick", cases=[CASE])
    assert good.verdict != "NOT_EXACT" and "diagnosis" not in good.extra


def test_a_tree_mutant_is_named_in_its_certificate(tmp_path):
    from exactspec.conformance.tree.mutants import ZOO as TREE_ZOO
    from exactspec.conformance.tree.report import write_tree_report

    spec = next(s for s in TREE_ZOO if s.name == "wrong_parent_row")
    result = run_level("tree", spec.make(), spec.name, profile="quick")
    assert (
        result.verdict == "NOT_EXACT"
        and result.extra["diagnosis"]["mechanism"]["family"] == "wrong_parent_row"
    )
    write_tree_report(result, tmp_path)
    assert "**Mechanism:** wrong_parent_row" in (tmp_path / "CERTIFICATE.md").read_text()
