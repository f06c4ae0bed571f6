"""Prompt-lookup drafting: continue the latest earlier occurrence of the context's last n-gram.

No model: the proposal is a deterministic function of the context, so q is one-hot on it, which the
rejection rule handles exactly.  All rows propose the same length k' (the longest match); a row with a
shorter or no match is padded by repeating its last token (still one-hot, still exact).  When no row
matches, nothing is proposed and the round is a plain decoding step: a guessed token would cost a
(k'+1)-token verification, which on a CPU is not free (v(2) ~ 1.1-1.7 for SmolLM2-135M, by kernel).
"""

from __future__ import annotations

import torch

from .base import DraftSource


def lookup(context: list[int], k: int, ngram_max: int, ngram_min: int) -> list[int]:
    """Up to k tokens following the most recent earlier match of the longest suffix n-gram."""
    for n in range(min(ngram_max, len(context) - 1), ngram_min - 1, -1):
        suffix = context[-n:]
        for start in range(len(context) - n - 1, -1, -1):
            if context[start : start + n] == suffix:
                return context[start + n : start + n + k]
    return []


class PromptLookupDraft(DraftSource):
    """Propose the continuation of the last matching n-gram (ngram_max down to ngram_min)."""

    deterministic = True

    def __init__(self, ngram_max: int = 3, ngram_min: int = 1):
        if isinstance(ngram_min, bool) or not isinstance(ngram_min, int) or ngram_min < 1:
            raise ValueError(f"ngram_min must be an integer >= 1, got {ngram_min!r}")
        if isinstance(ngram_max, bool) or not isinstance(ngram_max, int) or ngram_max < ngram_min:
            raise ValueError(
                f"ngram_max must be an integer >= ngram_min ({ngram_min}), got {ngram_max!r}"
            )
        self.ngram_max, self.ngram_min = ngram_max, ngram_min

    def reset(self, input_ids, valid, vocab_size) -> None:
        rows = input_ids.tolist()
        masks = valid.tolist() if valid is not None else [[True] * len(r) for r in rows]
        self.contexts = [[t for t, real in zip(r, m) if real] for r, m in zip(rows, masks)]
        self.vocab_size = vocab_size
        self.device = input_ids.device

    def propose(self, k, sampling, generators):
        found = [
            lookup(ctx, k, self.ngram_max, self.ngram_min) if k else [] for ctx in self.contexts
        ]
        width = max(map(len, found))
        rows = [(f + [(f or ctx)[-1]] * width)[:width] for f, ctx in zip(found, self.contexts)]
        tokens = torch.tensor(rows, dtype=torch.long, device=self.device).reshape(len(rows), width)
        return tokens, torch.nn.functional.one_hot(tokens, self.vocab_size).float()

    def accept(self, tokens, counts, emitted) -> None:
        for ctx, new in zip(self.contexts, emitted):
            ctx.extend(new)
