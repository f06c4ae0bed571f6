"""Inverse-CDF sampling, guarded: the one token sampler every NumPy part of exactspec uses.

Why a guard: a float cumulative sum can end below 1 (ten 0.1s sum to 0.9999999999999999) and
`u * total` can round up to the total, so a plain `searchsorted(cumsum, u)` can return the last id
even when that token has probability 0. Here the uniform is scaled by the row's own total and the
result is clamped to the last token of positive probability, so a zero-probability token is never
returned. (The mutant zoo's `InverseCdfNoGuard` keeps the unguarded version: it models that bug.)
"""

from __future__ import annotations

from typing import Any

import numpy as np


def inverse_cdf(probs: Any, uniforms: Any) -> np.ndarray:
    """Tokens by inverse CDF from uniforms in [0, 1); never a token of probability 0.

    - `probs` one row (V,): one token per uniform, shaped like `uniforms` (O(n log V), searchsorted).
    - `probs` rows (..., V): one token per row, `uniforms` shaped `probs.shape[:-1]`.
    Rows need not sum to exactly 1 (they are scaled by their own total) but must have positive mass.
    """
    probs = np.asarray(probs)
    uniforms = np.asarray(uniforms)
    if probs.ndim < 1 or probs.shape[-1] < 1:
        raise ValueError(f"probs must have a non-empty vocabulary axis, got shape {probs.shape}")
    if probs.ndim > 1 and uniforms.shape != probs.shape[:-1]:
        raise ValueError(
            f"uniforms must have shape {probs.shape[:-1]} (one per row of probs), got {uniforms.shape}"
        )
    positive = probs > 0
    if not positive.any(axis=-1).all():
        raise ValueError(
            "probs has a row with no positive probability: nothing can be sampled from it"
        )
    last_positive = probs.shape[-1] - 1 - np.argmax(positive[..., ::-1], axis=-1)
    cumulative = np.cumsum(probs, axis=-1)
    if probs.ndim == 1:
        tokens = np.searchsorted(cumulative, uniforms * cumulative[-1], side="right")
    else:
        targets = uniforms * cumulative[..., -1]
        tokens = (cumulative <= targets[..., None]).sum(axis=-1)
    return np.minimum(tokens, last_positive).astype(np.int64)


def sample_token(probs: Any, rng: np.random.Generator) -> int:
    """One token from the row `probs` (V,), drawing one uniform from `rng`."""
    return int(inverse_cdf(probs, rng.random()))
