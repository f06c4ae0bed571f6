"""Meta-test of the tree level (quick profile): certifies the oracle and the torch tree verifier, rejects every non-exact tree mutant and
labels EAGLE's q = 1 rule EXACT_NOT_STANDARD. The suite's own false-fail rate at quick is <= 1e-4 per run."""

import pytest

from exactspec.conformance.core.registry import budget_for
from exactspec.conformance.core.driver import run_level
from exactspec.conformance.tree.adapters import TreeReference
from exactspec.conformance.tree.cases import QUICK_TREE_CASES, TREE_CASES
from exactspec.conformance.tree.mutants import TREE_MUTANTS, mutant


def run_tree_suite(impl, name, profile, cases=None, fail_fast=False):
    return run_level("tree", impl, name, profile=profile, cases=cases, fail_fast=fail_fast)


EXACT_NOT_STANDARD_CASES = ["wide_w4_d1", "binary_d2"]


def test_quick_profile_certifies_the_oracle():
    result = run_tree_suite(TreeReference(), "tree-oracle", "quick")
    assert result.verdict == "CERTIFIED", [r.result.message for r in result.records if not r.passed]
    assert (
        result.budget["within_budget"]
        and result.budget["n_checks"] == budget_for("tree", "quick", QUICK_TREE_CASES).n_checks
    )
    assert {r.check for r in result.records} >= {
        "invariants",
        "determinism",
        "position_1",
        "path_law",
        "tokens_per_round",
    }


@pytest.mark.parametrize(
    "bug", TREE_MUTANTS, ids=lambda m: m.name
)  # every one NOT_EXACT (q = 1 is a valid variant)
def test_quick_profile_rejects_every_non_exact_tree_mutant(bug):
    result = run_tree_suite(bug, bug.name, "quick", fail_fast=True)
    assert result.verdict == "NOT_EXACT", [r.result.message for r in result.records if not r.passed]


def test_quick_profile_certifies_the_torch_tree_verifier():
    pytest.importorskip("torch")
    from exactspec.conformance.adapters.gpu_tree import TreeTorchCPU

    result = run_tree_suite(TreeTorchCPU(), "gpu_impl-tree", "quick")
    assert result.verdict == "CERTIFIED", [r.result.message for r in result.records if not r.passed]


def test_q_as_one_is_exact_but_not_standard():
    cases = [c for c in QUICK_TREE_CASES if c.name in EXACT_NOT_STANDARD_CASES]
    result = run_tree_suite(mutant("q_as_one"), "q_as_one", "quick", cases=cases)
    assert result.verdict == "EXACT_NOT_STANDARD", [
        r.result.message for r in result.records if not r.passed
    ]
    assert any(r.result.details.get("confirmatory") for r in result.records)


def test_curated_cases_cover_the_issue():
    widths = {c.summary()["max_width"] for c in TREE_CASES}
    depths = {c.summary()["depth"] for c in TREE_CASES}
    assert widths >= {1, 2, 3, 4} and depths >= {1, 2, 3, 5}
    assert {c.model.draft for c in TREE_CASES} == {"independent", "equal", "near"}
    assert any(not c.replacement for c in QUICK_TREE_CASES) and any(c.V > 1000 for c in TREE_CASES)
    assert all(c.why for c in TREE_CASES)


class _TreeOnly:
    def verify_tree(self, tree, rng):
        return TreeReference().verify_tree(tree, rng)


class _TooLong:
    def verify_tree(self, tree, rng):
        return [0] * (tree.max_depth + 2)


def test_loader_and_certify_pick_the_tree_level(tmp_path):
    import json

    from exactspec.conformance.certify_command import main
    from exactspec.conformance.loader import load_adapter
    from exactspec.errors import AdapterLoadError

    assert load_adapter(_TreeOnly()).level == "tree"
    with pytest.raises(AdapterLoadError, match="tree level"):
        load_adapter(object.__new__(type("Rule", (), {"verify": lambda self: None})), level="tree")
    assert (
        main(
            [
                "--impl",
                "exactspec.conformance.tree.adapters:TreeReference",
                "--level",
                "tree",
                "--profile",
                "quick",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    doc = json.loads((tmp_path / "certificate.json").read_text())
    assert (
        doc["level"] == "tree"
        and doc["verdict"] == "CERTIFIED"
        and doc["contract_version"] == "1.4"
    )


def test_malformed_output_is_a_contract_violation():
    result = run_tree_suite(_TooLong(), "too-long", "quick", cases=QUICK_TREE_CASES[:1])
    assert result.verdict == "CONTRACT_VIOLATION"
    assert "1..3 token ids" in result.records[0].result.message
