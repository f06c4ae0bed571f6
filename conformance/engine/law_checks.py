"""The engine level's law checks on a token stream (`law_stream`): sequential, so a run may look after every
batch and stop when it likes without changing a rate (Ville's inequality; proofs/ARGUMENT.md, C14 and C15).

* `drift`: the stratified PIT drift. Each token's PIT value minus 1/2 is a value whose conditional mean is 0 (within
  the report's slack) when the engine samples the reported law; the strata are the report's confidence (its top-1
  probability), each with its own sign. The e-process of `stat_tests.sequential.assert_drift` rejects; its anytime
  upper bound (`drift_bound`) is what a CERTIFIED rules out: for deviations monotone in the report's order at each
  prefix (temperature, truncation, a pull to the argmax, a residual that sharpens or flattens), with one direction
  per stratum, the mean per-token TV is at most twice the drift.
* `context`: deviations in any direction at prefixes the stream visits again: per prefix, a Dirichlet predictive
  of the report's categories grouped as top 1, top 2, top 3-5 and the rest (prior mean the report, weights 1, 8
  and 64) stakes up to half its wealth on itself against the report's envelope each time the prefix comes back
  (n / (n + 2) of a half after n visits, nothing on the first); the mixture over the weights is an e-process.
* `near_zero`: tokens the report all but excludes (`Categories.near_zero_set`), bet on at rates 2**-k.

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
    envelopes = np.minimum(1.0, np.bincount(group_of, weights=cats.envelope, minlength=len(CONTEXT_GROUPS) + 1))
    return masses, envelopes, int(group_of[category])


def context_log_e(tokens: Sequence[StreamToken], weights: Sequence[float] = CONTEXT_WEIGHTS) -> tuple[float, int]:
    """log e-value of the per-prefix Dirichlet bettors over CONTEXT_GROUPS (equal mixture over `weights`), and how
    many tokens fell at a prefix already visited (the only ones it bets on)."""
    counts: dict[tuple[int, ...], np.ndarray] = {}
    kappa = np.asarray(weights, dtype=np.float64)
    log_w = np.zeros(kappa.size)
    revisits = 0
    for tok in tokens:
        masses, envelopes, group = _grouped(tok.cats, tok.category)
        n_g = counts.setdefault(tok.prefix, np.zeros(masses.size))
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
                    examples.append({"seed": tok.seed, "position": tok.position, "token": tok.token,
                                     "reported_mass": float(tok.cats.probs[tok.category])})
    finite = log_w[np.isfinite(log_w)]
    return (mixture_log(log_w) if finite.size else -math.inf), hits, trials, examples


__all__ = ["CONTEXT_GROUPS", "CONTEXT_WEIGHTS", "NEAR_ZERO_RATES", "STRATA", "context_log_e", "drift_stream", "near_zero_log_e"]
