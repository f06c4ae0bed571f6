"""The synthetic serving engine's model: a seeded random Markov law over `vocab` tokens, torch-free and fast.

The state after a context is its last token plus the class (one of `CONTEXT_CLASSES`) of the token before it:
a weak second-order term, so that a context the engine gets wrong beyond its last token (a KV cache not rolled
back) changes the law, as it would in a real model. The first position's state is the prompt's last token (and
the class of the one before it, class 0 for a one-token prompt).

* target logits: per state, a tail of Gaussian logits; a *peaked* state gives one token a large lead, a
  *branchy* one gives 2-4 tokens similar leads; EOS (the last id) gets a lead in a few states. The `Profile`
  sets the shape: ``lm-like`` (mostly peaked: completions of a prompt share prefixes often), ``code-like`` (nearly
  determined but at a few branch points, as code is: completions repeat their prefixes, so a run bounds deviations
  of any shape) or ``flat`` (no leads, a wide Gaussian);
* draft logits: the target's first-order logits plus Gaussian noise (no context class), so drafts are good but
  not perfect;
* warping: a `Chain` is a `SamplingParams` in exactspec's order (temperature first), or in llama.cpp's order
  (top-k, top-p, min-p on the T = 1 law, then temperature) when a request says so; both are computed by
  `SamplingParams.warp`, so a row is exactly the law the project's oracle computes for its logits.

Warped rows are computed once per chain for every state (a table), so generation is a few lookups per token.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ....reference.sampling import inverse_cdf
from ....reference.warping import SamplingParams

CONTEXT_CLASSES = 4
MAX_CACHED_CHAINS = 32


@dataclass(frozen=True)
class Profile:
    """The shape of a synthetic model's logits (see the module docstring)."""

    name: str
    peaked_fraction: float  # share of states whose next token is nearly determined
    top_lead: float  # logit lead of a peaked state's top token
    branch_lead: float  # logit lead of a branchy state's 2-4 plausible tokens
    tail_scale: float  # standard deviation of every other logit
    context_scale: float  # standard deviation of the previous-token-class term
    draft_noise: float  # standard deviation of the draft's logit noise
    eos_fraction: float  # share of states where EOS is plausible
    eos_lead: float  # EOS's logit lead in those states


PROFILES = {
    "lm-like": Profile(
        "lm-like",
        peaked_fraction=0.78,
        top_lead=8.0,
        branch_lead=6.0,
        tail_scale=1.0,
        context_scale=0.8,
        draft_noise=1.3,
        eos_fraction=0.2,
        eos_lead=6.5,
    ),
    "flat": Profile(
        "flat",
        peaked_fraction=0.0,
        top_lead=0.0,
        branch_lead=0.0,
        tail_scale=1.65,
        context_scale=0.4,
        draft_noise=0.35,
        eos_fraction=0.12,
        eos_lead=4.0,
    ),
    "code-like": Profile(
        "code-like",
        peaked_fraction=0.9,
        top_lead=11.0,
        branch_lead=6.0,
        tail_scale=1.0,
        context_scale=0.8,
        draft_noise=1.3,
        eos_fraction=0.05,
        eos_lead=6.5,
    ),
}


@dataclass(frozen=True)
class Chain:
    """A sampler chain: `params` in exactspec's order, or in llama.cpp's (`temperature_last`: the filters
    see the T = 1 law, then the temperature applies to the survivors)."""

    params: SamplingParams
    temperature_last: bool = False

    @property
    def temperature(self) -> float:
        return self.params.temperature

    @property
    def top_k(self) -> int | None:
        return self.params.top_k

    @property
    def top_p(self) -> float:
        return self.params.top_p

    @property
    def min_p(self) -> float:
        return self.params.min_p

    def warp(self, logits: Any) -> np.ndarray:
        """The warped law of `logits` (last axis = vocabulary)."""
        p = self.params
        if not self.temperature_last or p.temperature in (0.0, 1.0):
            return p.warp(logits)
        survivors = SamplingParams(1.0, p.top_k, p.top_p, p.min_p).warp(logits) > 0
        return SamplingParams(p.temperature).warp(np.where(survivors, logits, -np.inf))

    def scaled(self, factor: float) -> Chain:
        """The same chain at temperature x `factor`."""
        return _variant(self, float(factor), False, False)

    def without(self, *, truncation: bool = False, min_p: bool = False) -> Chain:
        """The same chain with top-k and top-p (`truncation`) and/or min-p switched off."""
        return _variant(self, 1.0, truncation, min_p)

    def describe(self) -> dict:
        return {
            "temperature": self.temperature,
            "top_k": self.top_k or 0,
            "top_p": self.top_p,
            "min_p": self.min_p,
            "order": "temperature-last" if self.temperature_last else "temperature-first",
        }


@functools.lru_cache(maxsize=1024)
def _variant(chain: Chain, factor: float, no_truncation: bool, no_min_p: bool) -> Chain:
    """`chain` at temperature x `factor`, without top-k/top-p and/or min-p (cached: bug modes ask per row)."""
    params = dataclasses.replace(chain.params, temperature=chain.temperature * factor)
    if no_truncation:
        params = dataclasses.replace(params, top_k=None, top_p=1.0)
    if no_min_p:
        params = dataclasses.replace(params, min_p=0.0)
    return dataclasses.replace(chain, params=params)


def as_chain(sampling: Any) -> Chain:
    """`sampling` as a `Chain` (a `SamplingParams` is taken in exactspec's order)."""
    if isinstance(sampling, Chain):
        return sampling
    if isinstance(sampling, SamplingParams):
        return Chain(sampling)
    raise TypeError(f"sampling must be a SamplingParams or a Chain, got {type(sampling).__name__}")


def _plausible_leads(rng: np.random.Generator, profile: Profile, vocab: int) -> np.ndarray:
    """Per state, the logit leads of its plausible tokens: one for a peaked state, 2-4 for a branchy one."""
    leads = np.zeros((vocab, vocab))
    peaked = rng.random(vocab) < profile.peaked_fraction
    for state in range(vocab):
        count = 1 if peaked[state] else int(rng.integers(2, 5))
        tokens = rng.choice(vocab - 1, size=count, replace=False)  # never EOS (the last id)
        base = profile.top_lead if peaked[state] else profile.branch_lead
        leads[state, tokens] = base + (0.0 if peaked[state] else 0.6 * rng.standard_normal(count))
    return leads


class SyntheticModel:
    """A seeded Markov law with a draft; warped rows after any context, by table lookups (thread-safe)."""

    def __init__(self, vocab: int = 256, seed: int = 0, profile: str | Profile = "lm-like") -> None:
        if isinstance(profile, str):
            if profile not in PROFILES:
                raise ValueError(f"profile must be one of {sorted(PROFILES)}, got {profile!r}")
            profile = PROFILES[profile]
        if int(vocab) < 8:
            raise ValueError(f"vocab must be >= 8, got {vocab}")
        self.vocab, self.seed, self.profile = int(vocab), int(seed), profile
        self.eos = self.vocab - 1
        rng = np.random.default_rng([self.seed, self.vocab])
        first_order = profile.tail_scale * rng.standard_normal((self.vocab, self.vocab))
        first_order += _plausible_leads(rng, profile, self.vocab)
        eos_states = rng.random(self.vocab) < profile.eos_fraction
        first_order[:, self.eos] = np.where(
            eos_states, profile.eos_lead, -2.0
        ) + 0.3 * rng.standard_normal(self.vocab)
        self.token_class = rng.integers(CONTEXT_CLASSES, size=self.vocab)
        self.class_term = profile.context_scale * rng.standard_normal((CONTEXT_CLASSES, self.vocab))
        self.target = first_order[None, :, :] + self.class_term[:, None, :]  # (class, last, next)
        self.draft = first_order + profile.draft_noise * rng.standard_normal(
            (self.vocab, self.vocab)
        )
        self._tables: dict[tuple[str, Chain], np.ndarray] = {}
        self._lock = threading.Lock()

    def state(self, context: Sequence[int]) -> tuple[int, int]:
        """(class of the token before the last, last token) of a non-empty context."""
        previous = self.token_class[int(context[-2])] if len(context) >= 2 else 0
        return int(previous), int(context[-1])

    def target_logits(self, context: Sequence[int]) -> np.ndarray:
        """The target's logits after `context` (prompt plus generated tokens)."""
        return self.target[self.state(context)]

    def draft_logits(self, context: Sequence[int]) -> np.ndarray:
        """The draft's logits after `context` (first order: its last token)."""
        return self.draft[int(context[-1])]

    def _table(self, which: str, chain: Chain) -> np.ndarray:
        key = (which, chain)
        table = self._tables.get(key)
        if table is None:
            logits = self.target if which == "target" else self.draft
            table = chain.warp(logits)
            table.setflags(write=False)
            with self._lock:
                if len(self._tables) >= MAX_CACHED_CHAINS:
                    self._tables.clear()
                self._tables[key] = table
        return table

    def target_table(self, chain: Chain) -> np.ndarray:
        """Warped target rows of every state: (class, last token, V)."""
        return self._table("target", as_chain(chain))

    def target_row(self, context: Sequence[int], chain: Chain) -> np.ndarray:
        """The target's warped next-token law after `context` (llama.cpp's ``post_sampling_probs``)."""
        return self._table("target", as_chain(chain))[self.state(context)]

    def draft_row(self, context: Sequence[int], chain: Chain) -> np.ndarray:
        """The draft's warped next-token law after `context`."""
        return self._table("draft", as_chain(chain))[int(context[-1])]

    def position_rows(
        self, prompt: Sequence[int], tokens: Sequence[int], chain: Any, which: str = "target"
    ) -> np.ndarray:
        """Teacher-forced warped rows (len(tokens), V) of the target (or with `which` "draft", of the draft): row i
        is the law of tokens[i] after its prefix."""
        context = [int(t) for t in prompt] + [int(t) for t in tokens]
        if which == "draft":
            return np.stack(
                [self.draft_row(context[: len(prompt) + i], chain) for i in range(len(tokens))]
            )
        table = self.target_table(as_chain(chain))
        return np.stack([table[self.state(context[: len(prompt) + i])] for i in range(len(tokens))])

    def describe(self) -> dict:
        return {
            "vocab": self.vocab,
            "model_seed": self.seed,
            "profile": dataclasses.asdict(self.profile),
            "eos_token_id": self.eos,
            "context_classes": CONTEXT_CLASSES,
        }


def draw(row: np.ndarray, rng: np.random.Generator) -> int:
    """One token from `row` with one uniform: `reference.sampling.sample_token`'s draw, with less overhead.

    The same cumulative sum and target u * total; a search result inside the row is a token of positive
    probability (its cumulative sum exceeds its predecessor's), so only a result past the end needs the
    reference's clamp to the last positive token, and gets it from `inverse_cdf` itself."""
    u = rng.random()
    cumulative = np.cumsum(row)
    token = int(cumulative.searchsorted(u * cumulative[-1], side="right"))
    return token if token < len(row) else int(inverse_cdf(row, u))


def entropy_nats(rows: np.ndarray) -> np.ndarray:
    """Shannon entropy (nats) of each row of probabilities."""
    rows = np.asarray(rows, dtype=np.float64)
    logs = np.log(np.where(rows > 0, rows, 1.0))
    return -(rows * logs).sum(axis=-1)


__all__ = [
    "CONTEXT_CLASSES",
    "PROFILES",
    "Chain",
    "Profile",
    "SyntheticModel",
    "as_chain",
    "draw",
    "entropy_nats",
]
