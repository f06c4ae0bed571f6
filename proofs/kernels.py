"""Independent re-derivations, in exact rational arithmetic, of the primitives the checks compare against.

proofs/ keeps its own copy of the rule, the residual, the round and sequence laws and the warping **on
purpose**: a check must not take the oracle's implementation as the truth it checks that implementation
against. Everything here is written from `ARGUMENT.md` and imports nothing from `exactspec.reference`
(the check modules import the oracle only as the object under test of a claim about it).

A rule is a *kernel*: for each draft token x, (acceptance probability a_x, law r_x emitted on rejection).
"""

from __future__ import annotations

import math
from collections import defaultdict
from fractions import Fraction
from typing import Any, Callable, Sequence

import numpy as np

F0, F1 = Fraction(0), Fraction(1)

Kernel = Callable[[Sequence[Fraction], Sequence[Fraction]], list[tuple[Any, Sequence[Any]]]]
ToyModel = Callable[[tuple[int, ...]], Sequence[Fraction]]
# (generated tokens, accepted counts of past rounds) -> this round's k
KSchedule = Callable[[tuple, tuple], int]


# --------------------------------------------------------------------------------------------------
# Distances and small helpers
# --------------------------------------------------------------------------------------------------


def one_hot(vocab: int, index: int) -> list[Fraction]:
    return [F1 if i == index else F0 for i in range(vocab)]


def argmax(row: Sequence) -> int:
    """Index of the largest entry, the lowest id on ties (the greedy rule's tie-break)."""
    best = max(row)
    return next(i for i, v in enumerate(row) if v == best)


def tv(a: Sequence, b: Sequence) -> Any:
    """Total variation distance of two laws given as rows."""
    return sum((abs(x - y) for x, y in zip(a, b)), F0) / 2


def tv_law(a: dict, b: dict) -> Any:
    """Total variation distance of two laws given as {outcome: probability}."""
    keys = set(a) | set(b)
    return sum((abs(a.get(key, F0) - b.get(key, F0)) for key in keys), F0) / 2


def nonzero(law: dict) -> dict:
    return {key: value for key, value in law.items() if value != 0}


def fmt(x: Any) -> str:
    return f"{float(x):.3g}"


def overlap(p: Sequence, q: Sequence) -> Fraction:
    """sum_x min(p(x), q(x)): the standard rule's acceptance rate (C2)."""
    return sum((min(a, b) for a, b in zip(p, q)), F0)


def first_token_marginal(law: dict, vocab: int) -> list:
    """Law of the first emitted token of a round law {emitted tuple: probability}."""
    marginal = [F0] * vocab
    for emitted, probability in law.items():
        marginal[emitted[0]] += probability
    return marginal


def count_law(law: dict, k: int) -> list:
    """P(N = n), n = 1..k+1, N the number of tokens a round emits, from its round law."""
    counts = [F0] * (k + 1)
    for emitted, probability in law.items():
        counts[len(emitted) - 1] += probability
    return counts


# --------------------------------------------------------------------------------------------------
# Rules as kernels
# --------------------------------------------------------------------------------------------------


def standard_kernel(p: Sequence, q: Sequence) -> list[tuple[Any, Sequence]]:
    """The standard rule as the argument states it: a_x = min(1, p/q), r = norm(max(0, p - q))."""
    positive = [max(F0, a - b) for a, b in zip(p, q)]
    mass = sum(positive, F0)
    residual = [v / mass for v in positive] if mass > 0 else list(p)
    return [(min(F1, px / qx) if qx > 0 else F0, residual) for px, qx in zip(p, q)]


def sampler_match_kernel(p: Sequence, q: Sequence) -> list[tuple[Any, Sequence]]:
    """y ~ p, accept iff y == x: a_x = p(x); on rejection y ~ p conditioned on y != x."""
    out: list[tuple[Any, Sequence]] = []
    for x, px in enumerate(p):
        rest = [F0 if y == x else py / (1 - px) for y, py in enumerate(p)] if px < 1 else list(p)
        out.append((px, rest))
    return out


def greedy_kernel(p: Sequence, q: Sequence) -> list[tuple[Any, Sequence]]:
    """Accept x iff x == argmax p (lowest id on ties); otherwise emit that argmax."""
    best = argmax(p)
    target = one_hot(len(p), best)
    return [(F1 if x == best else F0, target) for x in range(len(p))]


def typical_kernel(epsilon: float = 0.09, delta: float = 0.3) -> Kernel:
    """Typical acceptance in the style of Medusa (Cai et al. 2024): accept x iff p(x) > min(eps, delta exp(-H(p))).

    On rejection a fresh token is drawn from p (the most favourable completion of the rule). The
    threshold is irrational in general, so it is compared in float64; the law stays rational.
    """

    def kernel(p: Sequence, q: Sequence) -> list[tuple[Any, Sequence]]:
        entropy = -sum(float(v) * math.log(float(v)) for v in p if v > 0)
        threshold = min(epsilon, delta * math.exp(-entropy))
        return [(F1 if float(px) > threshold else F0, list(p)) for px in p]

    return kernel


def threshold_kernel(theta: Fraction = Fraction(1, 2)) -> Kernel:
    """Thresholded acceptance: accept x deterministically iff p(x)/q(x) >= theta, else draw the residual."""

    def kernel(p: Sequence, q: Sequence) -> list[tuple[Any, Sequence]]:
        residual = standard_kernel(p, q)[0][1]
        return [(F1 if qx > 0 and px / qx >= theta else F0, residual) for px, qx in zip(p, q)]

    return kernel


# --------------------------------------------------------------------------------------------------
# Exact laws of a kernel: one position, one round, the whole loop; the target's own laws
# --------------------------------------------------------------------------------------------------


def first_token_law(
    kernel: Kernel, p: Sequence, q: Sequence, sample: Sequence | None = None
) -> list:
    """Law of the token emitted at one position: draft x ~ `sample` (default q), rule `kernel(p, q)`."""
    s = q if sample is None else sample
    out = [F0] * len(p)
    for x, (accept, rejected) in enumerate(kernel(p, q)):
        if s[x] == 0:
            continue
        out[x] += s[x] * accept
        if accept != 1:
            for y, r_y in enumerate(rejected):
                out[y] += s[x] * (1 - accept) * r_y
    return out


def kernel_round_law(kernel: Kernel, p_rows: Sequence, q_rows: Sequence) -> dict:
    """Exact law of one round of `kernel` with prefix-independent rows (p_1..p_{k+1}, q_1..q_k)."""
    k = len(q_rows)
    law: dict[tuple, Fraction] = defaultdict(lambda: F0)

    def walk(i: int, prefix: tuple, weight: Fraction) -> None:
        if i == k:
            for y, p_y in enumerate(p_rows[k]):
                if p_y > 0:
                    law[prefix + (y,)] += weight * p_y
            return
        q = q_rows[i]
        for x, (accept, rejected) in enumerate(kernel(p_rows[i], q)):
            if q[x] == 0:
                continue
            if accept > 0:
                walk(i + 1, prefix + (x,), weight * q[x] * accept)
            if accept < 1:
                for y, r_y in enumerate(rejected):
                    if r_y > 0:
                        law[prefix + (y,)] += weight * q[x] * (1 - accept) * r_y

    walk(0, (), F1)
    return dict(law)


def kernel_sequence_law(
    kernel: Kernel,
    target: ToyModel,
    draft: ToyModel,
    prompt: tuple,
    length: int,
    k: int | KSchedule,
    eos: int | None = None,
    bonus: Callable[[Sequence], Sequence] | None = None,
) -> dict[tuple[int, ...], Fraction]:
    """Exact law of the generation loop written from the argument (independent of `reference`).

    Rounds of k drafts x_i ~ q(. | context), rule `kernel` at each position with p(. | context), bonus
    from p after k acceptances. Generation stops at `length` tokens or right after `eos` is emitted
    (tokens the round would emit after it are discarded), also in the middle of a round. `bonus` maps
    the target row to the law of the bonus token (default: the row itself; greedy uses its argmax).
    `k` may be a schedule: each round's k (0 = a plain step) chosen from the past only.
    """
    law: dict[tuple[int, ...], Fraction] = defaultdict(lambda: F0)
    schedule = k if callable(k) else (lambda generated, history: k)

    def stopped(generated: tuple) -> bool:
        return len(generated) >= length or (
            eos is not None and bool(generated) and generated[-1] == eos
        )

    def start_round(generated: tuple, weight: Fraction, history: tuple) -> None:
        if stopped(generated):
            law[generated] += weight
            return
        position(generated, 0, weight, schedule(generated, history), history)

    def position(generated: tuple, i: int, weight: Fraction, k_round: int, history: tuple) -> None:
        if stopped(generated):
            law[generated] += weight
            return
        p = target(prompt + generated)
        if i == k_round:
            for y, p_y in enumerate(bonus(p) if bonus else p):
                if p_y > 0:
                    start_round(generated + (y,), weight * p_y, history + (i,))
            return
        q = draft(prompt + generated)
        for x, (accept, rejected) in enumerate(kernel(p, q)):
            if q[x] == 0:
                continue
            if accept > 0:
                position(generated + (x,), i + 1, weight * q[x] * accept, k_round, history)
            if accept < 1:
                for y, r_y in enumerate(rejected):
                    if r_y > 0:
                        start_round(
                            generated + (y,), weight * q[x] * (1 - accept) * r_y, history + (i,)
                        )

    start_round((), F1, ())
    return dict(law)


def ancestral_law(
    target: ToyModel, prompt: tuple, length: int, eos: int | None = None
) -> dict[tuple[int, ...], Fraction]:
    """Law of plain ancestral sampling from `target` with the same stopping rule."""
    law: dict[tuple[int, ...], Fraction] = {}

    def walk(generated: tuple, weight: Fraction) -> None:
        if len(generated) >= length or (eos is not None and generated and generated[-1] == eos):
            law[generated] = weight
            return
        for y, p_y in enumerate(target(prompt + generated)):
            if p_y > 0:
                walk(generated + (y,), weight * p_y)

    walk((), F1)
    return law


def product_extension(law: dict, p_rows: Sequence[Sequence]) -> dict:
    """Extend each emitted tuple to k+1 tokens with independent draws from the remaining target rows."""
    total = len(p_rows)
    out: dict[tuple, Fraction] = defaultdict(lambda: F0)

    def extend(prefix: tuple, weight: Fraction) -> None:
        if len(prefix) == total:
            out[prefix] += weight
            return
        for y, p_y in enumerate(p_rows[len(prefix)]):
            if p_y > 0:
                extend(prefix + (y,), weight * p_y)

    for emitted, probability in law.items():
        extend(tuple(emitted), probability)
    return dict(out)


def product_law(p_rows: Sequence[Sequence]) -> dict:
    """Law of k+1 independent draws, one from each target row."""
    return product_extension({(): F1}, p_rows)


# --------------------------------------------------------------------------------------------------
# Warping (temperature, top-k) and float rows as exact rationals
# --------------------------------------------------------------------------------------------------


def warped_probs(
    logits: np.ndarray, temperature: float = 1.0, top_k: int | None = None
) -> np.ndarray:
    """softmax(logits / T) restricted to the top-k scores (ties at the k-th kept), in float64."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    scores = np.asarray(logits, dtype=np.float64) / temperature
    if top_k is not None and top_k < scores.size:
        kth_largest = np.sort(scores)[scores.size - top_k]
        scores = np.where(scores >= kth_largest, scores, -np.inf)
    weights = np.exp(scores - scores.max())
    return weights / weights.sum()


def exact_probs(row: np.ndarray) -> list[Fraction]:
    """A float64 probability row as exact rationals, renormalised exactly (what an exact sampler would use)."""
    values = [Fraction(float(v)) for v in row]
    total = sum(values, F0)
    return [v / total for v in values]
