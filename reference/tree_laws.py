"""Exact laws of one tree round by enumeration: the emitted path, its length, and the target's law.

`tree_round_law(parent, model, replacement)` walks every branch of the tree rule *and* of the drafting
(children of a context drawn from its q, i.i.d. or without replacement), exactly as `laws.round_distribution`
walks the chain: the same residual, the same order of operations, so on a chain with per-depth rows it
gives `round_distribution`'s dictionary bit for bit. With `rational=True` the rows are the model's exact
`Fraction`s and every probability is exact, so "the emitted path has the target's law" is checked with
no rounding at all.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from typing import Any

import numpy as np

from .laws import MAX_BRANCHES, _residual_rational, acceptance_rate, unchecked_residual
from .tree_models import ContextRows
from .tree_sampling import check_shape, without_token
from .trees import DraftTree, children_lists

Law = dict[tuple[int, ...], Any]


class _Arithmetic:
    """Float or Fraction versions of the few operations the walk needs."""

    def __init__(self, model: ContextRows, rational: bool):
        self.zero: Any
        self.one: Any
        self.zero, self.one = (Fraction(0), Fraction(1)) if rational else (0.0, 1.0)
        self.rational, self.model = rational, model
        self.cache: dict[tuple[int, ...], tuple[list, list]] = {}

    def rows(self, path: tuple[int, ...]) -> tuple[list, list]:
        if path not in self.cache:
            if self.rational:
                self.cache[path] = self.model.rational_rows(path)
            else:
                p, q = self.model.rows(path)
                self.cache[path] = (list(map(float, p)), list(map(float, q)))
        return self.cache[path]

    def residual(self, p: list, q: list) -> list:
        if self.rational:
            return _residual_rational(p, q)
        return list(unchecked_residual(np.asarray(p), np.asarray(q)))

    def remove(self, q: list, token: int) -> list:
        if self.rational:
            kept = [Fraction(0) if i == token else v for i, v in enumerate(q)]
            mass = sum(kept, Fraction(0))
            return [v / mass for v in kept] if mass > 0 else kept
        return list(without_token(np.asarray(q), token))


def tree_round_law(
    parent: Any, model: ContextRows, replacement: bool, rational: bool = False
) -> Law:
    """Exact law {emitted tuple: probability} of one round on the shape `parent`: drafts drawn from the
    model's q rows, verified by the tree rule. Refused (ValueError) beyond MAX_BRANCHES branches."""
    shape, ar = check_shape(parent), _Arithmetic(model, rational)
    if not isinstance(model, ContextRows):
        raise ValueError(f"model must be a ContextRows, got {type(model).__name__}")
    kids = children_lists(shape)
    law: Law = defaultdict(lambda: ar.zero)
    visits = [0]

    def emit(p: list, path: tuple[int, ...], weight: Any) -> None:
        for y, p_y in enumerate(p):
            if p_y > 0:
                law[path + (y,)] += weight * p_y

    def walk(node: int, path: tuple[int, ...], weight: Any) -> None:
        visits[0] += 1
        if visits[0] > MAX_BRANCHES:
            raise ValueError(
                f"tree_round_law would walk more than {MAX_BRANCHES} branches; use a smaller "
                "model.vocab_size or tree (parent) for exact enumeration"
            )
        p, q = ar.rows(path)
        siblings(kids[node], 0, p, q, path, weight)

    def siblings(
        children: list[int], j: int, p: list, q: list, path: tuple[int, ...], weight: Any
    ) -> None:
        if j == len(children):  # a leaf, or every child rejected: emit from the (last residual) p
            emit(p, path, weight)
            return
        reject = ar.zero
        for x, q_x in enumerate(q):
            if q_x == 0:
                continue
            accept_probability = min(ar.one, p[x] / q_x)
            if accept_probability > 0:
                walk(children[j], path + (x,), weight * q_x * accept_probability)
            if replacement:
                reject += q_x * (ar.one - accept_probability)
            elif accept_probability < 1:
                siblings(
                    children,
                    j + 1,
                    ar.residual(p, q),
                    ar.remove(q, x),
                    path,
                    weight * (q_x * (ar.one - accept_probability)),
                )
        if replacement and reject > 0:
            siblings(children, j + 1, ar.residual(p, q), q, path, weight * reject)

    walk(0, (), ar.one)
    return dict(law)


def tree_law_given(tree: DraftTree) -> Law:
    """Law (float64) of one round of the tree rule on a *fixed* tree (its drafted tokens given)."""
    if not isinstance(tree, DraftTree):
        raise ValueError(f"tree must be a DraftTree, got {type(tree).__name__}")
    law: Law = defaultdict(float)

    def walk(node: int, path: tuple[int, ...], weight: float) -> None:
        p, q = tree.target_probs[node], tree.draft_probs[node]
        for child in tree.children(node):
            x = int(tree.tokens[child])
            accept = min(1.0, p[x] / q[x])
            if accept > 0:
                walk(int(child), path + (x,), weight * accept)
            weight *= 1.0 - accept
            if weight <= 0:
                return
            p, q = unchecked_residual(p, q), (q if tree.replacement else without_token(q, x))
        for y in np.flatnonzero(p > 0):
            law[path + (int(y),)] += weight * float(p[y])

    walk(0, (), 1.0)
    return dict(law)


def target_stream_law(model: ContextRows, length: int, rational: bool = False) -> Law:
    """The target's law of the first `length` tokens: prod_j p(y_<j)(y_j), every sequence enumerated."""
    ar = _Arithmetic(model, rational)
    law: Law = {}

    def walk(path: tuple[int, ...], weight: Any) -> None:
        if len(path) == length:
            law[path] = weight
            return
        for y, p_y in enumerate(ar.rows(path)[0]):
            if p_y > 0:
                walk(path + (y,), weight * p_y)

    walk((), ar.one)
    return law


def completed_stream_law(law: Law, model: ContextRows, length: int, rational: bool = False) -> Law:
    """The law of an emitted tuple completed to `length` tokens by the target (what later rounds would
    emit): an exact rule gives `target_stream_law(model, length)`."""
    ar = _Arithmetic(model, rational)
    out: Law = defaultdict(lambda: ar.zero)

    def extend(path: tuple[int, ...], weight: Any) -> None:
        if len(path) >= length:
            out[path[:length]] += weight
            return
        for y, p_y in enumerate(ar.rows(path)[0]):
            if p_y > 0:
                extend(path + (y,), weight * p_y)

    for emitted, probability in law.items():
        extend(emitted, probability)
    return dict(out)


def length_law(law: Law, max_length: int) -> list:
    """P(N = n) for n = 1..max_length (N the number of emitted tokens: accepted depth + 1)."""
    values = list(law.values())
    zero = Fraction(0) if values and isinstance(values[0], Fraction) else 0.0
    counts = [zero] * max_length
    for emitted, probability in law.items():
        counts[len(emitted) - 1] += probability
    return counts


def depth_rows_length_law(parent: Any, model: ContextRows, rational: bool = False) -> list:
    """Closed form of the length law for a per-depth model (`by="depth"`) drafting with replacement: child
    j of a node is accepted w.p. prod_{i<j} (1 - alpha_i) alpha_j, alpha_i = alpha(p^(i), q), p^(i) the
    i-th residual. Independent of the enumeration: it never looks at the drafted tokens."""
    if model.by != "depth":
        raise ValueError(f"model.by must be 'depth' for the closed form, got {model.by!r}")
    shape, ar = check_shape(parent), _Arithmetic(model, rational)
    kids = children_lists(shape)
    depth_of = [0] * shape.size
    for node in range(1, shape.size):
        depth_of[node] = depth_of[int(shape[node])] + 1
    counts = [ar.zero] * (max(depth_of) + 1)

    def reach(node: int, weight: Any) -> None:
        p, q = ar.rows((0,) * depth_of[node])
        for child in kids[node]:
            alpha = acceptance_rate(p, q) if rational else float(np.minimum(p, q).sum())
            reach(child, weight * alpha)
            weight = weight * (ar.one - alpha)
            p = ar.residual(p, q)
        counts[depth_of[node]] += weight

    reach(0, ar.one)
    return counts
