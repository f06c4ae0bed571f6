"""One tree-verification round, sampled (the tree sampler lives in `tree_sampling`, re-exported here).

The rule (multi-round rejection; SpecInfer, Miao et al. 2024; without replacement: recursive rejection
sampling, Jeon et al. 2024): at context c, with p := p_c and q := q_c, try the children x_1..x_m of c in
order. Accept x_j with probability min(1, p(x_j)/q(x_j)) and descend into it (fresh rows). After a
rejection p := norm(max(0, p - q)); without replacement also q := q with x_j removed, renormalised (the
law the next sibling was drawn from). If every child is rejected, emit one token from the last p; at a
leaf, emit the bonus token from p_c. The chain (one child per node) is the standard rule.

Randomness contract: the only source is the Generator passed in; one uniform `rng.random()` per child
tried, in order, then one uniform for the final token (inverse CDF).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .laws import unchecked_residual
from .sampling import sample_token
from .tree_sampling import (
    check_shape,
    sample_tree,
    sample_trees,
    shape_from_branching,
    without_token,
)
from .trees import DraftTree
from .validation import check_rng

__all__ = [
    "STANDARD",
    "SiblingRule",
    "check_shape",
    "sample_tree",
    "sample_trees",
    "shape_from_branching",
    "verify_tree",
    "verify_tree_batch",
    "walk_tree",
    "without_token",
]

Row = np.ndarray


def _standard_accept(p: Row, q: Row, x: int) -> float:
    return min(1.0, p[x] / q[x]) if q[x] > 0 else 0.0


def _standard_update(p: Row, q: Row, x: int, replacement: bool) -> tuple[Row, Row]:
    return unchecked_residual(p, q), (q if replacement else without_token(q, x))


@dataclass(frozen=True)
class SiblingRule:
    """How one sibling is judged: `accept(p, q, x)` -> probability; `update(p, q, x, replacement)` -> the
    (p, q) the next sibling is judged with. The walk is shared by the oracle and the mutant zoo."""

    name: str
    accept: Callable[[Row, Row, int], float] = _standard_accept
    update: Callable[[Row, Row, int, bool], tuple[Row, Row]] = _standard_update


STANDARD = SiblingRule("standard")


def _check_tree(tree: Any) -> DraftTree:
    if not isinstance(tree, DraftTree):
        raise ValueError(f"tree must be a DraftTree, got {type(tree).__name__}")
    return tree


def walk_tree(
    tree: DraftTree,
    rng: np.random.Generator,
    rule: SiblingRule = STANDARD,
    *,
    replacement: bool | None = None,
    shared_coin: bool = False,
    target_row: Callable[[DraftTree, int], Row] | None = None,
) -> list[int]:
    """One round of `rule` on `tree`; the knobs exist for the mutant zoo (the oracle uses the defaults):
    `replacement` overrides the tree's, `shared_coin` draws one uniform per node instead of per child,
    `target_row(tree, node)` replaces the target row of `node`."""
    replace = tree.replacement if replacement is None else replacement
    row = target_row or (lambda t, c: t.target_probs[c])
    node, emitted = 0, []
    while True:
        p, q = row(tree, node), tree.draft_probs[node]
        coin = rng.random() if shared_coin else None
        accepted = None
        for child in tree.children(node):
            x = int(tree.tokens[child])
            u = rng.random() if coin is None else coin
            if u < rule.accept(p, q, x):
                accepted = int(child)
                break
            p, q = rule.update(p, q, x, replace)
        if accepted is None:
            emitted.append(sample_token(p, rng))
            return emitted
        emitted.append(int(tree.tokens[accepted]))
        node = accepted


def verify_tree(tree: DraftTree, rng: np.random.Generator) -> list[int]:
    """The exact tree rule, one round: the accepted path's tokens then one more token (length depth + 1)."""
    check_rng(rng)
    return walk_tree(_check_tree(tree), rng)


def verify_tree_batch(trees: list[DraftTree], rng: np.random.Generator) -> list[list[int]]:
    """`verify_tree` on each tree in order, with the same Generator (the batched form of the contract)."""
    check_rng(rng)
    if not isinstance(trees, (list, tuple)):
        raise ValueError(f"trees must be a list of DraftTree, got {type(trees).__name__}")
    return [walk_tree(_check_tree(tree), rng) for tree in trees]
