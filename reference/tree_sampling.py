"""Drawing draft trees: a shape (parent array) and a row model give DraftTrees with their drafted tokens.

The children of a context are drawn from its draft row q, i.i.d. (`replacement`) or without replacement
(child j from q with the earlier siblings' tokens removed and renormalised, `without_token`). Many trees
are drawn at once, node by node across the trees, so the suite can draw tens of thousands per case.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .sampling import inverse_cdf
from .tree_models import ContextRows
from .trees import DraftTree, children_lists
from .validation import check_int_array, check_rng

#: Trees are built in chunks of at most this many float64 row entries (target and draft rows together).
CHUNK_ELEMENTS = 1 << 22


def without_token(q: np.ndarray, token: int) -> np.ndarray:
    """q with `token` removed and renormalised: the law the next sibling is drawn from without replacement."""
    out = np.array(q, dtype=np.float64)
    out[token] = 0.0
    mass = out.sum()
    return out / mass if mass > 0 else out


def check_shape(parent: Any) -> np.ndarray:
    """A tree shape: parent array with parent[0] = -1 and 0 <= parent[i] < i (a DraftTree's `parent`)."""
    array = check_int_array(parent, "parent", lo=-1)
    if array.size < 1 or array[0] != -1:
        raise ValueError("parent must start with -1 (context 0 is the root)")
    if array.size > 1 and ((array[1:] < 0) | (array[1:] >= np.arange(1, array.size))).any():
        raise ValueError(f"parent must satisfy 0 <= parent[i] < i for i >= 1, got {array.tolist()}")
    return array


def shape_from_branching(branching: list[int]) -> np.ndarray:
    """The full tree with branching[d] children under every node of depth d (breadth-first numbering)."""
    parent, level = [-1], [0]
    for width in branching:
        if not isinstance(width, (int, np.integer)) or width < 1:
            raise ValueError(f"branching must hold ints >= 1, got {branching!r}")
        nxt = []
        for node in level:
            for _ in range(int(width)):
                parent.append(node)
                nxt.append(len(parent) - 1)
        level = nxt
    return np.asarray(parent, dtype=np.int64)


def _draw_children(
    q_rows: np.ndarray, count: int, replacement: bool, rng: np.random.Generator
) -> np.ndarray:
    """(n, count) children tokens, row r drawn from q_rows[r] (without replacement: sequentially, removing)."""
    n = q_rows.shape[0]
    if replacement:
        uniforms = rng.random((count, n))
        return np.stack([inverse_cdf(q_rows, uniforms[j]) for j in range(count)], axis=1)
    law, out, rows = q_rows.copy(), np.empty((n, count), dtype=np.int64), np.arange(n)
    for j in range(count):
        mass = law.sum(axis=1)
        if (mass <= 0).any():
            raise ValueError(
                "model: the draft row has fewer positive tokens than the node has children "
                "(replacement=False needs min_support >= the widest node)"
            )
        out[:, j] = inverse_cdf(law / mass[:, None], rng.random(n))
        law[rows, out[:, j]] = 0.0
    return out


class _Paths:
    """Distinct contexts (token paths) seen while drawing, with their ids."""

    def __init__(self) -> None:
        self.paths: list[tuple[int, ...]] = [()]
        self.index: dict[tuple[int, ...], int] = {(): 0}

    def extend(self, parent_ids: np.ndarray, tokens: np.ndarray, vocab: int) -> np.ndarray:
        keys, inverse = np.unique(parent_ids * vocab + tokens, return_inverse=True)
        ids = []
        for key in keys.tolist():
            path = self.paths[key // vocab] + (key % vocab,)
            if path not in self.index:
                self.index[path] = len(self.paths)
                self.paths.append(path)
            ids.append(self.index[path])
        return np.asarray(ids, dtype=np.int64)[inverse.ravel()]


def _draw_chunk(
    shape: np.ndarray, model: ContextRows, replacement: bool, rng: np.random.Generator, n: int
) -> list[DraftTree]:
    size, vocab, children = shape.size, model.vocab_size, children_lists(shape)
    tokens, path_id, paths = (
        np.full((n, size), -1, dtype=np.int64),
        np.zeros((n, size), dtype=np.int64),
        _Paths(),
    )
    for node in range(size):
        if node > 0:
            path_id[:, node] = paths.extend(path_id[:, shape[node]], tokens[:, node], vocab)
        if children[node]:
            ids, inverse = np.unique(path_id[:, node], return_inverse=True)
            q_rows = np.stack([model.rows(paths.paths[i])[1] for i in ids.tolist()])[
                inverse.ravel()
            ]
            tokens[:, children[node]] = _draw_children(
                q_rows, len(children[node]), replacement, rng
            )
    p_table = np.stack([model.rows(path)[0] for path in paths.paths])
    q_table = np.stack([model.rows(path)[1] for path in paths.paths])
    # a leaf's draft row is unused: a copy of p
    leaves = np.array([not kids for kids in children])[None, :, None]
    target = p_table[path_id]
    return DraftTree.from_checked_batch(
        shape, tokens, target, np.where(leaves, target, q_table[path_id]), replacement
    )


def sample_trees(
    parent: Any, model: ContextRows, replacement: bool, rng: np.random.Generator, n: int
) -> list[DraftTree]:
    """n independent DraftTrees of the shape `parent`: children of each context drawn from q(context)
    (i.i.d., or without replacement), every context's rows from `model`."""
    check_rng(rng)
    shape = check_shape(parent)
    if not isinstance(model, ContextRows):
        raise ValueError(f"model must be a ContextRows, got {type(model).__name__}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be an int >= 0, got {n!r}")
    chunk = max(1, min(4096, CHUNK_ELEMENTS // (2 * shape.size * model.vocab_size)))
    trees: list[DraftTree] = []
    for start in range(0, int(n), chunk):
        trees += _draw_chunk(shape, model, bool(replacement), rng, min(chunk, int(n) - start))
    return trees


def sample_tree(
    parent: Any, model: ContextRows, replacement: bool, rng: np.random.Generator
) -> DraftTree:
    """One DraftTree of the shape `parent` (see `sample_trees`)."""
    return sample_trees(parent, model, replacement, rng, 1)[0]
