"""Exact categorical draws on device: a blocked, guarded inverse CDF (one uniform per row) and the race.

Inverse CDF in two levels, so that a (N, V) row is read once and nothing V-wide is float64: the row is
cut into blocks of `BLOCK` tokens, a block is picked by a float64 cumulative sum of the block masses,
and the token inside that block by a float64 cumulative sum of its `BLOCK` weights (read as one window of
the row: `block_window`, `windows`), the uniform rescaled to the block.  Token i of block j then has probability (s_j / sum s) * (w_i / sum_block w), where s_j is
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
    """ "inverse_cdf" on a CPU, "race" elsewhere (random numbers are cheap there), unless `method` says."""
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


def _guarded(index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """`index` from searchsorted(cumsum(values), target, right=True), but where rounding put the target past
    the end (index == len) the last entry > 0: never a zero-weight entry.

    Any index < len already has values[index] > 0 (the cumulative sum rises there), so only past-the-end
    rows change; a CPU reads whether there is one (free there) and skips the pass when there is none."""
    if index.device.type == "cpu" and not bool((index >= values.shape[-1]).any()):
        return index
    return torch.minimum(index, _last_positive(values))


def pick_block(sums: torch.Tensor, uniforms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Block j with probability s_j / sum(s), and the uniform rescaled to that block: -> (j, local in [0, 1])."""
    sums = sums.double()
    cumulative = sums.cumsum(dim=-1)
    before = torch.cat([cumulative.new_zeros((sums.shape[0], 1)), cumulative[:, :-1]], dim=1)
    target = uniforms.double() * cumulative[:, -1]
    block = _guarded(torch.searchsorted(cumulative, target[:, None], right=True).squeeze(1), sums)
    local = (target - before.gather(1, block[:, None]).squeeze(1)) / sums.gather(
        1, block[:, None]
    ).squeeze(1)
    return block, local


def block_window(block: torch.Tensor, vocab: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(N,) block ids -> the first token of the `block_size` tokens each block is drawn from, and which of
    them lie in the block (None: all of them, when the blocks tile V).

    A partial last block is drawn from the row's last `block_size` tokens, those before the block masked,
    so every window lies inside its row."""
    size = block_size(vocab)
    first = torch.clamp_max(block * size, vocab - size)
    if vocab % size == 0:
        return first, None
    return first, first[:, None] + torch.arange(size, device=block.device) >= (block * size)[
        :, None
    ]


def windows(rows: torch.Tensor, row_index: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
    """rows[row_index[n], first[n] : first[n] + block_size] of a (R, V) tensor -> (N, block_size), one row copy each."""
    rows = rows if rows.stride(-1) == 1 else rows.contiguous()
    size, step = block_size(rows.shape[1]), rows.stride(0)
    starts = max(0, (rows.shape[0] - 1) * step + rows.shape[1] - size + 1)
    return rows.as_strided((starts, size), (1, 1)).index_select(0, row_index * step + first)


def pick_in_block(
    weights: torch.Tensor, local: torch.Tensor, real: torch.Tensor | None = None
) -> torch.Tensor:
    """Index inside a window (N, block) with probability w_i / sum(w) over the entries `real` marks (all when None)."""
    if real is not None:
        weights = torch.where(real, weights, 0)
    cumulative = weights.double().cumsum(dim=-1)
    return _guarded(
        torch.searchsorted(cumulative, (local * cumulative[:, -1])[:, None], right=True).squeeze(1),
        weights,
    )


def inverse_cdf(weights: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """One token per row of `weights` (..., V) (non-negative, positive mass, any scale) from `uniforms` (...)."""
    lead, vocab = weights.shape[:-1], weights.shape[-1]
    rows = weights.reshape(-1, vocab)
    block, local = pick_block(block_sums(rows), uniforms.reshape(-1))
    first, real = block_window(block, vocab)
    inside = windows(rows, torch.arange(rows.shape[0], device=rows.device), first)
    return (first + pick_in_block(inside, local, real)).reshape(lead)


def race(weights: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Index drawn with probability proportional to `weights` (last axis), given Exp(1) `noise`.

    Zero-weight entries score -1 and can never win while any weight is positive.
    """
    scores = weights.to(noise.dtype) / noise
    return torch.where(weights > 0, scores, -1.0).argmax(dim=-1)
