"""Tree mutants: the oracle's walk with one real tree-verification bug each, and what the suite must say.

Each entry is an adapter offering `verify_tree(tree, rng)`, built on the oracle's one walk
(`reference.tree_rules.walk_tree`) with one knob turned, and states the verdict the tree level must give
(`expected`): NOT_EXACT for a rule whose output law differs from the target's (`TREE_MUTANTS`), EXACT_NOT_STANDARD
for an exact rule that is not the multi-round rule (EAGLE's q = 1: a valid variant, `TREE_VALID_VARIANTS`, never
counted as a mutant). `ZOO` holds their `core.mutants.MutantSpec`s, then the oracle's (`TreeReference`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ...outcomes import Verdict
from ...reference.tree_rules import STANDARD, SiblingRule, walk_tree, without_token
from ...reference.trees import DraftTree
from ..core.mutants import MutantSpec, constant, valid_variant, zoo
from ..core.mutants import mutant as mutant_spec
from .adapters import TreeReference

#: Medusa's defaults for typical acceptance (`posterior_threshold`, `posterior_alpha`).
MEDUSA_EPSILON, MEDUSA_DELTA = 0.09, 0.3


def _stale_update(p, q, x, replacement):
    """Bug: the residual is not updated between siblings (every sibling judged against the same p)."""
    return p, q


def _q_one_accept(p, q, x):
    """EAGLE's evaluate_posterior: q treated as 1, so x is accepted w.p. p(x)."""
    return float(p[x])


def _q_one_update(p, q, x, replacement):
    """...and after a rejection p(x) := 0, renormalised (exact for any drafts; not the standard rule)."""
    return without_token(p, x), q


def typical_threshold(p: np.ndarray) -> float:
    """Medusa's typical-acceptance threshold min(epsilon, delta * exp(-H(p)))."""
    positive = p[p > 0]
    entropy = float(-(positive * np.log(positive)).sum())
    return min(MEDUSA_EPSILON, MEDUSA_DELTA * float(np.exp(-entropy)))


def _typical_accept(p, q, x):
    """Medusa's typical acceptance: accept iff p(x) exceeds the threshold (no coin, not exact by design)."""
    return 1.0 if p[x] > typical_threshold(p) else 0.0


def _previous_index_row(tree: DraftTree, node: int) -> np.ndarray:
    """Bug: the target row of node i taken at flattened index i - 1 (right on a chain's first node only)."""
    return tree.target_probs[node - 1] if node >= 2 else tree.target_probs[node]


@dataclass(frozen=True)
class TreeMutant:
    """An adapter with one knob of the oracle's walk turned; `expected` is the verdict the suite must reach."""

    name: str
    expected: str
    what: str
    rule: SiblingRule = STANDARD
    replacement: bool | None = None
    shared_coin: bool = False
    target_row: Callable[[DraftTree, int], np.ndarray] | None = None

    def verify_tree(self, tree: DraftTree, rng: np.random.Generator) -> list[int]:
        return walk_tree(
            tree,
            rng,
            self.rule,
            replacement=self.replacement,
            shared_coin=self.shared_coin,
            target_row=self.target_row,
        )


TREE_MUTANTS: tuple[TreeMutant, ...] = (
    TreeMutant(
        "stale_residual",
        Verdict.NOT_EXACT,
        "the residual is not updated between siblings",
        rule=SiblingRule("stale_residual", update=_stale_update),
    ),
    TreeMutant(
        "wor_as_iid",
        Verdict.NOT_EXACT,
        "without-replacement drafts verified with the with-replacement rule",
        replacement=True,
    ),
    TreeMutant(
        "typical_acceptance",
        Verdict.NOT_EXACT,
        f"Medusa's typical acceptance (epsilon {MEDUSA_EPSILON}, delta {MEDUSA_DELTA}), not exact by design",
        rule=SiblingRule("typical", accept=_typical_accept, update=_stale_update),
    ),
    TreeMutant(
        "shared_coin",
        Verdict.NOT_EXACT,
        "the siblings of a node share one uniform",
        shared_coin=True,
    ),
    TreeMutant(
        "wrong_parent_row",
        Verdict.NOT_EXACT,
        "a deep node's target row read at the previous flattened index",
        target_row=_previous_index_row,
    ),
)


#: Exact rules that are not the multi-round rule: valid variants (EXACT_NOT_STANDARD), not mutants.
TREE_VALID_VARIANTS: tuple[TreeMutant, ...] = (
    TreeMutant(
        "q_as_one",
        Verdict.EXACT_NOT_STANDARD,
        "EAGLE's evaluate_posterior: q treated as 1 (exact, accepts less)",
        rule=SiblingRule("q_as_one", accept=_q_one_accept, update=_q_one_update),
    ),
)


#: The tree level's zoo (what `exactspec kill-table --level tree` runs): the mutants, then the valid variants.
ZOO: tuple[MutantSpec, ...] = zoo(
    [mutant_spec(m.name, m.what, constant(m), (m.expected,)) for m in TREE_MUTANTS]
    + [
        valid_variant(
            m.name, "Valid but not the standard rule: " + m.what, constant(m), (m.expected,)
        )
        for m in TREE_VALID_VARIANTS
    ]
    + [
        valid_variant(
            "TreeReference", "Valid: exactspec's NumPy multi-round tree rule", TreeReference
        )
    ]
)


def mutant(name: str) -> TreeMutant:
    """The mutant or valid variant called `name` (a TreeMutant record)."""
    for candidate in TREE_MUTANTS + TREE_VALID_VARIANTS:
        if candidate.name == name:
            return candidate
    raise ValueError(
        f"name must be one of {[m.name for m in TREE_MUTANTS + TREE_VALID_VARIANTS]}, got {name!r}"
    )


def expected_verdicts() -> dict[str, Any]:
    return {m.name: m.expected for m in TREE_MUTANTS + TREE_VALID_VARIANTS}
