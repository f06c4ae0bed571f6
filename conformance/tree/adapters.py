"""The oracle as a tree-level adapter: `--exactspec-impl exactspec.conformance.tree.adapters:TreeReference`."""

from __future__ import annotations

import numpy as np

from ...reference.tree_rules import verify_tree, verify_tree_batch
from ...reference.trees import DraftTree


class TreeReference:
    """exactspec's NumPy multi-round tree rule (`reference.tree_rules`), per tree and batched."""

    def verify_tree(self, tree: DraftTree, rng: np.random.Generator) -> list[int]:
        return verify_tree(tree, rng)

    def verify_tree_batch(
        self, trees: list[DraftTree], rng: np.random.Generator
    ) -> list[list[int]]:
        return verify_tree_batch(trees, rng)


#: The tree-level implementations certified when no --exactspec-impl offers verify_tree.
DEFAULT_TREE_IMPLS = ("exactspec.conformance.tree.adapters:TreeReference",)
