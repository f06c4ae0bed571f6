"""Per-row random streams and exact categorical sampling on device.

Every batch row owns a `torch.Generator`, so a row's draws (and therefore its tokens) do not depend on
which other rows share the batch.  A single generator (or None) is also accepted: then one call draws
for the whole batch, with no Python loop.

Sampling uses the exponential race: argmax_i w_i / E_i with E_i ~ Exp(1) picks i with probability
w_i / sum(w).  Unlike an inverse-CDF it needs no normalisation, cannot land on a zero-weight token, and
keeps tiny probabilities (1e-12) exact up to the float64 resolution of the noise.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

Generators = torch.Generator | Sequence[torch.Generator] | None

NOISE_DTYPE = torch.float64  # float32 noise would resolve probabilities only down to ~6e-8


def make_generators(seeds: Sequence[int], device: torch.device | str) -> list[torch.Generator]:
    """One seeded generator per row, on `device`."""
    return [torch.Generator(device=device).manual_seed(int(seed)) for seed in seeds]


def _per_row(draw, batch: int, generators: Generators) -> torch.Tensor:
    if generators is None or isinstance(generators, torch.Generator):
        return draw((batch,), generators)
    if len(generators) != batch:
        raise ValueError(f"generator must be one torch.Generator or one per row ({batch}), got {len(generators)}")
    return torch.cat([draw((1,), g) for g in generators])


def uniform(batch: int, shape: tuple[int, ...], generators: Generators, device) -> torch.Tensor:
    """U[0, 1) float64 noise of shape (batch, *shape)."""
    return _per_row(
        lambda lead, g: torch.rand(lead + shape, generator=g, device=device, dtype=NOISE_DTYPE), batch, generators
    )


def exponential(batch: int, shape: tuple[int, ...], generators: Generators, device) -> torch.Tensor:
    """Exp(1) float64 noise of shape (batch, *shape), strictly positive."""
    draw = lambda lead, g: torch.empty(lead + shape, device=device, dtype=NOISE_DTYPE).exponential_(generator=g)
    return _per_row(draw, batch, generators).clamp_min_(torch.finfo(NOISE_DTYPE).tiny)


def race(weights: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Index drawn with probability proportional to `weights` (last axis), given Exp(1) `noise`.

    Zero-weight entries score -1 and can never win while any weight is positive.
    """
    scores = weights.to(noise.dtype) / noise
    return torch.where(weights > 0, scores, -1.0).argmax(dim=-1)


def sample(probs: torch.Tensor, generators: Generators) -> torch.Tensor:
    """One token per row of `probs` (B, V) -> (B,) long."""
    noise = exponential(probs.shape[0], tuple(probs.shape[1:]), generators, probs.device)
    return race(probs, noise)
