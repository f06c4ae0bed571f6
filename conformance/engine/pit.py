"""The randomized PIT under an engine's REPORTED probabilities, rounding included.

An engine reports a next-token distribution as its top-N (id, p) pairs; exactspec reads it as N + 1
categories, the N listed tokens in descending reported probability (ties by id) and one tail category of
mass max(0, 1 - sum(top-N)) holding every unlisted token. Coarsening a distribution keeps the randomized PIT
exact: for each token at a position whose prefix the reference reported, U = F(x-) + W p(x) (W ~ U(0, 1),
x's category, F the CDF in that order). If the tokens follow the reported laws, the U's are i.i.d. U(0, 1)
(Rosenblatt; positions are chosen by the prefix only, a predictable selection).

**Rounding.** Reports are rounded: each listed probability is taken to be within `REPORT_ROUNDING` of the
engine's true one (a contract constant, CONTRACT.md "Rounded reports"), so a list may sum to a little over 1
and the true tail may be positive where the reported one is 0. The values are computed from the reports as
they are (clipped to [0, 1], never renormalised) and are then within `report_slack` = N * REPORT_ROUNDING of
the exact PIT values under the true probabilities (proofs/ARGUMENT.md, C14): the KS test widens its critical
value by that slack (`stat_tests.pit_uniformity_test(slack=...)`) and its false-fail rate stays a theorem. A
report summing to more than 1 + N * REPORT_ROUNDING is outside the tolerance: the sample-file reader refuses
it (exit 2, naming the file, line and field).

Refused unless the reports are "post_sampling" (the distribution actually sampled from after the whole
sampler chain); "raw" reports are the model's softmax, which differ from the sampled law under
top-k/top-p/min-p/temperature.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from .samples import REPORT_ROUNDING, TopProbs


def categories(top: TopProbs) -> tuple[list[int], np.ndarray]:
    """(listed ids in descending reported probability, ties by id; their reported probabilities, then the tail
    max(0, 1 - sum)); not renormalised, so the sum may exceed 1 by rounding."""
    ordered = sorted(top, key=lambda pair: (-pair[1], pair[0]))
    probs = np.array([p for _, p in ordered] + [0.0])
    probs[-1] = max(0.0, 1.0 - float(probs.sum()))
    return [i for i, _ in ordered], probs


def report_slack(top: TopProbs) -> float:
    """How far a PIT value computed from this report can be from the exact one: N * REPORT_ROUNDING."""
    return len(top) * REPORT_ROUNDING


#: A token is "near zero" when it falls in the last categories of its report (the tail, then the listed ones from
#: the least probable) whose reported masses sum to at most this. Their true mass is at most NEAR_ZERO_MASS plus
#: the tail's rounding (N r) plus r per listed one: under exactness the probability is <= NEAR_ZERO_MASS + 2 N r.
NEAR_ZERO_MASS = 1e-4


def near_zero(token: int, top: TopProbs) -> bool:
    """Is `token` in the longest run of least probable categories (the tail first, then the listed ones from the
    bottom) whose reported masses sum to at most NEAR_ZERO_MASS? A token the report gives no mass is."""
    ids, probs = categories(top)
    k, total = category_of(token, ids), 0.0
    for index in range(probs.size - 1, -1, -1):  # the tail is the last category, the least probable
        total += float(probs[index])
        if total > NEAR_ZERO_MASS:
            return False
        if index == k:
            return True
    return True


def near_zero_rate_bound(top: TopProbs) -> float:
    """Under exactness, a bound on the probability of a near-zero token at a position with this report."""
    return NEAR_ZERO_MASS + 2 * report_slack(top)


def category_of(token: int, ids: Sequence[int]) -> int:
    """Index of `token` among `ids`, or len(ids) (the tail) when unlisted."""
    try:
        return list(ids).index(token)
    except ValueError:
        return len(ids)


def pit_uniforms(tokens: Iterable[int], reports: Iterable[TopProbs], rng: np.random.Generator) -> np.ndarray:
    """Randomized PIT values of `tokens`, each under its reported top-N + tail distribution as reported, clipped to
    [0, 1]; each is within `report_slack` of the exact value (module docstring). A token in a category of
    reported mass 0 gets the category's left end."""
    toks, reps = list(tokens), list(reports)
    if len(toks) != len(reps):
        raise ValueError(f"tokens: {len(toks)} tokens but {len(reps)} reported distributions")
    values = np.empty(len(toks))
    draws = rng.random(len(toks))
    for r, (token, report) in enumerate(zip(toks, reps)):
        ids, probs = categories(report)
        k = category_of(token, ids)
        values[r] = float(probs[:k].sum()) + draws[r] * float(probs[k])
    return np.clip(values, 0.0, 1.0)
