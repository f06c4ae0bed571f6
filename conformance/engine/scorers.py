"""How each of the candidate's paired checks learns its log-likelihood ratio ell from the earlier units
(`paired_checks`): `score(tokens)` is ell of one completion's tokens with what was learned so far, `learn(tokens,
role)` adds a completion of the candidate or the reference. Any rule is valid (the permutation factor has mean 1
whatever ell is, as long as it is fixed before the block); these are chosen for power against what engines get
wrong. ell is a log-likelihood ratio of "candidate" against "reference" models, so a completion of the candidate
scores higher than the reference's when they differ in the learned direction.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .law_stream import STRATA_EDGES, Categories

STRATA = len(STRATA_EDGES) + 1
#: Positions are grouped as 1, 2-3, 4-7, 8-15, 16 and later: a bug may live at the first drafted position only, or
#: only late in a long completion.
POSITION_GROUPS = 5
CELLS = STRATA * POSITION_GROUPS
#: The tempered family's exponents (q proportional to p^theta on the report's categories); 1 is the report itself.
THETAS = np.array([0.6, 0.75, 0.9, 1.0, 1.1, 1.3, 1.6, 2.2])
#: A fitted theta must beat theta = 1 by this many nats of log-likelihood to be used (early units are few).
THETA_PENALTY = 2.0
#: The per-prefix scorer's prior weight on the report (a Dirichlet concentration), and the visits of each end a
#: prefix needs before it is scored (sparse prefixes add noise, not evidence).
PREFIX_PRIOR = 16.0
PREFIX_MIN_VISITS = 8
#: The drift tilt per stratum is the shift of the mean PIT times 12 (the inverse variance of a uniform), clipped.
TILT_LIMIT = 6.0


@dataclass(frozen=True)
class TokenView:
    """One token of a completion read against its prefix's teacher-forced report."""

    position: int
    prefix: tuple[int, ...]
    token: int
    cats: Categories
    category: int
    pit: float
    prompt: str = ""

    @property
    def cell(self) -> int:
        """The token's (confidence stratum, position group) cell."""
        group = min(POSITION_GROUPS - 1, int(math.log2(self.position)))
        return self.cats.stratum * POSITION_GROUPS + group


class DriftTilt:
    """ell = sum_t [lam_s (PIT_t - 1/2) - log Z(lam_s)]: an exponential tilt of the uniform per cell s (confidence
    stratum and position group; per prompt too with `by_prompt`), lam_s the difference of the candidate's and the
    reference's mean PIT so far (shrunk, times 12)."""

    def __init__(self, by_prompt: bool = False) -> None:
        self.by_prompt = by_prompt
        self.sums: dict[str, np.ndarray] = {}
        self.counts: dict[str, np.ndarray] = {}

    def _key(self, tok: TokenView) -> str:
        return tok.prompt if self.by_prompt else ""

    def _tilts(self, key: str) -> np.ndarray:
        if key not in self.sums:
            return np.zeros(CELLS)
        means = self.sums[key] / (self.counts[key] + 20.0)
        return np.clip(12.0 * (means[0] - means[1]), -TILT_LIMIT, TILT_LIMIT)

    def score(self, tokens: list[TokenView]) -> float:
        total = 0.0
        for tok in tokens:
            lam = float(self._tilts(self._key(tok))[tok.cell])
            if lam != 0.0:
                total += lam * (tok.pit - 0.5) - math.log(math.sinh(lam / 2.0) / (lam / 2.0))
        return total

    def learn(self, tokens: list[TokenView], role: str) -> None:
        row = 0 if role == "candidate" else 1
        for tok in tokens:
            key = self._key(tok)
            if key not in self.sums:
                self.sums[key], self.counts[key] = np.zeros((2, CELLS)), np.zeros((2, CELLS))
            self.sums[key][row, tok.cell] += tok.pit - 0.5
            self.counts[key][row, tok.cell] += 1.0


class Tempered:
    """ell = sum_t log q_{theta_c}(x_t) - log q_{theta_r}(x_t), q_theta the report tempered by theta on its
    categories, theta_c and theta_r the best fits (per cell; per prompt too with `by_prompt`) to the candidate's and
    to the reference's tokens."""

    def __init__(self, by_prompt: bool = False) -> None:
        self.by_prompt = by_prompt
        self.loglik: dict[str, np.ndarray] = {}
        self._cache: dict[
            int, tuple[Categories, np.ndarray]
        ] = {}  # id -> (the report, its log q): the report is
        # kept alive with its entry, so its id is never reused while cached

    def _log_q(self, cats: Categories) -> np.ndarray:
        """(thetas, categories) log q_theta, cached per report."""
        key = id(cats)
        if key not in self._cache:
            probs = np.maximum(cats.probs, 1e-12)
            logs = THETAS[:, None] * np.log(probs)[None, :]
            logs[:, cats.probs <= 0] = -np.inf
            top = logs.max(axis=1, keepdims=True)
            self._cache[key] = (
                cats,
                logs - (top + np.log(np.exp(logs - top).sum(axis=1, keepdims=True))),
            )
        return self._cache[key][1]

    def _fits(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """The candidate's and the reference's best theta index per cell."""
        if key not in self.loglik:
            one = np.full(CELLS, int(np.flatnonzero(THETAS == 1.0)[0]))
            return one, one
        penalised = self.loglik[key] - THETA_PENALTY * (THETAS != 1.0)
        fits = penalised.argmax(axis=2)
        return fits[0], fits[1]

    def score(self, tokens: list[TokenView]) -> float:
        total = 0.0
        for tok in tokens:
            cand, ref = self._fits(tok.prompt if self.by_prompt else "")
            s = tok.cell
            if cand[s] != ref[s]:
                log_q = self._log_q(tok.cats)[:, tok.category]
                total += float(np.clip(log_q[cand[s]], -50, 0) - np.clip(log_q[ref[s]], -50, 0))
        return total

    def learn(self, tokens: list[TokenView], role: str) -> None:
        row = 0 if role == "candidate" else 1
        for tok in tokens:
            key = tok.prompt if self.by_prompt else ""
            if key not in self.loglik:
                self.loglik[key] = np.zeros((2, CELLS, THETAS.size))
            self.loglik[key][row, tok.cell] += np.maximum(
                self._log_q(tok.cats)[:, tok.category], -50.0
            )


class PrefixLaw:
    """ell = sum_t log a_h(x_t) / b_h(x_t): at each prefix h the candidate's earlier tokens there (a) against the
    reference's (b), each a Dirichlet predictive on the report's categories with the report as prior mean; 0 at a
    prefix either end has visited fewer than PREFIX_MIN_VISITS times before."""

    def __init__(self, by_prompt: bool = False) -> None:
        self.counts: dict[tuple, np.ndarray] = {}  # per prompt and prefix whatever `by_prompt` says

    def score(self, tokens: list[TokenView]) -> float:
        total = 0.0
        for tok in tokens:
            n = self.counts.get((tok.prompt, tok.prefix))
            if n is None or n[0].sum() < PREFIX_MIN_VISITS or n[1].sum() < PREFIX_MIN_VISITS:
                continue
            prior = tok.cats.probs / max(1e-300, float(tok.cats.probs.sum()))
            a = (n[0, tok.category] + PREFIX_PRIOR * prior[tok.category]) / (
                n[0].sum() + PREFIX_PRIOR
            )
            b = (n[1, tok.category] + PREFIX_PRIOR * prior[tok.category]) / (
                n[1].sum() + PREFIX_PRIOR
            )
            if a > 0 and b > 0:
                total += math.log(a / b)
        return total

    def learn(self, tokens: list[TokenView], role: str) -> None:
        row = 0 if role == "candidate" else 1
        for tok in tokens:
            n = self.counts.setdefault((tok.prompt, tok.prefix), np.zeros((2, tok.cats.probs.size)))
            n[row, tok.category] += 1.0


class NearZero:
    """ell = sum_t log Bernoulli(hit_t; rate_c) / Bernoulli(hit_t; rate_r) over tokens whose report has a near-zero
    set (hit: the token falls in it), the rates those of the candidate's and the reference's earlier tokens."""

    def __init__(self, by_prompt: bool = False) -> None:
        # pooled over prompts: a near-zero emission is rare, a rate per prompt too noisy
        self.hits = np.zeros(2)
        self.trials = np.zeros(2)

    def score(self, tokens: list[TokenView]) -> float:
        rates = (self.hits + 0.5) / (self.trials + 1.0)
        total = 0.0
        for tok in tokens:
            zero = tok.cats.near_zero_set()
            if zero:
                hit = tok.category in zero
                total += (
                    math.log(rates[0] / rates[1])
                    if hit
                    else math.log((1 - rates[0]) / (1 - rates[1]))
                )
        return total

    def learn(self, tokens: list[TokenView], role: str) -> None:
        row = 0 if role == "candidate" else 1
        for tok in tokens:
            zero = tok.cats.near_zero_set()
            if zero:
                self.trials[row] += 1.0
                self.hits[row] += float(tok.category in zero)


class Scorer(Protocol):
    """What a paired check's learner offers: ell of a completion, and learning from one."""

    def score(self, tokens: list[TokenView]) -> float: ...

    def learn(self, tokens: list[TokenView], role: str) -> None: ...


#: Each paired check's scorer, built with `by_prompt` (pooled runs learn per prompt where the scorer can).
SCORERS: dict[str, Callable[..., Scorer]] = {
    "law_drift": DriftTilt,
    "law_lr": Tempered,
    "context_law": PrefixLaw,
    "near_zero_tokens": NearZero,
}

__all__ = ["SCORERS", "STRATA", "THETAS", "Scorer", "TokenView"]
