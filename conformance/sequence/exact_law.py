"""Exact law of the generated sequence, enumerated by teacher forcing (tiny vocabularies only).

Under exactness the speculative generator's output has the law of plain ancestral sampling from the
warped target: P(y_1..y_m) = prod_t warp(p(. | prompt, y_<t))[y_t], where generation stops after
`max_new_tokens` tokens or right after the first EOS (when the target has one). The outcomes are all
sequences that stop this way; this module enumerates them level by level with one batched forward per
level (V^(n-1) prefixes at most) and the same warping as the oracle (``reference.warping``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .models import eos_of, last_logits
from ...reference.warping import SamplingParams

MAX_OUTCOMES = 200_000


@dataclass
class SequenceLaw:
    """Outcomes (tuples of new tokens) and their probabilities; `index` maps an outcome to its row."""

    outcomes: list[tuple[int, ...]]
    probs: np.ndarray
    vocab: int
    max_new_tokens: int
    eos_token_id: int | None
    index: dict[tuple[int, ...], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index = {o: i for i, o in enumerate(self.outcomes)}

    def position_law(self, t: int) -> np.ndarray:
        """Law of the token at position t (0-based) over V + 1 categories: tokens, then 'stopped before t'."""
        out = np.zeros(self.vocab + 1)
        for o, p in zip(self.outcomes, self.probs):
            out[o[t] if t < len(o) else self.vocab] += p
        return out / out.sum()

    def counts(self, samples: Sequence[Sequence[int]]) -> tuple[np.ndarray, list[tuple[int, ...]]]:
        """Counts over outcomes + one trailing 'impossible outcome' category, and the impossible samples seen."""
        counts = np.zeros(len(self.outcomes) + 1, dtype=np.int64)
        bad: list[tuple[int, ...]] = []
        for s in samples:
            i = self.index.get(tuple(int(v) for v in s))
            if i is None:
                counts[-1] += 1
                bad.append(tuple(int(v) for v in s))
            else:
                counts[i] += 1
        return counts, bad

    def probs_with_impossible(self) -> np.ndarray:
        return np.concatenate([self.probs, [0.0]])


def sequence_law(
    target: Any, prompt: Sequence[int], max_new_tokens: int, sampling: SamplingParams
) -> SequenceLaw:
    """Enumerate the exact law of the new tokens (stopping at max_new_tokens or after the target's EOS)."""
    vocab = int(target.config.vocab_size)
    eos = eos_of(target)
    prompt = tuple(int(t) for t in prompt)
    live: list[tuple[tuple[int, ...], float]] = [((), 1.0)]
    done: list[tuple[tuple[int, ...], float]] = []
    for _ in range(max_new_tokens):
        if not live:
            break
        if len(live) * vocab > MAX_OUTCOMES:
            raise ValueError(
                f"law too large to enumerate ({len(live) * vocab} outcomes): use the PIT level"
            )
        rows = sampling.warp(last_logits(target, [prompt + g for g, _ in live]))
        nxt: list[tuple[tuple[int, ...], float]] = []
        for (g, w), row in zip(live, rows):
            for y in np.flatnonzero(row > 0):
                item = (g + (int(y),), w * float(row[y]))
                (done if eos is not None and int(y) == eos else nxt).append(item)
        live = nxt
    done.extend(live)
    outcomes = [o for o, _ in done]
    probs = np.array([p for _, p in done])
    return SequenceLaw(outcomes, probs / probs.sum(), vocab, max_new_tokens, eos)
