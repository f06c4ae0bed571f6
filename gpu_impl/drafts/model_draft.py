"""A separate (small) causal LM as the draft, with its own ragged KV cache."""

from __future__ import annotations

import torch

from ...reference.warping import SamplingParams

from ..loop.kv import CachedModel
from ..loop.vocab import check_same_vocabulary
from ..sampling.randomness import Generators, sample
from ..sampling.warping import warp
from .base import DraftSource


class ModelDraft(DraftSource):
    """Samples k tokens autoregressively from `model`, warped like the target.

    Cache bookkeeping: after proposing x_1..x_k the cache holds the pending token and x_1..x_{k-1}.
    When row b accepts n drafts it keeps min(n, k-1) of those; the tokens still to feed next round are
    [x_k, y] if n == k, else [y].  Rows needing one token get a hole slot in front (see `kv`).
    """

    def __init__(self, model: torch.nn.Module, tokenizer=None, cpu_matmul: str = "auto"):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.cached = CachedModel(self.model, cpu_matmul)

    def check_compatible(self, target_model, target_tokenizer=None) -> None:
        check_same_vocabulary(target_model, self.model, target_tokenizer, self.tokenizer)

    def reset(self, input_ids, valid, vocab_size) -> None:
        self.cached.reset(input_ids.shape[0])
        self.vocab_size = vocab_size
        if input_ids.shape[1] > 1:
            self.cached.forward(
                input_ids[:, :-1], None if valid is None else valid[:, :-1], last_only=True
            )
        self.unfed, self.unfed_valid = input_ids[:, -1:], None

    def step_seconds(self) -> float:
        return self.cached.time_widths([1])[1]

    def propose(self, k: int, sampling: SamplingParams, generators: Generators):
        if k == 0:  # a plain target step: the draft catches up next round
            self.proposed = self.unfed.new_zeros((self.unfed.shape[0], 0))
            return self.proposed, torch.zeros(
                (*self.proposed.shape, self.vocab_size), device=self.unfed.device
            )
        logits = self.cached.forward(self.unfed, self.unfed_valid, last_only=True)[:, -1]
        tokens, probs = [], []
        for i in range(k):
            q = warp(logits, sampling)
            x = q.argmax(-1) if sampling.greedy else sample(q, generators)  # one-hot q: same token
            tokens.append(x)
            probs.append(q)
            if i + 1 < k:
                logits = self.cached.forward(x[:, None], None, last_only=True)[:, -1]
        self.proposed = torch.stack(tokens, dim=1)
        return self.proposed, torch.stack(probs, dim=1)

    def accept(self, tokens, counts, emitted) -> None:
        k = self.proposed.shape[1]
        if k == 0:  # nothing was fed this round: the emitted token joins the tokens still to feed
            self.unfed = torch.cat([self.unfed, tokens[:, :1]], dim=1)
            if self.unfed_valid is not None:
                self.unfed_valid = torch.cat(
                    [self.unfed_valid, torch.ones_like(self.unfed_valid[:, :1])], dim=1
                )
            return
        n_accepted = counts - 1
        n_host = [len(row) - 1 for row in emitted]
        self.cached.keep_in_tail(
            k - 1, n_accepted.clamp(max=k - 1), [min(n, k - 1) for n in n_host]
        )
        last = tokens.gather(1, n_accepted[:, None])
        all_accepted = [n == k for n in n_host]
        if not any(all_accepted):
            self.unfed, self.unfed_valid = last, None
            return
        self.unfed = torch.cat([self.proposed[:, -1:], last], dim=1)
        first_real = (n_accepted == k)[:, None]
        self.unfed_valid = (
            None
            if all(all_accepted)
            else torch.cat([first_real, torch.ones_like(first_real)], dim=1)
        )
