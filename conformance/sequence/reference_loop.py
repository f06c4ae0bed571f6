"""A plain, slow, obviously-correct speculative generation loop: the sequence level's reference adapter.

No KV cache: every round the draft is run on the whole context once per drafted token, and the target
once on context + drafts (k + 1 rows). Target and draft rows are warped by ``reference.warping`` (the same
`SamplingParams` for both), drafts are drawn by inverse CDF from a NumPy generator seeded with `seed`, and
each round is settled by the exact NumPy rule ``reference.verify``. Generation stops after
`max_new_tokens` tokens or right after the target's EOS (``target.generation_config.eos_token_id``),
wherever it falls inside a round.

The loop is written as small overridable steps (`draft_dists`, `target_dists`, `settle`, `round_rng`,
`next_target_context`, `settle_batch`) so that `conformance.sequence.mutants` can model real bugs as
one-method variants. `ReferenceLoop` itself is a valid generation-level adapter (see conformance/CONTRACT.md, sequence level),
including `generate_batch` (rows run in lock step, one generator per row).

Rows are memoised per (model, prefix) when the vocabulary is small (the models are deterministic and
frozen), which makes the tiny-model laws cheap to sample; this changes no output.
"""

from __future__ import annotations

import weakref
from typing import Any, Sequence

import numpy as np
import torch

from .models import eos_of
from ...reference.rules import verify
from ...reference.sampling import sample_token
from ...reference.warping import SamplingParams

MEMO_MAX_VOCAB = 16
MEMO_MAX_ROWS = 500_000


class _Memo:
    """Next-token logits per (model, prefix): one forward over a sequence fills every prefix of it."""

    def __init__(self) -> None:
        self.tables: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()

    @torch.no_grad()
    def rows(self, model: Any, sequence: Sequence[int], first: int, memoize: bool) -> np.ndarray:
        """Logits (float64) of the next token after sequence[:j] for j = first .. len(sequence)."""
        sequence = tuple(int(t) for t in sequence)
        table = self.tables.setdefault(model, {}) if memoize else None
        if table is not None:
            hits = [table.get(sequence[:j]) for j in range(first, len(sequence) + 1)]
            found = [h for h in hits if h is not None]
            if len(found) == len(hits):
                return np.stack(found)
        logits = (
            model(input_ids=torch.tensor([sequence], dtype=torch.long)).logits[0].double().numpy()
        )
        out = logits[first - 1 :]
        if table is not None and len(table) < MEMO_MAX_ROWS:
            for j in range(1, len(sequence) + 1):
                table[sequence[:j]] = logits[j - 1]
        return out


_MEMO = _Memo()


class _Row:
    """State of one sequence being generated."""

    def __init__(self, prompt: Sequence[int], seed: Any) -> None:
        self.prompt = [int(t) for t in prompt]
        self.out: list[int] = []
        self.target_context = list(self.prompt)
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.round = 0
        self.done = False


class ReferenceLoop:
    """Generation-level adapter: the textbook speculative loop (Leviathan et al. 2023, Algorithm 1)."""

    name = "reference_loop"
    description = "plain speculative loop, no KV cache, NumPy rule reference.verify"

    def __init__(self, memoize: bool = True) -> None:
        self.memoize = memoize

    # ---- overridable steps ------------------------------------------------------------------------
    def draft_dists(
        self, logits: np.ndarray, sampling: SamplingParams
    ) -> tuple[np.ndarray, np.ndarray]:
        """(distribution the draft token is sampled from, q used in the ratio) for one draft row."""
        q = sampling.warp(logits)
        return q, q

    def target_dists(self, logits: np.ndarray, sampling: SamplingParams) -> np.ndarray:
        """Target rows p (k + 1, V) used by the rule."""
        return sampling.warp(logits)

    def settle(
        self, p: np.ndarray, q: np.ndarray, x: np.ndarray, rng: np.random.Generator
    ) -> list[int]:
        """One round of the rule: the emitted tokens (1 .. k + 1)."""
        return verify(p, q, x, rng)

    def round_rng(self, row: _Row) -> np.random.Generator:
        """Generator used in this round (one stream per sequence)."""
        return row.rng

    def next_target_context(self, row: _Row, drafts: list[int], emitted: list[int]) -> list[int]:
        """The context the target sees next round: exactly prompt + generated tokens."""
        return row.prompt + row.out

    def settle_batch(self, emitted: list[list[int] | None]) -> list[list[int] | None]:
        """Hook on a lock-step batch round: the emitted tokens per row (None for finished rows)."""
        return emitted

    # ---- the loop ---------------------------------------------------------------------------------
    def _memo(self, model: Any) -> bool:
        return self.memoize and int(model.config.vocab_size) <= MEMO_MAX_VOCAB

    def _propose(
        self, row: _Row, draft: Any, k: int, sampling: SamplingParams, rng: np.random.Generator
    ):
        context = row.prompt + row.out
        drafts: list[int] = []
        qs = []
        for _ in range(k):
            logits = _MEMO.rows(draft, context + drafts, len(context + drafts), self._memo(draft))[
                0
            ]
            sample_from, q = self.draft_dists(logits, sampling)
            drafts.append(sample_token(sample_from, rng))
            qs.append(q)
        return drafts, np.stack(qs)

    def _round(self, row: _Row, target: Any, draft: Any, k: int, sampling: SamplingParams):
        rng = self.round_rng(row)
        drafts, q = self._propose(row, draft, k, sampling, rng)
        tctx = row.target_context
        p = self.target_dists(
            _MEMO.rows(target, tctx + drafts, len(tctx), self._memo(target)), sampling
        )
        emitted = self.settle(p, q, np.asarray(drafts), rng)
        row.round += 1
        return emitted, drafts

    def _apply(
        self, row: _Row, emitted: list[int], drafts: list[int], max_new_tokens: int, eos: int | None
    ) -> None:
        for token in emitted:
            row.out.append(int(token))
            if len(row.out) >= max_new_tokens or (eos is not None and int(token) == eos):
                row.done = True
                break
        row.target_context = self.next_target_context(row, drafts, emitted)

    def generate(
        self,
        target: Any,
        draft: Any,
        prompt_ids: Sequence[int],
        max_new_tokens: int,
        k: int,
        sampling: SamplingParams,
        seed: int,
    ) -> list[int]:
        row = _Row(prompt_ids, seed)
        eos = eos_of(target)
        while not row.done and len(row.out) < max_new_tokens:
            emitted, drafts = self._round(row, target, draft, k, sampling)
            self._apply(row, emitted, drafts, max_new_tokens, eos)
        return row.out

    def generate_batch(
        self,
        target: Any,
        draft: Any,
        prompts: Sequence[Sequence[int]],
        max_new_tokens: int,
        k: int,
        sampling: SamplingParams,
        seed: int,
    ) -> list[list[int]]:
        """Rows in lock step, row i with its own generator (seed spawned from `seed`)."""
        children = np.random.SeedSequence(seed).spawn(len(prompts))
        rows = [_Row(p, c) for p, c in zip(prompts, children)]
        eos = eos_of(target)
        while not all(r.done or len(r.out) >= max_new_tokens for r in rows):
            results = [
                None
                if (r.done or len(r.out) >= max_new_tokens)
                else self._round(r, target, draft, k, sampling)
                for r in rows
            ]
            emitted = self.settle_batch([None if res is None else list(res[0]) for res in results])
            for r, res, em in zip(rows, results, emitted):
                if res is not None:
                    assert em is not None, "settle_batch dropped an active row's tokens"
                    self._apply(r, em, res[1], max_new_tokens, eos)
        return [r.out for r in rows]


REFERENCE = ReferenceLoop()
