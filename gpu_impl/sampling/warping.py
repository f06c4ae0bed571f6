"""Torch mirror of `reference.warping.warp_probs`: the same filters, in the same order, batched on device.

Target and draft must be warped by the same function for the rejection rule to be exact, so this
module copies the oracle's semantics exactly (see `reference.warping` for the rules); the returned
probabilities are float32 instead of float64.
"""

from __future__ import annotations

import torch

from ...reference.warping import SamplingParams, check_sampling

__all__ = ["SamplingParams", "warp_probs", "greedy_probs"]


def greedy_probs(logits: torch.Tensor) -> torch.Tensor:
    """One-hot rows at the argmax of `logits` (ties to the lowest id, as torch.argmax does)."""
    out = torch.zeros_like(logits, dtype=torch.float32)
    return out.scatter_(-1, logits.argmax(dim=-1, keepdim=True), 1.0)


def _keep_top_k(scores: torch.Tensor, top_k: int) -> torch.Tensor:
    kth_largest = torch.topk(scores, top_k, dim=-1).values[..., -1:]
    return scores.masked_fill(scores < kth_largest, float("-inf"))


def _keep_top_p(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    probs = torch.softmax(scores, dim=-1)
    # Descending probability, ties by ascending id: a stable sort keeps equal values in id order.
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    mass = torch.cumsum(sorted_probs, dim=-1)
    mass_before = torch.cat([torch.zeros_like(mass[..., :1]), mass[..., :-1]], dim=-1)
    keep_sorted = mass_before < top_p
    keep = torch.empty_like(keep_sorted).scatter_(-1, order, keep_sorted)
    return scores.masked_fill(~keep, float("-inf"))


def _keep_min_p(scores: torch.Tensor, min_p: float) -> torch.Tensor:
    probs = torch.softmax(scores, dim=-1)
    threshold = min_p * probs.amax(dim=-1, keepdim=True)
    return scores.masked_fill(probs < threshold, float("-inf"))


def warp_probs(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    min_p: float = 0.0,
) -> torch.Tensor:
    """Warp `logits` (..., V) into float32 probabilities, exactly as the oracle orders the filters.

    The filters run in float64 (a few vector ops per row) so the kept sets match the oracle's; the
    returned probabilities are float32."""
    check_sampling(temperature, top_k, top_p, min_p)
    if not isinstance(logits, torch.Tensor) or logits.ndim < 1 or logits.shape[-1] < 1:
        raise ValueError("logits must be a torch.Tensor with a non-empty last (vocabulary) axis")
    if temperature == 0:
        return greedy_probs(logits)
    scores = logits.double() / temperature  # float64 filters: same kept sets as the oracle
    if top_k is not None and top_k < scores.shape[-1]:
        scores = _keep_top_k(scores, top_k)
    if top_p < 1:
        scores = _keep_top_p(scores, top_p)
    if min_p > 0:
        scores = _keep_min_p(scores, min_p)
    return torch.softmax(scores, dim=-1).float()


def warp(logits: torch.Tensor, sampling: SamplingParams) -> torch.Tensor:
    """`warp_probs` with the parameters of one `SamplingParams`."""
    return warp_probs(logits, sampling.temperature, sampling.top_k, sampling.top_p, sampling.min_p)
