"""A causal LM with its own KV cache whose rows may advance by different amounts (ragged batches).

Scheme: cache slots are shared by the batch, but each row has a validity mask over the slots.
A rejected or padding slot is never removed from one row alone; it is masked out (attention weight
exactly 0) and later positions of that row get position ids that skip it.  Each row therefore sees
exactly the keys/values and rotary positions it would see alone, so its logits equal the unbatched
ones up to float summation order and its law is unchanged.  Trailing slots that are invalid for every
row are cropped from the cache, so a batch of one never accumulates holes.
"""

from __future__ import annotations

import statistics
import time
from contextlib import contextmanager

import torch
from transformers import DynamicCache

from ..cost.cpu_matmul import planned_layers, planned_linears


class CachedModel:
    """`model` plus a DynamicCache and a (B, slots) validity mask; `forward` appends, `keep_in_tail` rolls back.

    On a CPU its Linear layers run through the machine's measured kernel plan (`cpu_matmul`: "auto") or
    stock `F.linear` ("stock"); see `cpu_matmul`.
    """

    def __init__(self, model: torch.nn.Module, cpu_matmul: str = "auto"):
        self.model = model
        self.device = next(model.parameters()).device
        self.linears, self.plan = planned_layers(model, cpu_matmul)
        self.calls = 0
        # True: keep the final norm's output of each forward in `last_hidden`
        self.keep_hidden = False
        self.last_hidden = None

    def reset(self, batch: int) -> None:
        """Empty cache for `batch` rows."""
        self.cache = DynamicCache(config=self.model.config)
        self.calls = 0
        self.valid = torch.zeros((batch, 0), dtype=torch.bool, device=self.device)
        # valid tokens per row
        self.lengths = torch.zeros(batch, dtype=torch.long, device=self.device)
        # while False the mask is all ones and attention can use the causal fast path
        self.has_holes = False
        self.last_hidden = None

    @torch.inference_mode()
    def forward(
        self, tokens: torch.Tensor, valid: torch.Tensor | None = None, last_only: bool = False
    ) -> torch.Tensor:
        """Append `tokens` (B, m) (slots where `valid` is False are holes) and return float32 logits.

        Returns (B, m, V), or (B, 1, V) for the last slot only when `last_only`.
        """
        if valid is None:
            valid = torch.ones_like(tokens, dtype=torch.bool)
        elif not self.has_holes:
            self.has_holes = not bool(valid.all())  # one sync, only while no hole has been seen yet
        positions = (self.lengths[:, None] + valid.long().cumsum(-1) - 1).clamp_min(0)
        self.valid = torch.cat([self.valid, valid], dim=1)
        self.lengths = self.lengths + valid.long().sum(-1)
        mask = self.valid.long() if self.has_holes else None
        with planned_linears(self.linears, self.plan), self._hidden_capture():
            out = self.model(
                input_ids=tokens,
                attention_mask=mask,
                position_ids=positions,
                cache=self.cache,
                use_cache=True,
                logits_to_keep=1 if last_only else 0,
            )
        self.calls += 1
        return out.logits.float()

    @contextmanager
    def _hidden_capture(self):
        """While `keep_hidden`, store the final norm's output (B, m, d) -- what the LM head reads -- in `last_hidden`."""
        if not self.keep_hidden:
            yield
            return
        norm = getattr(getattr(self.model, "model", None), "norm", None)
        if norm is None:
            raise ValueError(
                "keeping the target's hidden states needs a Llama-style model with .model.norm"
            )
        handle = norm.register_forward_hook(
            lambda module, inputs, output: setattr(self, "last_hidden", output)
        )
        try:
            yield
        finally:
            handle.remove()

    def keep_in_tail(self, tail: int, keep: torch.Tensor, keep_host: list[int]) -> None:
        """Of the last `tail` slots (valid for every row), row b keeps only its first keep[b].

        `keep_host` is the same counts as host ints (the caller already synced them): slots beyond the
        largest are cropped, and the mask is switched on when rows keep different amounts.
        """
        if tail <= 0:
            return
        max_keep = min(max(keep_host), tail)
        drop = torch.arange(tail, device=self.device)[None, :] >= keep[:, None]
        self.lengths = self.lengths - drop.long().sum(-1)
        self.valid[:, -tail:] &= ~drop
        surplus = tail - max_keep
        if surplus > 0:
            self.cache.crop(-surplus)  # transformers 5.x: a negative count removes that many tokens
            self.valid = self.valid[:, :-surplus]
        if min(keep_host) < max_keep:
            self.has_holes = True

    def time_forward(self, n: int) -> float:
        """Seconds of one forward of n (dummy) tokens on the current cache; the cache is left as it was."""
        state = (
            self.valid,
            self.lengths,
            self.has_holes,
            self.calls,
            getattr(self, "last_hidden", None),
        )
        tokens = torch.zeros((self.valid.shape[0], n), dtype=torch.long, device=self.device)
        start = time.perf_counter()
        self.forward(tokens)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        seconds = time.perf_counter() - start
        self.cache.crop(-n)
        self.valid, self.lengths, self.has_holes, self.calls, self.last_hidden = state
        return seconds

    def time_widths(self, widths: list[int], reps: int = 3) -> dict[int, float]:
        """Median seconds of one forward of n (dummy) tokens on the current cache, per n; the cache is left as it was.

        Used to measure a draft model's step; the target's v(n) is measured by `cost_calibration`.
        """
        seconds: dict[int, list[float]] = {n: [] for n in widths}
        for rep in range(reps + 1):  # the first pass warms up and is dropped
            for n in widths:
                spent = self.time_forward(n)
                if rep:
                    seconds[n].append(spent)
        return {n: statistics.median(t) for n, t in seconds.items()}
