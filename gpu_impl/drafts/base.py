"""The one interface every draft source implements; a new source is one small file implementing it."""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from ...reference.warping import SamplingParams

from ..sampling.randomness import Generators


class DraftSource(ABC):
    """Proposes draft tokens together with the (warped) probabilities q they were drawn from.

    Life cycle per generation: `reset(prompt)`, then per round `propose(k)` -> the target verifies ->
    `accept(...)` tells the source what was emitted so it can roll back / extend its state.
    Convention: the last prompt token (and later the last emitted token) is "pending": the source has
    seen it as context but a model source has not fed it to its cache yet.
    """

    def check_compatible(self, target_model: torch.nn.Module, target_tokenizer=None) -> None:
        """Raise ValueError if this source cannot draft for `target_model` (e.g. other vocabulary)."""

    #: True when the proposal is a function of the context alone (q one-hot on it, e.g. prompt lookup): the
    #: generator then verifies by sampler-match, whose tokens at T > 0 are plain decoding's for the same seed.
    deterministic = False

    # True: the generator keeps the target's final-norm states for `observe_target`
    wants_target_hidden = False

    def observe_target(self, hidden: torch.Tensor | None, counts: torch.Tensor | None) -> None:
        """The target's final-norm states (B, m, d) of its latest forward, after `reset` (counts None: the
        prefill, the next pending token came from the last slot) and after each `accept` (row b's next pending
        token came from slot counts[b] - 1). Called only when `wants_target_hidden`; a no-op by default."""

    def step_seconds(self) -> float:
        """Seconds to draft one token right now (after `reset`), for the cost model; 0 for a source without a model."""
        return 0.0

    @abstractmethod
    def reset(self, input_ids: torch.Tensor, valid: torch.Tensor | None, vocab_size: int) -> None:
        """Start from left-padded prompts (B, T); `valid` (B, T) bool marks real tokens (None: all real)."""

    @abstractmethod
    def propose(
        self, k: int, sampling: SamplingParams, generators: Generators
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (tokens (B, k') long, probs (B, k', V) float32) with 0 <= k' <= k, tokens[b, i] ~ probs[b, i].

        k' = 0 (nothing worth proposing) makes the round a plain decoding step of the target.
        """

    @abstractmethod
    def accept(self, tokens: torch.Tensor, counts: torch.Tensor, emitted: list[list[int]]) -> None:
        """The round's outcome: `tokens` (B, k'+1) padded with -1, `counts` (B,), and the same on the host.

        Row b accepted counts[b] - 1 drafts and then emitted one correction/bonus token.
        """
