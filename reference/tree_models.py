"""Target and draft rows as functions of the context, so draft trees can be drawn and their laws enumerated.

A tree round is only meaningful when the rows depend on the context (the path of tokens from the root):
two siblings with the same token share their context, and a node's children were drawn from the draft
at *that* node's context. `ContextRows` makes every row from small integer weights drawn by a generator
seeded with (seed, depth[, path]), so the same row comes out as float64 or as exact `Fraction`s, and the
curated cases of the tree level are a few numbers of data each.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

DRAFT_KINDS = ("independent", "equal", "near")
DEPENDS_ON = ("path", "depth")


@dataclass(frozen=True, kw_only=True)
class ContextRows:
    """Rows p(context) and q(context) from integer weights.

    - `by`: "path" (every context its own rows) or "depth" (rows depend on the depth only, as the chain's
      per-position rows do);
    - `draft`: "independent" weights, "equal" (q == p) or "near" (q = p up to a 1-2% perturbation);
    - `p_zeros` / `q_zeros`: chance that a token's weight is 0 (at least one token of p stays positive, and
      at least `min_support` tokens of q: drawing m children without replacement needs m of them).
    """

    vocab_size: int
    seed: int
    by: str = "path"
    draft: str = "independent"
    p_zeros: float = 0.0
    q_zeros: float = 0.0
    min_support: int = 1
    scale: int = 8

    def __post_init__(self) -> None:
        if not isinstance(self.vocab_size, int) or self.vocab_size < 1:
            raise ValueError(f"vocab_size must be an int >= 1, got {self.vocab_size!r}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {self.seed!r}")
        if self.by not in DEPENDS_ON:
            raise ValueError(f"by must be one of {DEPENDS_ON}, got {self.by!r}")
        if self.draft not in DRAFT_KINDS:
            raise ValueError(f"draft must be one of {DRAFT_KINDS}, got {self.draft!r}")
        for name in ("p_zeros", "q_zeros"):
            if not 0.0 <= float(getattr(self, name)) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")
        if not isinstance(self.min_support, int) or not 1 <= self.min_support <= self.vocab_size:
            raise ValueError(
                f"min_support must be an int in [1, vocab_size={self.vocab_size}], got {self.min_support!r}"
            )
        if not isinstance(self.scale, int) or self.scale < 1:
            raise ValueError(f"scale must be an int >= 1, got {self.scale!r}")

    def context_key(self, path: tuple[int, ...]) -> tuple[int, ...]:
        """What the rows depend on: the path itself, or (by="depth") only its length."""
        return (0,) * len(path) if self.by == "depth" else tuple(int(t) for t in path)

    def weights(self, path: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Integer weights (p_w, q_w) of the context `path` (tuple of token ids from the root)."""
        return _weights(self, self.context_key(path))

    def rows(self, path: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """float64 rows (p, q) at the context `path` (read-only, cached)."""
        return _float_rows(self, self.context_key(path))

    def rational_rows(self, path: tuple[int, ...]) -> tuple[list[Fraction], list[Fraction]]:
        """Exact rows (p, q) at `path`: the same weights as `rows`, as Fractions summing to exactly 1."""
        p_w, q_w = self.weights(path)
        p_total, q_total = int(p_w.sum()), int(q_w.sum())
        return [Fraction(int(w), p_total) for w in p_w], [Fraction(int(w), q_total) for w in q_w]


def _keep_positive(weights: np.ndarray, at_least: int, rng: np.random.Generator) -> np.ndarray:
    """Give weight 1 to zero-weight tokens (random order) until `at_least` tokens are positive."""
    missing = at_least - int((weights > 0).sum())
    if missing > 0:
        zeros = rng.permutation(np.flatnonzero(weights == 0))[:missing]
        weights[zeros] = 1
    return weights


@lru_cache(maxsize=65536)
def _weights(model: ContextRows, path: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    key = [model.seed, len(path)] + (list(path) if model.by == "path" else [])
    rng = np.random.default_rng(key)
    size = model.vocab_size
    p_w = rng.integers(1, model.scale + 1, size)
    p_w[rng.random(size) < model.p_zeros] = 0
    p_w = _keep_positive(p_w, 1, rng)
    if model.draft == "equal":
        q_w = p_w.copy()
    elif model.draft == "near":
        q_w = 50 * p_w + rng.integers(0, 3, size)
    else:
        q_w = rng.integers(1, model.scale + 1, size)
    q_w[rng.random(size) < model.q_zeros] = 0
    q_w = _keep_positive(q_w, model.min_support, rng)
    if model.draft == "near":
        p_w = 50 * p_w
    p_w.setflags(write=False)
    q_w.setflags(write=False)
    return p_w, q_w


@lru_cache(maxsize=65536)
def _float_rows(model: ContextRows, path: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    p_w, q_w = _weights(model, path)
    p, q = p_w / p_w.sum(), q_w / q_w.sum()
    p.setflags(write=False)
    q.setflags(write=False)
    return p, q
