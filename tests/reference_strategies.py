"""Hypothesis strategies for probability rows, shared by the reference tests.

They aim at the inputs that break implementations: one-hot rows, p == q, disjoint supports, zeros on
either side, probabilities below 1e-12, and large vocabularies.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import strategies as st

from exactspec.reference.sampling import inverse_cdf

KINDS = ("dense", "sparse", "one_hot", "tiny")


def _row(rng: np.random.Generator, vocab: int, kind: str) -> np.ndarray:
    if kind == "one_hot":
        row = np.zeros(vocab)
        row[rng.integers(vocab)] = 1.0
        return row
    weights = rng.dirichlet(np.full(vocab, 0.5))
    if kind == "sparse":
        weights[rng.random(vocab) < 0.5] = 0.0
        if weights.sum() == 0:
            weights[rng.integers(vocab)] = 1.0
    if kind == "tiny":
        weights[rng.integers(vocab)] = 1e-13 * weights.sum()
    return weights / weights.sum()


@st.composite
def round_pairs(draw, max_vocab: int = 6, max_k: int = 3, large_vocab: bool = False):
    """(target_probs (k+1, V), draft_probs (k, V)) with edge-case relations between p and q."""
    vocab = (
        draw(st.sampled_from([30_000, 50_000])) if large_vocab else draw(st.integers(1, max_vocab))
    )
    k = draw(st.integers(1, max_k))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    relation = draw(
        st.sampled_from(["independent", "equal", "disjoint", "draft_zero", "target_zero"])
    )
    target = np.stack([_row(rng, vocab, draw(st.sampled_from(KINDS))) for _ in range(k + 1)])
    draft = np.stack([_row(rng, vocab, draw(st.sampled_from(KINDS))) for _ in range(k)])
    if relation == "equal":
        draft = target[:k].copy()
    elif relation == "disjoint" and vocab >= 2:
        split = vocab // 2
        target[:, :split] = 0
        target[:, split:] += 1e-3
        draft[:, split:] = 0
        draft[:, :split] += 1e-3
    elif relation == "draft_zero":
        draft[:, : max(1, vocab // 3)] = 0
        draft[:, -1] += 1e-3
    elif relation == "target_zero":
        target[:, : max(1, vocab // 3)] = 0
        target[:, -1] += 1e-3
    target /= target.sum(axis=1, keepdims=True)
    draft /= draft.sum(axis=1, keepdims=True)
    return target, draft


@st.composite
def rational_pairs(draw, max_vocab: int = 4, max_k: int = 3):
    """Exact rational (target_rows, draft_rows) as lists of Fraction rows summing to exactly 1."""
    vocab = draw(st.integers(1, max_vocab))
    k = draw(st.integers(1, max_k))

    def row():
        weights = draw(st.lists(st.integers(0, 6), min_size=vocab, max_size=vocab).filter(any))
        total = sum(weights)
        return [Fraction(w, total) for w in weights]

    return [row() for _ in range(k + 1)], [row() for _ in range(k)]


def draw_drafts(rng: np.random.Generator, draft: np.ndarray) -> np.ndarray:
    """One draft token per row of `draft` (k, V) or (B, k, V), drawn from that row."""
    return inverse_cdf(draft, rng.random(draft.shape[:-1]))
