"""Tree level of the conformance suite: one round of tree verification (`verify_tree(tree, rng)`).

    from exactspec.conformance.tree import run_tree_suite
    result = run_tree_suite(my_verifier, "mine", profile="quick")   # result.verdict

Cases are data (`conformance/case_data/trees.json`), the oracle is `exactspec.reference.tree_rules` /
`tree_laws`, the checks are declared in `core.registry.TREE_CHECKS`; see conformance/CONTRACT.md (tree level).
"""

from __future__ import annotations

from .adapters import DEFAULT_TREE_IMPLS, TreeReference
from .cases import QUICK_TREE_CASES, TREE_CASES, TreeCase, cases_for, load_tree_cases
from .harness import TreeHarness, offers_tree
from .mutants import TREE_MUTANTS, TreeMutant
from .suite import run_tree_suite

__all__ = ["DEFAULT_TREE_IMPLS", "QUICK_TREE_CASES", "TREE_CASES", "TREE_MUTANTS", "TreeCase", "TreeHarness",
           "TreeMutant", "TreeReference", "cases_for", "load_tree_cases", "offers_tree", "run_tree_suite"]
