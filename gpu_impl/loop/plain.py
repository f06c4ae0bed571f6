"""Plain (non-speculative) decoding with a KV cache, using the same warping and RNG as the speculative path."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch

from ...reference.warping import SamplingParams

from ..sampling.randomness import make_generators, sample
from ..sampling.warping import warp
from .kv import CachedModel
from .prompts import TokenCollector, check_limits, check_prompt, row_seeds
from .stats import GenerationResult, SpecStats


def plain_step(logits: torch.Tensor, sampling: SamplingParams, generators) -> torch.Tensor:
    """One token per row of `logits` (B, V) -> (B,): at T = 0 the argmax (the one-hot warp's only token, no
    random draw spent), else a draw from the warped row. The plain loop's step and the generator's k' = 0 round."""
    return logits.argmax(-1) if sampling.greedy else sample(warp(logits, sampling), generators)


@torch.inference_mode()
def generate_plain(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    sampling: SamplingParams = SamplingParams(),
    seed: int | Sequence[int] = 0,
    eos_token_id: int | Sequence[int] | None = None,
    attention_mask: torch.Tensor | None = None,
    on_tokens: Callable[[int, list[int]], None] | None = None,
    check_every: int = 8,
    cpu_matmul: str = "auto",
) -> GenerationResult:
    """Sample up to `max_new_tokens` per row, one target forward per token.

    Tokens stay on the device; the host reads them every step when streaming, else every
    `check_every` steps (to notice EOS), so the device is not stalled by a sync per token.
    `cpu_matmul` picks the CPU Linear kernels ("auto": measured plan, "stock": F.linear; see `cpu_matmul`).
    """
    eos_ids = check_limits(max_new_tokens, eos_token_id)
    if not isinstance(sampling, SamplingParams):
        raise ValueError(f"sampling must be a SamplingParams, got {type(sampling).__name__}")
    # outside the timing, as a SpeculativeGenerator builds its own
    cached = CachedModel(model, cpu_matmul)
    start = time.perf_counter()
    ids, valid = check_prompt(input_ids, attention_mask, cached.device)
    batch = ids.shape[0]
    generators = make_generators(row_seeds(seed, batch), cached.device)
    collector = TokenCollector(batch, max_new_tokens, eos_ids, on_tokens)
    stats = SpecStats()
    every = 1 if on_tokens is not None else max(1, check_every)
    new = torch.empty((batch, max_new_tokens), dtype=torch.long, device=cached.device)
    cached.reset(batch)
    flushed = 0
    if max_new_tokens:
        logits = cached.forward(ids, valid, last_only=True)[:, -1]
        stats.prefill_time_s = time.perf_counter() - start
    for step in range(max_new_tokens):
        token = plain_step(logits, sampling, generators)
        new[:, step] = token
        last = step + 1 == max_new_tokens
        if last or (eos_ids or on_tokens is not None) and (step + 1 - flushed) >= every:
            for row, tokens in enumerate(new[:, flushed : step + 1].tolist()):
                collector.add(row, tokens)
            flushed = step + 1
            if collector.all_done:
                break
        logits = cached.forward(token[:, None], None, last_only=True)[:, -1]
    stats.target_calls = cached.calls
    stats.new_tokens = sum(map(len, collector.sequences))
    stats.wall_time_s = stats.target_time_s = time.perf_counter() - start
    stats.finish()
    stats.tokens_per_target_call = stats.new_tokens / max(1, batch * cached.calls)
    return GenerationResult(collector.sequences, stats)
