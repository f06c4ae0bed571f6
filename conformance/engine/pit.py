"""Checks against the reference endpoint's REPORTED probabilities: randomized PIT and reported-vs-sampled.

An engine reports a next-token distribution as its top-N (id, p) pairs; exactspec reads it as N + 1
categories, the N listed tokens in descending probability (ties by id) and one tail category of mass
1 - sum(top-N) holding every unlisted token. Coarsening a distribution keeps the randomized PIT exact, so:

- PIT: for each candidate token at a position whose prefix the reference reported, U = F(x-) + W p(x)
  (W ~ U(0, 1), x's category; F the CDF in that order). If the candidate's conditional law equals the
  reference's at every position, the U's are i.i.d. U(0, 1) (Rosenblatt; positions are chosen by the
  prefix only, a predictable selection), and the exact Kolmogorov-Smirnov test applies (continuous: no ties;
  `stat_tests.pit_uniformity_test`).
- reported probabilities: the reference's own first tokens against its reported first-token distribution,
  a Monte-Carlo multinomial test on the N + 1 categories (valid at any n), run before the reports are
  trusted as the PIT's reference.

Refused unless the reports are "post_sampling" (the distribution actually sampled from after the whole
sampler chain); "raw" reports are the model's softmax, which differ from the sampled law under
top-k/top-p/min-p/temperature.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from ...stat_tests import TestResult, multinomial_exact_test, pit_values

from .samples import TopProbs


def categories(top: TopProbs) -> tuple[list[int], np.ndarray]:
    """(listed ids in descending probability, ties by id; probabilities of those ids then the tail)."""
    ordered = sorted(top, key=lambda pair: (-pair[1], pair[0]))
    probs = np.array([p for _, p in ordered] + [0.0])
    listed = float(probs.sum())
    probs[-1] = max(0.0, 1.0 - listed)
    return [i for i, _ in ordered], probs / probs.sum()


def category_of(token: int, ids: Sequence[int]) -> int:
    """Index of `token` among `ids`, or len(ids) (the tail) when unlisted."""
    try:
        return list(ids).index(token)
    except ValueError:
        return len(ids)


def pit_uniforms(tokens: Iterable[int], reports: Iterable[TopProbs], rng: np.random.Generator) -> np.ndarray:
    """Randomized PIT values of `tokens`, each under its reported top-N + tail distribution.

    Raises ValueError if a token has reported probability 0 (unlisted with a tail of mass 0): that is the
    hard support check's failure, not a PIT value."""
    toks, rows = list(tokens), [categories(report) for report in reports]
    if len(toks) != len(rows):
        raise ValueError(f"tokens: {len(toks)} tokens but {len(rows)} reported distributions")
    if not toks:
        return np.empty(0)
    width = max(probs.size for _, probs in rows)
    table = np.zeros((len(rows), width))
    index = np.empty(len(rows), dtype=np.int64)
    for r, ((ids, probs), token) in enumerate(zip(rows, toks)):
        table[r, :probs.size - 1] = probs[:-1]
        table[r, -1] = probs[-1]  # the tail last; padding zeros carry no mass
        k = category_of(token, ids)
        index[r] = width - 1 if k == len(ids) else k
    return pit_values(index, table, rng=rng, ordering="id")


def reported_probs_check(tokens: Sequence[int], report: TopProbs, false_fail_rate: float, *, false_pass_rate: float = 0.001,
                         rng: int | np.random.Generator = 0, name: str = "reference_reported_probs") -> TestResult:
    """Do the reference's own first tokens follow its reported first-token distribution (top-N + tail)?"""
    ids, probs = categories(report)
    counts = np.bincount([category_of(t, ids) for t in tokens], minlength=probs.size)
    keep = probs > 0
    if counts[~keep].sum():  # a sampled token the report gives probability 0: the report is wrong
        bad = sorted({t for t in tokens if probs[category_of(t, ids)] == 0})
        msg = (f"{name}: FAIL: {int(counts[~keep].sum())} of {len(tokens)} sampled tokens have reported "
               f"probability 0: {bad[:5]}")
        return TestResult(name, float("inf"), 0.0, len(tokens), false_fail_rate, false_pass_rate, float("nan"), False, msg,
                          {"n_categories": int(keep.sum())})
    result = multinomial_exact_test(counts=counts[keep], p=probs[keep], false_fail_rate=false_fail_rate, false_pass_rate=false_pass_rate,
                                    rng=rng, name=name, max_enumerate=200_000)
    details = dict(result.details, categories=[*ids, "<tail>"][:20], reported=probs.tolist()[:20],
                   observed=counts.tolist()[:20])
    return TestResult(result.name, result.statistic, result.p_value, result.n, result.false_fail_rate, result.false_pass_rate,
                      result.detectable_tv, result.passed, result.message, details)
