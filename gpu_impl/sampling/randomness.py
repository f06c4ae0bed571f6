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

__all__ = [
    "Generators",
    "make_generators",
    "uniform",
    "exponential",
    "race",
    "sample",
    "stream_states",
    "rewind",
]


def make_generators(seeds: Sequence[int], device: torch.device | str) -> list[torch.Generator]:
    """One seeded generator per row, on `device`."""
    return [torch.Generator(device=device).manual_seed(int(seed)) for seed in seeds]


def _per_row(
    fill, batch: int, shape: tuple[int, ...], generators: Generators, device
) -> torch.Tensor:
    """(batch, *shape) NOISE_DTYPE noise drawn by `fill(tensor, generator)` in place: in one call for one
    generator (or None), else row by row into the rows of one tensor, each row from its own generator."""
    out = torch.empty((batch, *shape), device=device, dtype=NOISE_DTYPE)
    if generators is None or isinstance(generators, torch.Generator):
        return fill(out, generators)
    if len(generators) != batch:
        raise ValueError(
            f"generator must be one torch.Generator or one per row ({batch}), got {len(generators)}"
        )
    for row, generator in zip(out, generators):
        fill(row, generator)
    return out


def uniform(batch: int, shape: tuple[int, ...], generators: Generators, device) -> torch.Tensor:
    """U[0, 1) float64 noise of shape (batch, *shape)."""
    return _per_row(lambda out, g: out.uniform_(generator=g), batch, shape, generators, device)


def exponential(batch: int, shape: tuple[int, ...], generators: Generators, device) -> torch.Tensor:
    """Exp(1) float64 noise of shape (batch, *shape), strictly positive."""
    noise = _per_row(lambda out, g: out.exponential_(generator=g), batch, shape, generators, device)
    return noise.clamp_min_(torch.finfo(NOISE_DTYPE).tiny)


def rewindable(device: torch.device) -> bool:
    """Whether generators on `device` can be rewound (`stream_states`, `rewind`): CPU ones only.

    A CPU generator (mt19937) fills a float64 tensor one number at a time, so n draws then m draws equal
    n + m draws (tests/test_gpu_coupled.py checks it); other devices' generators promise no such thing."""
    return torch.device(device).type == "cpu"


def stream_states(generators: Generators) -> list[torch.Tensor] | None:
    """Each row's generator state, to `rewind` to after a round: only for per-row generators that are
    `rewindable` (None else)."""
    if (
        generators is None
        or isinstance(generators, torch.Generator)
        or not all(rewindable(g.device) for g in generators)
    ):
        return None
    return [g.get_state() for g in generators]


def rewind(
    generators: Sequence[torch.Generator], states: Sequence[torch.Tensor], used: Sequence[int]
) -> None:
    """Row b's stream back at `states[b]`, advanced by `used[b]` U[0, 1) draws: as if the round had drawn only
    the uniforms it used.  The ones it drew and did not use decided nothing, so drawing them again later is
    drawing fresh ones."""
    for generator, state, n in zip(generators, states, used):
        generator.set_state(state)
        if n:
            torch.empty(n, dtype=NOISE_DTYPE).uniform_(generator=generator)


def sample(probs: torch.Tensor, generators: Generators, method: str = "auto") -> torch.Tensor:
    """One token per row of `probs` (B, V) -> (B,) long; `method` "auto" | "inverse_cdf" | "race"."""
    if method_for(probs.device, method) == "race":
        return race(
            probs, exponential(probs.shape[0], tuple(probs.shape[1:]), generators, probs.device)
        )
    return inverse_cdf(probs, uniform(probs.shape[0], (), generators, probs.device))
