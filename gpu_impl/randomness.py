"""Per-row random streams, and `sample`: one exact categorical draw per row on device.

Every batch row owns a `torch.Generator`, so a row's draws (and therefore its tokens) do not depend on
which other rows share the batch.  A single generator (or None) is also accepted: then one call draws
for the whole batch.  With per-row generators each row draws its numbers in one small call of its own
(B calls per draw, not one per number): measured cheaper on a CPU than any counter-based scheme built
from tensor ops (see benchmarks/bench_sampler.py).

`sample` draws by the blocked inverse CDF (one float64 uniform per row) on a CPU and by the exponential
race elsewhere (`categorical.method_for`); both are exact.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .categorical import inverse_cdf, method_for, race

Generators = torch.Generator | Sequence[torch.Generator] | None

NOISE_DTYPE = torch.float64  # float32 noise would resolve probabilities only down to ~6e-8

__all__ = ["Generators", "make_generators", "uniform", "exponential", "race", "sample"]


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


def sample(probs: torch.Tensor, generators: Generators, method: str = "auto") -> torch.Tensor:
    """One token per row of `probs` (B, V) -> (B,) long; `method` "auto" | "inverse_cdf" | "race"."""
    if method_for(probs.device, method) == "race":
        return race(probs, exponential(probs.shape[0], tuple(probs.shape[1:]), generators, probs.device))
    return inverse_cdf(probs, uniform(probs.shape[0], (), generators, probs.device))
