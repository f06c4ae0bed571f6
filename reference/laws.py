"""Exact laws of one verification round: acceptance rate, residual, and the law of the emitted tuple.

`round_distribution` walks the branches of the standard rule (draft x ~ q_i, accept with probability
min(1, p_i(x)/q_i(x)), else draw from the residual; bonus from p_{k+1} after k acceptances) and adds
up the probability of every emitted tuple. With `fractions.Fraction` inputs every step is rational, so
identities such as "the first emitted token has law p_1" can be checked with no rounding at all.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from .validation import as_prob_array, as_rational_rows, check_round_shapes, is_rational

#: Enumeration refuses inputs whose number of accepted-prefix branches could exceed this.
MAX_BRANCHES = 2_000_000


def acceptance_rate(p: Any, q: Any) -> Any:
    """alpha = sum_x min(p(x), q(x)) = 1 - TV(p, q): the chance one draft token x ~ q is accepted.

    Works on single rows (V,) or on stacks of rows (..., V), returning one rate per row.
    """
    if is_rational(p) or is_rational(q):
        p_rows, q_rows = as_rational_rows([p], "p"), as_rational_rows([q], "q")
        if len(p_rows[0]) != len(q_rows[0]):
            raise ValueError(
                f"p and q have mismatched vocabularies: {len(p_rows[0])} vs {len(q_rows[0])}"
            )
        return sum((min(a, b) for a, b in zip(p_rows[0], q_rows[0])), Fraction(0))
    p_arr = as_prob_array(p, "p", ndim=(1, 2, 3))
    q_arr = as_prob_array(q, "q", ndim=(1, 2, 3))
    if p_arr.shape != q_arr.shape:
        raise ValueError(f"p and q must have the same shape, got {p_arr.shape} and {q_arr.shape}")
    rate = np.minimum(p_arr, q_arr).sum(axis=-1)
    return float(rate) if rate.ndim == 0 else rate


def unchecked_residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """norm(max(0, p - q)) along the last axis, without input checks; rows with no positive mass fall back to p.

    The one float implementation of the residual: `residual` validates and then calls it; hot loops
    (the rule, the mutant zoo) whose rows are already arrays call it directly. Keeps the input dtype.
    """
    positive = np.maximum(p - q, 0.0)
    mass = positive.sum(axis=-1, keepdims=True)
    safe_mass = np.where(mass > 0, mass, 1.0)
    return np.where(mass > 0, positive / safe_mass, p)


def _residual_rational(p: Sequence[Fraction], q: Sequence[Fraction]) -> list[Fraction]:
    positive = [max(Fraction(0), a - b) for a, b in zip(p, q)]
    mass = sum(positive, Fraction(0))
    return [value / mass for value in positive] if mass > 0 else list(p)


def residual(p: Any, q: Any) -> Any:
    """The correction distribution norm(max(0, p - q)), drawn from after a rejection.

    When p == q (more generally when max(0, p - q) has zero mass) no draft is ever rejected, so the
    residual is never sampled. It is then defined as p itself: any choice would be harmless, and p
    keeps it a valid distribution so no caller divides by zero. Rows (..., V) are handled
    independently; Fraction rows give Fraction rows.
    """
    if is_rational(p) or is_rational(q):
        p_rows, q_rows = as_rational_rows([p], "p"), as_rational_rows([q], "q")
        if len(p_rows[0]) != len(q_rows[0]):
            raise ValueError(
                f"p and q have mismatched vocabularies: {len(p_rows[0])} vs {len(q_rows[0])}"
            )
        return _residual_rational(p_rows[0], q_rows[0])
    p_arr = as_prob_array(p, "p", ndim=(1, 2, 3))
    q_arr = as_prob_array(q, "q", ndim=(1, 2, 3))
    if p_arr.shape != q_arr.shape:
        raise ValueError(f"p and q must have the same shape, got {p_arr.shape} and {q_arr.shape}")
    return unchecked_residual(p_arr, q_arr)


def _round_law(
    p_rows: list[list], q_rows: list[list], zero: Any, one: Any
) -> dict[tuple[int, ...], Any]:
    """Branch walk of the standard rule with generic arithmetic (float or Fraction)."""
    k = len(q_rows)
    residuals = [
        _residual_rational(p_rows[i], q_rows[i])
        if isinstance(zero, Fraction)
        else list(unchecked_residual(np.asarray(p_rows[i]), np.asarray(q_rows[i])))
        for i in range(k)
    ]
    law: dict[tuple[int, ...], Any] = defaultdict(lambda: zero)

    def walk(position: int, prefix: tuple[int, ...], weight: Any) -> None:
        p = p_rows[position]
        if position == k:  # all k drafts accepted: bonus token from p_{k+1}
            for y, p_y in enumerate(p):
                if p_y > 0:
                    law[prefix + (y,)] += weight * p_y
            return
        reject = zero
        for x, q_x in enumerate(q_rows[position]):
            if q_x == 0:
                continue
            accept_probability = min(one, p[x] / q_x)
            if accept_probability > 0:
                walk(position + 1, prefix + (x,), weight * q_x * accept_probability)
            reject += q_x * (one - accept_probability)
        if reject > 0:
            for y, r_y in enumerate(residuals[position]):
                if r_y > 0:
                    law[prefix + (y,)] += weight * reject * r_y

    walk(0, (), one)
    return dict(law)


def round_distribution(target_probs: Any, draft_probs: Any) -> dict[tuple[int, ...], Any]:
    """Exact law of the tuple one round of the standard rule emits: {tuple of token ids: probability}.

    `target_probs` is (k+1, V) (rows p_1..p_{k+1}), `draft_probs` is (k, V). Float inputs give float64
    probabilities; `fractions.Fraction` inputs give exact `Fraction` probabilities. Cost grows like
    (support size)^k, so this is for small V and k (refused beyond MAX_BRANCHES branches).
    """
    if is_rational(target_probs) or is_rational(draft_probs):
        p_rows = as_rational_rows(target_probs, "target_probs")
        q_rows = as_rational_rows(draft_probs, "draft_probs")
        check_round_shapes(
            np.empty((len(p_rows), len(p_rows[0]))), np.empty((len(q_rows), len(q_rows[0])))
        )
        _check_branches(q_rows, p_rows)
        return _round_law(p_rows, q_rows, Fraction(0), Fraction(1))
    p_arr = as_prob_array(target_probs, "target_probs", ndim=2)
    q_arr = as_prob_array(draft_probs, "draft_probs", ndim=2)
    check_round_shapes(p_arr, q_arr)
    _check_branches(q_arr, p_arr)
    return _round_law(
        [list(map(float, r)) for r in p_arr], [list(map(float, r)) for r in q_arr], 0.0, 1.0
    )


def _check_branches(q_rows: Any, p_rows: Any) -> None:
    branches = 1
    for q, p in zip(q_rows, p_rows):
        branches *= max(1, sum(1 for a, b in zip(q, p) if a > 0 and b > 0))
        if branches > MAX_BRANCHES:
            raise ValueError(
                f"round_distribution would enumerate more than {MAX_BRANCHES} accepted prefixes; "
                "use smaller supports or k (draft_probs/target_probs too large for exact enumeration)"
            )


def first_token_marginal(law: dict[tuple[int, ...], Any], vocab_size: int) -> list:
    """Marginal law of the first emitted token from a round law (list indexed by token id)."""
    values = list(law.values())
    zero = Fraction(0) if values and isinstance(values[0], Fraction) else 0.0
    marginal = [zero] * vocab_size
    for emitted, probability in law.items():
        marginal[emitted[0]] += probability
    return marginal


def emitted_count_law(law: dict[tuple[int, ...], Any], k: int) -> list:
    """P(N = n) for n = 1..k+1 from a round law, N being the number of emitted tokens."""
    values = list(law.values())
    zero = Fraction(0) if values and isinstance(values[0], Fraction) else 0.0
    counts = [zero] * (k + 1)
    for emitted, probability in law.items():
        counts[len(emitted) - 1] += probability
    return counts
