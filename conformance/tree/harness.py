"""Running a tree-level implementation: the suite draws the trees, the implementation verifies them.

Every round the suite draws a fresh tree from the case (`reference.tree_sampling.sample_trees`, from the suite's
own stream seeded per case, so every implementation sees the same trees; drawn in chunks) and calls
`verify_tree(tree, rng)` -- or `verify_tree_batch(trees, rng)` when offered -- with a separate Generator, the
implementation's only allowed randomness. Every output is checked against the contract first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..loader import call_implementation
from ..core.contract import token_ids
from .cases import TreeCase
from ...errors import ContractViolation
from ...reference.tree_sampling import sample_trees
from ...reference.trees import DraftTree

TREE_SIGNATURE = "verify_tree(tree, rng)"
BATCH_ROUNDS = 4096
#: Trees are drawn, verified and dropped in chunks of at most this many row entries (memory stays bounded).
CHUNK_ELEMENTS = 1 << 22


@dataclass
class TreeRounds:
    """n rounds of one implementation on one case: the trees' drafted tokens, the emitted tokens padded
    with -1, and counts (the trees' rows are the case model's, so they are not kept)."""

    case: TreeCase
    # (n, N+1): the drafted tokens of each round's tree (shape: case.parent)
    tree_tokens: np.ndarray
    tokens: np.ndarray  # (n, max_length)
    counts: np.ndarray  # (n,)
    seconds: float

    @property
    def n(self) -> int:
        return int(self.counts.size)


def offers_tree(obj: Any) -> bool:
    return callable(getattr(obj, "verify_tree", None))


def chunk_rounds(case: TreeCase) -> int:
    return max(1, min(BATCH_ROUNDS, CHUNK_ELEMENTS // (2 * case.parent.size * case.V)))


def draw_trees(case: TreeCase, n: int, seed: int) -> list[DraftTree]:
    """n trees of `case` from the suite's stream [seed, 1] (what `TreeHarness.run` hands out, chunk by chunk)."""
    rng = np.random.default_rng([int(seed), 1])
    return sample_trees(case.parent, case.model, case.replacement, rng, n)


def checked_output(out: Any, case: TreeCase) -> list[int]:
    """The emitted tokens as ints, or ContractViolation: 1..depth+1 integer ids in [0, V)."""
    arr = token_ids(out, "verify_tree", case.max_length, "the tree's depth + 1")
    if arr.min() < 0 or arr.max() >= case.V:
        raise ContractViolation(
            f"verify_tree returned a token id outside [0, {case.V}): {arr.tolist()}"
        )
    return arr.tolist()


class TreeHarness:
    """One implementation offering verify_tree (and optionally verify_tree_batch)."""

    def __init__(self, impl: Any, name: str):
        if not offers_tree(impl):
            raise ValueError(f"impl {name!r} has no callable {TREE_SIGNATURE}")
        self.impl, self.name = impl, name
        self.has_batch = callable(getattr(impl, "verify_tree_batch", None))

    def _outputs(self, trees: list[DraftTree], rng: np.random.Generator, single: bool) -> list[Any]:
        if self.has_batch and not single:
            out: list[Any] = []
            for start in range(0, len(trees), BATCH_ROUNDS):
                chunk = trees[start : start + BATCH_ROUNDS]
                got = call_implementation(self.impl.verify_tree_batch, chunk, rng)
                if not hasattr(got, "__len__") or len(got) != len(chunk):
                    raise ContractViolation(
                        f"verify_tree_batch must return one output per tree ({len(chunk)}), "
                        f"got {type(got).__name__} of length {len(got) if hasattr(got, '__len__') else '?'}"
                    )
                out += list(got)
            return out
        return [call_implementation(self.impl.verify_tree, tree, rng) for tree in trees]

    def run(
        self,
        case: TreeCase,
        n: int,
        seed: int,
        rng_factory: Callable[[int], np.random.Generator] | None = None,
        single: bool = False,
    ) -> TreeRounds:
        """n rounds on fresh trees of `case` (stream [seed, 1]); the implementation's Generator is seeded [seed, 2]."""
        tree_rng = np.random.default_rng([int(seed), 1])
        rng = rng_factory(seed) if rng_factory else np.random.default_rng([int(seed), 2])
        tree_tokens = np.empty((n, case.parent.size), dtype=np.int64)
        tokens = np.full((n, case.max_length), -1, dtype=np.int64)
        counts = np.empty(n, dtype=np.int64)
        seconds, step = 0.0, chunk_rounds(case)
        for start in range(0, n, step):
            trees = sample_trees(
                case.parent, case.model, case.replacement, tree_rng, min(step, n - start)
            )
            began = time.perf_counter()
            outputs = self._outputs(trees, rng, single)
            seconds += time.perf_counter() - began
            for offset, (tree, out) in enumerate(zip(trees, outputs)):
                emitted = checked_output(out, case)
                r = start + offset
                tree_tokens[r], tokens[r, : len(emitted)], counts[r] = (
                    tree.tokens,
                    emitted,
                    len(emitted),
                )
        return TreeRounds(case, tree_tokens, tokens, counts, seconds)
