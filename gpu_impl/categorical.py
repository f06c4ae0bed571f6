"""Exact categorical draws on device: a blocked, guarded inverse CDF (one uniform per row) and the race.

Inverse CDF in two levels, so that a (N, V) row is read once and nothing V-wide is float64: the row is
cut into blocks of `BLOCK` tokens, a block is picked by a float64 cumulative sum of the block masses,
and the token inside that block by a float64 cumulative sum of its `BLOCK` weights, the uniform rescaled
to the block.  Token i of block j then has probability (s_j / sum s) * (w_i / sum_block w), where s_j is
the block mass summed in the weights' dtype (float32: relative error ~1e-7, the inputs' own precision;
float64 inputs keep float64).  Guard, as in `exactspec.reference.sampling.inverse_cdf`: u in [0, 1),
and where rounding puts the target past the end the last positive-mass block (then token) is taken, so a
zero-weight token is never returned and a tiny weight (1e-12) keeps its relative probability.

The exponential race (argmax_i w_i / E_i, E_i ~ Exp(1) float64) needs V random numbers per row: dear on a
CPU (it dominated the batched verifier there), cheap on a GPU.  `method_for` picks by device.
"""

from __future__ import annotations

import torch

BLOCK = 512  # tokens per block: V / BLOCK block masses, then BLOCK weights in float64 per row
METHODS = ("auto", "inverse_cdf", "race")


def method_for(device: torch.device | str, method: str = "auto") -> str:
    """"inverse_cdf" on a CPU, "race" elsewhere (random numbers are cheap there), unless `method` says."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method != "auto":
        return method
    return "inverse_cdf" if torch.device(device).type == "cpu" else "race"


def block_size(vocab: int) -> int:
    return min(BLOCK, vocab)


def block_sums(weights: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """(N, V) -> (N, ceil(V / block)) masses of consecutive blocks, in the weights' dtype (no copy of the rows)."""
    rows, vocab = weights.shape
    size = block_size(vocab)
    full = vocab // size
    if out is None:
        out = weights.new_empty((rows, -(-vocab // size)))
    torch.sum(weights[:, : full * size].view(rows, full, size), dim=-1, out=out[:, :full])
    if full * size < vocab:
        torch.sum(weights[:, full * size :], dim=-1, out=out[:, full])
    return out


def _last_positive(values: torch.Tensor) -> torch.Tensor:
    """Index of the last entry > 0 along the last axis (-1 when there is none)."""
    positions = torch.arange(values.shape[-1], device=values.device)
    return torch.where(values > 0, positions, -1).amax(dim=-1)


def pick_block(sums: torch.Tensor, uniforms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Block j with probability s_j / sum(s), and the uniform rescaled to that block: -> (j, local in [0, 1])."""
    sums = sums.double()
    cumulative = sums.cumsum(dim=-1)
    before = torch.cat([cumulative.new_zeros((sums.shape[0], 1)), cumulative[:, :-1]], dim=1)
    target = uniforms.double() * cumulative[:, -1]
    block = torch.searchsorted(cumulative, target[:, None], right=True).squeeze(1)
    block = torch.minimum(block, _last_positive(sums))  # the guard: rounding past the end
    local = (target - before.gather(1, block[:, None]).squeeze(1)) / sums.gather(1, block[:, None]).squeeze(1)
    return block, local


def block_columns(block: torch.Tensor, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(N,) block ids -> token ids (N, block) clamped into the vocabulary, and which of them are real."""
    columns = block[:, None] * block_size(vocab) + torch.arange(block_size(vocab), device=block.device)
    return columns.clamp_max(vocab - 1), columns < vocab


def pick_in_block(weights: torch.Tensor, local: torch.Tensor) -> torch.Tensor:
    """Index inside a block (N, block) with probability w_i / sum(w), from the rescaled uniform."""
    cumulative = weights.double().cumsum(dim=-1)
    index = torch.searchsorted(cumulative, (local * cumulative[:, -1])[:, None], right=True).squeeze(1)
    return torch.minimum(index, _last_positive(weights))


def inverse_cdf(weights: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """One token per row of `weights` (..., V) (non-negative, positive mass, any scale) from `uniforms` (...)."""
    lead, vocab = weights.shape[:-1], weights.shape[-1]
    rows = weights.reshape(-1, vocab)
    block, local = pick_block(block_sums(rows), uniforms.reshape(-1))
    columns, real = block_columns(block, vocab)
    inside = torch.where(real, rows.gather(1, columns), 0)
    return (block * block_size(vocab) + pick_in_block(inside, local)).reshape(lead)


def race(weights: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Index drawn with probability proportional to `weights` (last axis), given Exp(1) `noise`.

    Zero-weight entries score -1 and can never win while any weight is positive.
    """
    scores = weights.to(noise.dtype) / noise
    return torch.where(weights > 0, scores, -1.0).argmax(dim=-1)
