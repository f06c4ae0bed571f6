"""Logit warping shared by target and draft: temperature, top-k, top-p (nucleus), min-p and greedy.

The rule is exact only for the p and q that the sampler really uses, so both sides must be warped by
the *same* function. The order of operations changes the distribution and is fixed here, matching the
order transformers applies its warpers in:

1. **temperature**: logits / T.  T = 0 means **greedy**: a one-hot row at the argmax of the raw logits,
   ties going to the **lowest token id** (what `numpy.argmax` and `torch.argmax` return); the other
   filters are then irrelevant, since each of them keeps the argmax.
2. **top-k**: keep every token whose logit is >= the k-th largest logit (ties at the boundary are kept,
   so more than k tokens may survive).
3. **top-p**: on the softmax of what survived, sort by descending probability (ties by ascending id) and
   keep the shortest prefix whose mass reaches top_p: a token is kept iff the mass strictly before it
   is < top_p. top_p = 1 keeps everything.
4. **min-p**: on the softmax of what survived, keep tokens with probability >= min_p * (largest
   probability).
5. softmax over the survivors (float64), the others get probability exactly 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class SamplingParams:
    """One sampling configuration: temperature (0 = greedy), top_k (None = off), top_p (1 = off), min_p (0 = off)."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float = 1.0
    min_p: float = 0.0

    def __post_init__(self) -> None:
        check_sampling(self.temperature, self.top_k, self.top_p, self.min_p)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def warp(self, logits: Any) -> np.ndarray:
        """Probabilities after this configuration's warping of `logits` (last axis = vocabulary)."""
        return warp_probs(logits, self.temperature, self.top_k, self.top_p, self.min_p)


def check_sampling(temperature: float, top_k: int | None, top_p: float, min_p: float) -> None:
    """Raise ValueError naming the argument for any out-of-range warping parameter."""
    if not isinstance(temperature, (int, float, np.floating, np.integer)) or not np.isfinite(
        temperature
    ):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if top_k is not None and (
        isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1
    ):
        raise ValueError(f"top_k must be None or an integer >= 1, got {top_k!r}")
    if not isinstance(top_p, (int, float, np.floating)) or not (0 < top_p <= 1):
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    if not isinstance(min_p, (int, float, np.floating)) or not (0 <= min_p <= 1):
        raise ValueError(f"min_p must be in [0, 1], got {min_p!r}")


def _softmax(scores: np.ndarray) -> np.ndarray:
    shifted = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(shifted)
    return weights / weights.sum(axis=-1, keepdims=True)


def _as_logits(logits: Any) -> np.ndarray:
    array = np.asarray(logits, dtype=np.float64)
    if array.ndim < 1 or array.shape[-1] < 1:
        raise ValueError(
            f"logits must have a non-empty last (vocabulary) axis, got shape {array.shape}"
        )
    if np.isnan(array).any():
        raise ValueError("logits contains NaN")
    if np.isposinf(array).any():
        raise ValueError("logits contains +inf")
    if np.isneginf(array).all(axis=-1).any():
        raise ValueError("logits has a row where every entry is -inf")
    return array


def greedy_probs(logits: Any) -> np.ndarray:
    """One-hot rows at the argmax of `logits`, ties to the lowest token id."""
    array = _as_logits(logits)
    out = np.zeros_like(array)
    np.put_along_axis(out, array.argmax(axis=-1)[..., None], 1.0, axis=-1)
    return out


def warp_probs(
    logits: Any,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    min_p: float = 0.0,
) -> np.ndarray:
    """Warp `logits` (..., V) into probabilities (float64) in the documented order."""
    check_sampling(temperature, top_k, top_p, min_p)
    array = _as_logits(logits)
    if temperature == 0:
        return greedy_probs(array)
    scores = array / temperature
    vocab = scores.shape[-1]
    if top_k is not None and top_k < vocab:
        kth_largest = np.partition(scores, vocab - top_k, axis=-1)[..., vocab - top_k, None]
        scores = np.where(scores >= kth_largest, scores, -np.inf)
    if top_p < 1:
        probs = _softmax(scores)
        order = np.argsort(-probs, axis=-1, kind="stable")
        sorted_probs = np.take_along_axis(probs, order, axis=-1)
        mass_before = np.cumsum(sorted_probs, axis=-1)
        mass_before = np.concatenate(
            [np.zeros_like(mass_before[..., :1]), mass_before[..., :-1]], axis=-1
        )
        keep_sorted = mass_before < top_p
        keep = np.empty_like(keep_sorted)
        np.put_along_axis(keep, order, keep_sorted, axis=-1)
        scores = np.where(keep, scores, -np.inf)
    if min_p > 0:
        probs = _softmax(scores)
        scores = np.where(probs >= min_p * probs.max(axis=-1, keepdims=True), scores, -np.inf)
    return _softmax(scores)
