"""A toy in-process engine for `--engine-adapter` (NumPy only): the template of an adapter, and the in-process
engine the tests certify and reject.

The "model" is an order-1 Markov law over `vocab` tokens (logits a seeded Gaussian matrix, the last token is the
end token); the draft mixes it with another matrix, so it is flatter in some contexts and sharper in others. The
reference role samples plainly, one uniform per token. The candidate role drafts `k` tokens from the draft's law
and verifies them with `rule`:

* ``standard``: the oracle's rule (`reference.rules.verify`): exact;
* ``sampler_match``: keep drafts while a plain sample matches (exact; seed-coupled with the reference);
* ``residual_from_p``: a classic bug: at a rejection, the correction is drawn from p, not norm(max(0, p - q)).

    exactspec engine certify --engine-adapter exactspec.conformance.engine.serve.toy_adapter:ToyEngine \\
        --adapter-option rule=residual_from_p --prompts P.jsonl --temperature 0.7 --max-tokens 6 --out DIR
"""

from __future__ import annotations

import numpy as np

from ....reference.rules import verify
from ....reference.sampling import sample_token
from ....reference.warping import SamplingParams
from ..backend import Completion, Sampling, top_n

RULES = ("standard", "sampler_match", "residual_from_p")


def _sampler_match(p: np.ndarray, x: np.ndarray, rng: np.random.Generator) -> list[int]:
    """Sample each position plainly (one uniform per token, as the reference does) and keep the drafts while the
    samples match them: exact, and the same tokens as the reference for the same seed."""
    emitted = []
    for i in range(len(x) + 1):
        emitted.append(sample_token(p[i], rng))
        if i == len(x) or emitted[-1] != x[i]:
            return emitted
    return emitted


def _residual_from_p(
    p: np.ndarray, q: np.ndarray, x: np.ndarray, rng: np.random.Generator
) -> list[int]:
    """The bug: accept with min(1, p/q), but draw the correction from p itself."""
    for i, token in enumerate(x):
        if rng.random() >= p[i, token] / q[i, token]:
            return [int(t) for t in x[:i]] + [sample_token(p[i], rng)]
    return [int(t) for t in x] + [sample_token(p[len(x)], rng)]


class ToyEngine:
    """An order-1 Markov engine over `vocab` tokens; see the module's docstring."""

    name = "exactspec toy engine"
    version = "1"
    thread_safe = True

    def __init__(
        self,
        role: str,
        rule: str = "standard",
        vocab: str | int = 48,
        k: str | int = 3,
        model_seed: str | int = 7,
    ) -> None:
        if rule not in RULES:
            raise ValueError(f"rule: {rule!r} must be one of {RULES}")
        self.role, self.rule, self.vocab, self.k = role, rule, int(vocab), int(k)
        if self.vocab < 4 or self.k < 1:
            raise ValueError(f"vocab {self.vocab} must be >= 4 and k {self.k} >= 1")
        weights = np.random.default_rng(int(model_seed))
        self.logits = 2.0 * weights.standard_normal((self.vocab, self.vocab))
        # flatter or sharper by context
        sharpness = np.where(weights.random(self.vocab) < 0.5, 0.4, 2.0)[:, None]
        self.draft_logits = sharpness * (
            self.logits + weights.standard_normal((self.vocab, self.vocab))
        )
        self.eos = self.vocab - 1
        self.model_name = f"toy-markov-v{self.vocab}-seed{int(model_seed)}"

    def _law(self, logits: np.ndarray, sampling: Sampling) -> np.ndarray:
        params = SamplingParams(
            sampling.temperature, sampling.top_k or None, sampling.top_p, sampling.min_p
        )
        return params.warp(logits)

    def report(self, prefix_ids: list[int], sampling: Sampling, n: int) -> list[tuple[int, float]]:
        """The target's warped next-token law after the prefix: its n most probable tokens."""
        return top_n(self._law(self.logits[prefix_ids[-1]], sampling), n)

    def complete(
        self, prompt_ids: list[int], seed: int, sampling: Sampling, max_tokens: int
    ) -> Completion:
        rng, draft_rng = np.random.default_rng(seed), np.random.default_rng([seed, 1])
        tokens: list[int] = []
        drafted = accepted = 0
        while len(tokens) < max_tokens:
            last = (prompt_ids + tokens)[-1]
            if self.role == "reference":
                emitted = [sample_token(self._law(self.logits[last], sampling), rng)]
            else:
                emitted = self._round(last, sampling, rng, draft_rng)
                drafted, accepted = drafted + self.k, accepted + len(emitted) - 1
            for token in emitted[: max_tokens - len(tokens)]:
                tokens.append(token)
                if token == self.eos and not sampling.ignore_eos:
                    return Completion(tokens, True, *self._counts(drafted, accepted))
        return Completion(tokens, False, *self._counts(drafted, accepted))

    def _counts(self, drafted: int, accepted: int) -> tuple[int | None, int | None]:
        return (None, None) if self.role == "reference" else (drafted, accepted)

    def _round(
        self,
        last: int,
        sampling: Sampling,
        rng: np.random.Generator,
        draft_rng: np.random.Generator,
    ) -> list[int]:
        """One speculative round after token `last`: k drafts (their own generator), then the rule."""
        draft: list[int] = []
        q_rows = []
        for _ in range(self.k):
            q = self._law(self.draft_logits[(draft or [last])[-1]], sampling)
            draft.append(sample_token(q, draft_rng))
            q_rows.append(q)
        p = np.stack([self._law(self.logits[t], sampling) for t in [last, *draft]])
        q, x = np.stack(q_rows), np.array(draft)
        if self.rule == "standard":
            return [int(t) for t in verify(p, q, x, rng)]
        if self.rule == "sampler_match":
            return _sampler_match(p, x, rng)
        return _residual_from_p(p, q, x, rng)


__all__ = ["RULES", "ToyEngine"]
