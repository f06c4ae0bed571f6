"""The draft tree of one tree-verification round: shape, draft tokens, and the rows at every context.

Layout (shared by the oracle, the tree level of the suite and the torch verifier): contexts are
numbered 0..N; context 0 is the root (the sequence so far) and context i >= 1 is the root extended by
the path to draft node i. `parent[i] < i` (parents before children); the children of a node are tried
in increasing node index. Row c of `target_probs` is the target's p after context c (for a leaf, the
bonus row); row c of `draft_probs` is the q that the children of c were drawn from (i.i.d. when
`replacement`, else without replacement). A chain of k drafts is the tree with parent[i] = i - 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .validation import as_prob_array, check_int_array


def _check_parent(parent: Any) -> np.ndarray:
    array = check_int_array(parent, "parent", lo=-1)
    if array.size < 1 or array[0] != -1:
        raise ValueError("parent must start with -1 (context 0 is the root)")
    nodes = np.arange(array.size)
    if array.size > 1 and ((array[1:] < 0) | (array[1:] >= nodes[1:])).any():
        bad = int(np.argwhere((array[1:] < 0) | (array[1:] >= nodes[1:]))[0, 0]) + 1
        raise ValueError(
            f"parent[{bad}] = {int(array[bad])} must be in [0, {bad}) (parents before children)"
        )
    return array


def _check_tokens(tokens: Any, size: int, vocab_size: int) -> np.ndarray:
    array = check_int_array(tokens, "tokens", lo=-1, hi=vocab_size)
    if array.size != size:
        raise ValueError(
            f"tokens must have length {size} (one per context, parent has {size}), got {array.size}"
        )
    if array[0] != -1:
        raise ValueError(f"tokens[0] must be -1 (the root has no draft token), got {int(array[0])}")
    if size > 1 and (array[1:] < 0).any():
        bad = int(np.argwhere(array[1:] < 0)[0, 0]) + 1
        raise ValueError(
            f"tokens[{bad}] = {int(array[bad])} must be a token id in [0, {vocab_size})"
        )
    return array


def children_lists(parent: np.ndarray) -> list[list[int]]:
    """The children of every context of a (checked) parent array, each list in increasing node index."""
    kids: list[list[int]] = [[] for _ in range(len(parent))]
    for node in range(1, len(parent)):
        kids[int(parent[node])].append(node)
    return kids


def _check_rows(rows: Any, name: str, size: int) -> np.ndarray:
    array = as_prob_array(rows, name, ndim=2)
    if array.shape[0] != size:
        raise ValueError(f"{name} must hold one row per context ({size}), got shape {array.shape}")
    return array


@dataclass(frozen=True, eq=False)
class DraftTree:
    """One round's draft tree; validated on construction (ValueError naming the field)."""

    parent: np.ndarray
    tokens: np.ndarray
    target_probs: np.ndarray
    draft_probs: np.ndarray
    replacement: bool = True
    # set in __post_init__
    _children: tuple[np.ndarray, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parent = _check_parent(self.parent)
        size = parent.size
        target = _check_rows(self.target_probs, "target_probs", size)
        draft = _check_rows(self.draft_probs, "draft_probs", size)
        if draft.shape[1] != target.shape[1]:
            raise ValueError(
                f"draft_probs and target_probs have mismatched vocabularies: {draft.shape[1]} vs {target.shape[1]}"
            )
        tokens = _check_tokens(self.tokens, size, target.shape[1])
        if not isinstance(self.replacement, (bool, np.bool_)):
            raise ValueError(f"replacement must be a bool, got {self.replacement!r}")
        for name, value in (
            ("parent", parent),
            ("tokens", tokens),
            ("target_probs", target),
            ("draft_probs", draft),
        ):
            value = value.copy()  # never freeze the caller's own array
            value.setflags(write=False)
            object.__setattr__(self, name, value)
        object.__setattr__(self, "replacement", bool(self.replacement))
        object.__setattr__(
            self, "_children", tuple(np.asarray(k, dtype=np.int64) for k in children_lists(parent))
        )
        self._check_draws()

    @classmethod
    def from_checked_batch(
        cls,
        parent: np.ndarray,
        tokens: np.ndarray,
        target_probs: np.ndarray,
        draft_probs: np.ndarray,
        replacement: bool,
    ) -> list["DraftTree"]:
        """Trees [parent, tokens[r], target_probs[r], draft_probs[r]] for every r, validated as one batch: the
        rows of the whole stack and every draft's probability checked at once (what __post_init__ checks per
        tree, vectorised), so a sampler can build tens of thousands of trees cheaply."""
        parent = _check_parent(parent)
        size, batch = parent.size, tokens.shape[0]
        target = as_prob_array(target_probs, "target_probs", ndim=3)
        draft = as_prob_array(draft_probs, "draft_probs", ndim=3)
        if target.shape != (batch, size, target.shape[2]) or draft.shape != target.shape:
            raise ValueError(
                f"target_probs and draft_probs must both be ({batch}, {size}, V), got {target.shape} "
                f"and {draft.shape}"
            )
        tokens = check_int_array(
            np.asarray(tokens).ravel(), "tokens", lo=-1, hi=target.shape[2]
        ).reshape(batch, size)
        if (tokens[:, 0] != -1).any() or (size > 1 and (tokens[:, 1:] < 0).any()):
            raise ValueError(
                "tokens: every tree must have -1 at the root and a token id at every node"
            )
        rows = np.arange(batch)[:, None]
        if size > 1 and (draft[rows, parent[None, 1:], tokens[:, 1:]] <= 0).any():
            raise ValueError(
                "tokens: a drafted token has draft probability 0 at its parent's context"
            )
        kids = tuple(np.asarray(k, dtype=np.int64) for k in children_lists(parent))
        parent.setflags(write=False)
        out = []
        for r in range(batch):
            tree = object.__new__(cls)
            for name, value in (
                ("tokens", tokens[r].copy()),
                ("target_probs", target[r].copy()),
                ("draft_probs", draft[r].copy()),
            ):
                value.setflags(write=False)
                object.__setattr__(tree, name, value)
            object.__setattr__(tree, "parent", parent)
            object.__setattr__(tree, "replacement", bool(replacement))
            object.__setattr__(tree, "_children", kids)
            if not tree.replacement:
                tree._check_draws()
            out.append(tree)
        return out

    def _check_draws(self) -> None:
        """Every draft token must be drawable from its parent's q; siblings distinct without replacement."""
        parents, drafted = self.parent[1:], self.tokens[1:]
        impossible = np.flatnonzero(self.draft_probs[parents, drafted] <= 0)
        if impossible.size:
            node = int(impossible[0]) + 1
            raise ValueError(
                f"tokens[{node}] = {int(self.tokens[node])} has draft probability 0 at its parent's context "
                f"{int(self.parent[node])}, so it cannot have been drawn from draft_probs"
            )
        if not self.replacement and parents.size > 1:
            order = np.lexsort((drafted, parents))
            repeated = (np.diff(parents[order]) == 0) & (np.diff(drafted[order]) == 0)
            if repeated.any():
                node = int(parents[order][np.flatnonzero(repeated)[0]])
                raise ValueError(
                    f"tokens: siblings under context {node} repeat a token ({self.tokens[self.children(node)].tolist()}), "
                    "impossible when drawn without replacement (replacement=False)"
                )

    @property
    def n_contexts(self) -> int:
        """N + 1: the root plus the N draft nodes."""
        return int(self.parent.size)

    @property
    def n_nodes(self) -> int:
        """N: the number of draft nodes (contexts other than the root)."""
        return self.n_contexts - 1

    @property
    def vocab_size(self) -> int:
        return int(self.target_probs.shape[1])

    def children(self, node: int) -> np.ndarray:
        """Children of `node` in the order they are tried (increasing node index)."""
        return self._children[node]

    def depths(self) -> np.ndarray:
        """Depth of every context (root 0); parents come first so one pass suffices."""
        depth = np.zeros(self.n_contexts, dtype=np.int64)
        for node in range(1, self.n_contexts):
            depth[node] = depth[self.parent[node]] + 1
        return depth

    @property
    def max_depth(self) -> int:
        """Length of the longest root-to-leaf path (a chain of k drafts has max_depth k)."""
        return int(self.depths().max())

    def is_leaf(self, node: int) -> bool:
        return self._children[node].size == 0

    def path_tokens(self, node: int) -> list[int]:
        """Draft tokens on the path root -> `node` (root excluded)."""
        path: list[int] = []
        while node > 0:
            path.append(int(self.tokens[node]))
            node = int(self.parent[node])
        return path[::-1]

    def is_chain(self) -> bool:
        """True for the one-child-per-node tree the chain contract describes."""
        return bool(np.array_equal(self.parent, np.arange(-1, self.n_contexts - 1)))


def chain_tree(target_probs: Any, draft_probs: Any, draft_tokens: Any) -> DraftTree:
    """The chain round (k+1, V), (k, V), (k,) as a DraftTree (leaf draft row: a copy of its target row)."""
    target = as_prob_array(target_probs, "target_probs", ndim=2)
    draft = as_prob_array(draft_probs, "draft_probs", ndim=2)
    if target.shape[0] != draft.shape[0] + 1:
        raise ValueError(
            f"target_probs must hold k+1 = {draft.shape[0] + 1} rows, got shape {target.shape}"
        )
    if draft.shape[1] != target.shape[1]:
        raise ValueError(
            f"draft_probs and target_probs have mismatched vocabularies: {draft.shape[1]} vs {target.shape[1]}"
        )
    k = draft.shape[0]
    tokens = check_int_array(draft_tokens, "draft_tokens", lo=0, hi=target.shape[1])
    if tokens.size != k:
        raise ValueError(f"draft_tokens must have length k = {k}, got {tokens.size}")
    return DraftTree(
        parent=np.arange(-1, k, dtype=np.int64),
        tokens=np.concatenate([[-1], tokens]).astype(np.int64),
        target_probs=target,
        draft_probs=np.concatenate([draft, target[-1:]], axis=0),
        replacement=True,
    )
