"""The engine level's one-sample law statistics on a token stream (`law_stream`): the reference's own tokens against
its reports (`reference_law`, the check that voids wrong reports) and the candidate's drift stream (the law route's
monotone bound). Sequential, so a run may look after every batch and stop when it likes without changing a rate
(Ville's inequality; proofs/ARGUMENT.md, C14 and C15).

* `drift`: the stratified PIT drift. Each token's PIT value minus 1/2 is a value whose conditional mean is 0 (within
  the report's slack) when the engine samples the reported law; the strata are the report's confidence (its top-1
  probability), each with its own sign. Its anytime upper bound (`stat_tests.sequential.drift_bound`) is what the
  monotone law route rules out (a QUALIFIED verdict): for deviations monotone in the report's order at each prefix
  (temperature, truncation, a pull to the argmax, a residual that sharpens or flattens), with one direction per
  stratum, the mean per-token TV is at most twice the drift.
* `prefix_law`: deviations in any direction at prefixes the stream visits again: per prefix, a Bayes mixture over
  concentrations of the Dirichlet predictive of the report's categories (prior mean the report) against the report's
  envelope. (`context_log_e`, the same on four groups of categories with half stakes, is kept for the benchmark.)
* `near_zero`: tokens the report all but excludes (`Categories.near_zero_set`), bet on at rates 2**-k;
* `tempered`: the likelihood ratio of the report tempered (q_theta proportional to p^theta on the categories)
  against its envelope, a Bayes mixture over `THETAS` per confidence stratum (a too-hot, too-cold or truncated law).

Each returns the log of an e-process (a nonnegative supermartingale started at 1 under the null), or the
`DriftStream` of sums the drift test and bound read.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .law_stream import STRATA_EDGES, StreamToken
from ...stat_tests.sequential import DriftStream, mixture_log

STRATA = len(STRATA_EDGES) + 1
CONTEXT_WEIGHTS = (1.0, 8.0, 64.0)
#: The context bettors' groups of categories: the top token, the second, the 3rd to 5th; the rest and the tail.
CONTEXT_GROUPS = ((0,), (1,), (2, 3, 4))
NEAR_ZERO_RATES = 2.0 ** -np.arange(0, 24)
#: The tempered family's exponents theta (q proportional to p^theta on the report's categories).
THETAS = (0.6, 0.75, 0.9, 1.1, 1.3, 1.6, 2.2)


def drift_stream(tokens: Sequence[StreamToken], strata: int = STRATA) -> DriftStream:
    """Per-stratum sums of (PIT - 1/2), the variance sum against each stratum's running mean (a prediction made
    before the token), the summed slack and the count."""
    sums = np.zeros(strata)
    seen = np.zeros(strata)
    variance, slack = 0.0, 0.0
    for tok in tokens:
        s = tok.cats.stratum if strata > 1 else 0
        value = tok.pit - 0.5
        prediction = min(0.5, max(-0.5, sums[s] / (seen[s] + 1.0)))
        variance += (value - prediction) ** 2
        sums[s] += value
        seen[s] += 1
        slack += tok.cats.eta
    return DriftStream(tuple(float(x) for x in sums), float(variance), float(slack), len(tokens))


def _grouped(cats, category: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The report's masses and envelopes summed over CONTEXT_GROUPS of categories (the rest, tail included, last)
    and the group of `category`: a bettor over 4 groups learns faster than one over N + 1 categories."""
    size = cats.probs.size
    group_of = np.full(size, len(CONTEXT_GROUPS))
    for g, members in enumerate(CONTEXT_GROUPS):
        group_of[[c for c in members if c < size]] = g
    masses = np.bincount(group_of, weights=cats.probs, minlength=len(CONTEXT_GROUPS) + 1)
    envelopes = np.minimum(
        1.0, np.bincount(group_of, weights=cats.envelope, minlength=len(CONTEXT_GROUPS) + 1)
    )
    return masses, envelopes, int(group_of[category])


def context_log_e(
    tokens: Sequence[StreamToken], weights: Sequence[float] = CONTEXT_WEIGHTS
) -> tuple[float, int]:
    """log e-value of the per-prefix Dirichlet bettors over CONTEXT_GROUPS (equal mixture over `weights`), and how
    many tokens fell at a prefix already visited (the only ones it bets on)."""
    counts: dict[tuple, np.ndarray] = {}
    kappa = np.asarray(weights, dtype=np.float64)
    log_w = np.zeros(kappa.size)
    revisits = 0
    for tok in tokens:
        masses, envelopes, group = _grouped(tok.cats, tok.category)
        n_g = counts.setdefault(tok.key, np.zeros(masses.size))
        total = float(n_g.sum())
        if total:
            revisits += 1
            q = (n_g[group] + kappa * masses[group] / float(masses.sum())) / (total + kappa)
            stake = 0.5 * total / (total + 2.0)
            log_w += np.log(1.0 - stake + stake * q / envelopes[group])
        n_g[group] += 1.0
    return mixture_log(log_w), revisits


def near_zero_log_e(tokens: Sequence[StreamToken]) -> tuple[float, int, int, list[dict]]:
    """log e-value of the near-zero bettors (stake r on "this token is near zero", r = 1, 1/2, ..., 2**-23, equal
    mixture), the number of near-zero tokens, of tokens with a near-zero set, and up to 5 examples."""
    log_w = np.zeros(NEAR_ZERO_RATES.size)
    hits, trials, examples = 0, 0, list[dict]()
    with np.errstate(divide="ignore"):
        for tok in tokens:
            zero_set = tok.cats.near_zero_set()
            if not zero_set:
                continue
            trials += 1
            bound = float(sum(tok.cats.envelope[c] for c in zero_set))
            hit = tok.category in zero_set
            log_w += np.log(1.0 - NEAR_ZERO_RATES + (NEAR_ZERO_RATES / bound if hit else 0.0))
            if hit:
                hits += 1
                if len(examples) < 5:
                    examples.append(
                        {
                            "seed": tok.seed,
                            "position": tok.position,
                            "token": tok.token,
                            "reported_mass": float(tok.cats.probs[tok.category]),
                        }
                    )
    finite = log_w[np.isfinite(log_w)]
    return (mixture_log(log_w) if finite.size else -math.inf), hits, trials, examples


def _tempered(cats, theta: float) -> np.ndarray:
    """The report's categories tempered by theta (normalised over the categories)."""
    base = np.maximum(cats.probs, 1e-12) ** theta * (cats.probs > 0)
    return base / base.sum()


def tempered_log_e(tokens: Sequence[StreamToken], thetas: Sequence[float] = THETAS) -> float:
    """log e-value of the tempered likelihood ratio: per confidence stratum, the Bayes mixture over `thetas` of
    prod q_theta(c) / envelope(c) (each factor has mean <= 1 under any law within the envelope), the strata's
    e-processes multiplied (each updates only on its own tokens)."""
    log_w = np.zeros((STRATA, len(thetas)))
    for tok in tokens:
        ratios = np.array([_tempered(tok.cats, theta)[tok.category] for theta in thetas])
        log_w[tok.cats.stratum] += np.log(
            np.maximum(ratios, 1e-300) / tok.cats.envelope[tok.category]
        )
    return float(sum(mixture_log(row) for row in log_w))


def prefix_law_log_e(
    tokens: Sequence[StreamToken], weights: Sequence[float] = (1.0, 4.0, 16.0, 64.0, 256.0)
) -> float:
    """log e-value of the per-prefix identity test on every category: at each prefix a Bayes mixture over the
    concentrations `weights` of the Dirichlet predictive (prior mean the report) against the report's envelope,
    the prefixes' e-processes multiplied (proofs C14 (c))."""
    counts: dict[tuple, np.ndarray] = {}
    log_w: dict[tuple, np.ndarray] = {}
    kappa = np.asarray(weights, dtype=np.float64)
    for tok in tokens:
        n = counts.setdefault(tok.key, np.zeros(tok.cats.probs.size))
        w = log_w.setdefault(tok.key, np.zeros(kappa.size))
        prior = tok.cats.probs / max(1e-300, float(tok.cats.probs.sum()))
        q = (n[tok.category] + kappa * prior[tok.category]) / (n.sum() + kappa)
        w += np.log(np.maximum(q, 1e-300) / tok.cats.envelope[tok.category])
        n[tok.category] += 1.0
    return float(sum(mixture_log(w) for w in log_w.values()))


__all__ = [
    "CONTEXT_GROUPS",
    "CONTEXT_WEIGHTS",
    "NEAR_ZERO_RATES",
    "STRATA",
    "context_log_e",
    "drift_stream",
    "near_zero_log_e",
    "prefix_law_log_e",
    "tempered_log_e",
    "THETAS",
]
