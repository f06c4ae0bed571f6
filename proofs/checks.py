"""Machine checks of the correctness argument in `proofs/ARGUMENT.md`.

Every check is a function returning a `CheckResult`; the claims it exercises are registered with it
(`CHECKS`). Checks take the object under test as a keyword argument whose default is the oracle's
function (or the rule as the argument states it), so `tests/test_proofs.py` can feed a deliberately
wrong rule or formula and see the check fail.

Three kinds of evidence:

* exact rational enumeration (`fractions.Fraction`): many random rational cases from fixed seeds plus
  the edge cases (p == q, q = 0 on the support of p, disjoint supports, one-hot rows);
* symbolic identities with sympy where they hold in general (in alpha, k, c);
* counter-examples for the rules that are *not* exact, computed here (never typed in).

`python -m proofs` (or `exactspec proofs`) runs them all and exits non-zero if any fails.
"""

from __future__ import annotations

import argparse
import importlib
import math
import random
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

F0, F1 = Fraction(0), Fraction(1)
ROOT = Path(__file__).resolve().parent.parent
ARGUMENT = Path(__file__).resolve().parent / "ARGUMENT.md"
SEED = 20230718  # fixed: every random case below is reproducible


# --------------------------------------------------------------------------------------------------
# Results and the registry
# --------------------------------------------------------------------------------------------------


@dataclass
class CheckResult:
    name: str
    passed: bool
    detail: str
    cases: int = 0
    skipped: bool = False
    seconds: float = 0.0


@dataclass
class Check:
    name: str
    claims: tuple[str, ...]
    func: Callable[..., CheckResult]
    doc: str = ""


CHECKS: dict[str, Check] = {}


def check(*claims: str):
    """Register a check function under its name for the listed claims."""

    def register(func):
        name = func.__name__
        CHECKS[name] = Check(name, claims, func, (func.__doc__ or "").strip().splitlines()[0])
        return func

    return register


class _Fail(Exception):
    """Raised inside a check to stop at the first failing case with a precise message."""


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise _Fail(message)


def _run_guarded(name: str, body: Callable[[], tuple[int, str]]) -> CheckResult:
    try:
        cases, detail = body()
        return CheckResult(name, True, detail, cases)
    except _Fail as failure:
        return CheckResult(name, False, str(failure))
    except Exception as error:  # a crash is a failure of the check, never a pass
        return CheckResult(name, False, f"{type(error).__name__}: {error}")


# --------------------------------------------------------------------------------------------------
# Rational helpers: random cases, edge cases, distances
# --------------------------------------------------------------------------------------------------


def random_dist(rng: random.Random, vocab: int, denom: int = 12, p_zero: float = 0.3) -> list[Fraction]:
    """A random rational distribution with some exact zeros."""
    while True:
        weights = [0 if rng.random() < p_zero else rng.randint(1, denom) for _ in range(vocab)]
        if sum(weights):
            total = sum(weights)
            return [Fraction(w, total) for w in weights]


def one_hot(vocab: int, index: int) -> list[Fraction]:
    return [F1 if i == index else F0 for i in range(vocab)]


def edge_pairs() -> list[tuple[str, list[Fraction], list[Fraction]]]:
    """(name, p, q) edge cases of one position, V = 4."""
    h, q4 = Fraction(1, 2), Fraction(1, 4)
    uniform = [q4] * 4
    skew = [Fraction(5, 10), Fraction(3, 10), Fraction(15, 100), Fraction(5, 100)]
    return [
        ("p == q", skew, list(skew)),
        ("p == q uniform", uniform, list(uniform)),
        ("q = 0 on part of supp p", [h, h, F0, F0], [F0, q4, Fraction(3, 4), F0]),
        ("disjoint supports (alpha = 0)", [h, h, F0, F0], [F0, F0, h, h]),
        ("p one-hot, q uniform", one_hot(4, 2), uniform),
        ("q one-hot inside supp p", skew, one_hot(4, 1)),
        ("q one-hot outside supp p", [h, h, F0, F0], one_hot(4, 3)),
        ("p uniform, q one-hot", uniform, one_hot(4, 0)),
        ("both one-hot, same", one_hot(4, 3), one_hot(4, 3)),
        ("p(x) == q(x) on one token", [h, q4, q4, F0], [h, F0, Fraction(1, 8), Fraction(3, 8)]),
    ]


def random_pairs(seed: int, count: int, vocabs: Sequence[int] = (2, 3, 4, 5, 6)) -> list[tuple[str, list, list]]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        vocab = rng.choice(list(vocabs))
        out.append((f"random #{i} (V={vocab})", random_dist(rng, vocab), random_dist(rng, vocab)))
    return out


def tv(a: Sequence, b: Sequence) -> Any:
    return sum((abs(x - y) for x, y in zip(a, b)), F0) / 2


def tv_law(a: dict, b: dict) -> Any:
    keys = set(a) | set(b)
    return sum((abs(a.get(key, F0) - b.get(key, F0)) for key in keys), F0) / 2


def _nonzero(law: dict) -> dict:
    return {key: value for key, value in law.items() if value != 0}


def _fmt(x: Any) -> str:
    return f"{float(x):.3g}"


# --------------------------------------------------------------------------------------------------
# Rules as kernels: for each draft token x, (acceptance probability a_x, law r_x emitted on rejection)
# --------------------------------------------------------------------------------------------------

Kernel = Callable[[Sequence[Fraction], Sequence[Fraction]], list[tuple[Any, Sequence[Any]]]]


def standard_kernel(p: Sequence, q: Sequence) -> list[tuple[Any, Sequence]]:
    """The standard rule as the argument states it: a_x = min(1, p/q), r = norm(max(0, p - q))."""
    positive = [max(F0, a - b) for a, b in zip(p, q)]
    mass = sum(positive, F0)
    residual = [v / mass for v in positive] if mass > 0 else list(p)
    return [(min(F1, px / qx) if qx > 0 else F0, residual) for px, qx in zip(p, q)]


def sampler_match_kernel(p: Sequence, q: Sequence) -> list[tuple[Any, Sequence]]:
    """y ~ p, accept iff y == x: a_x = p(x); on rejection y ~ p conditioned on y != x."""
    out = []
    for x, px in enumerate(p):
        rest = [F0 if y == x else py / (1 - px) for y, py in enumerate(p)] if px < 1 else list(p)
        out.append((px, rest))
    return out


def _argmax(row: Sequence) -> int:
    best = max(row)
    return next(i for i, v in enumerate(row) if v == best)  # lowest id on ties


def greedy_kernel(p: Sequence, q: Sequence) -> list[tuple[Any, Sequence]]:
    """Accept x iff x == argmax p (lowest id on ties); otherwise emit that argmax."""
    best = _argmax(p)
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


def first_token_law(kernel: Kernel, p: Sequence, q: Sequence, sample: Sequence | None = None) -> list:
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


ToyModel = Callable[[tuple[int, ...]], Sequence[Fraction]]


KSchedule = Callable[[tuple, tuple], int]  # (generated tokens, accepted counts of past rounds) -> this round's k


def kernel_sequence_law(
    kernel: Kernel, target: ToyModel, draft: ToyModel, prompt: tuple, length: int, k: int | KSchedule,
    eos: int | None = None, bonus: Callable[[Sequence], Sequence] | None = None,
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
        return len(generated) >= length or (eos is not None and bool(generated) and generated[-1] == eos)

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
                        start_round(generated + (y,), weight * q[x] * (1 - accept) * r_y, history + (i,))

    start_round((), F1, ())
    return dict(law)


def ancestral_law(target: ToyModel, prompt: tuple, length: int, eos: int | None = None) -> dict[tuple[int, ...], Fraction]:
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


def toy_model(seed: str, vocab: int, denom: int = 9, p_zero: float = 0.3, eos: int | None = None) -> ToyModel:
    """A prefix-dependent rational model: each prefix gets its own row from a seeded generator."""

    @lru_cache(maxsize=None)
    def row(prefix: tuple) -> tuple:
        rng = random.Random(f"{seed}|{prefix}")
        dist = random_dist(rng, vocab, denom, p_zero)
        if eos is not None and rng.random() < 0.5:  # EOS with some mass, often
            dist = [v / 2 for v in dist]
            dist[eos] += Fraction(1, 2)
        return tuple(dist)

    return row


def greedy_model(model: ToyModel) -> ToyModel:
    return lambda prefix: tuple(one_hot(len(model(prefix)), _argmax(model(prefix))))


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
    return product_extension({(): F1}, p_rows)


# --------------------------------------------------------------------------------------------------
# C1, C2: one position
# --------------------------------------------------------------------------------------------------


@check("C1")
def sym_single_position(min_plus_residual: Callable | None = None) -> CheckResult:
    """sympy: min(a, b) + max(0, a - b) = a for all reals a, b (both orders of a, b)."""
    import sympy as sp

    def body():
        a, b, t = sp.symbols("a b t", real=True)
        t = sp.Symbol("t", nonnegative=True)
        identity = min_plus_residual or (lambda x, y: sp.Min(x, y) + sp.Max(0, x - y))
        for name, subs in (("a <= b", {a: b - t}), ("a >= b", {b: a - t})):
            lhs = identity(a, b).subs(subs)
            rhs = a.subs(subs)
            _expect(sp.simplify(lhs - rhs) == 0, f"min(a,b) + max(0,a-b) - a != 0 when {name}: {sp.simplify(lhs - rhs)}")
        # summed over the vocabulary: sum max(0, p - q) = 1 - sum min(p, q) when sum p = 1
        p = sp.symbols("p0:4", nonnegative=True)
        q = sp.symbols("q0:4", nonnegative=True)
        for sign in range(16):  # every pattern of p_i >= q_i / p_i < q_i
            subs = {}
            for i in range(4):
                s = sp.Symbol(f"s{i}", nonnegative=True)
                subs[q[i] if sign >> i & 1 else p[i]] = (p[i] - s) if sign >> i & 1 else (q[i] - s)
            lhs = sum(identity(p[i], q[i]).subs(subs) for i in range(4))
            _expect(sp.simplify(lhs - sum(p[i].subs(subs) for i in range(4))) == 0, "summed identity fails")
        return 18, "identity holds in both orders and summed over all 16 sign patterns"

    return _run_guarded("sym_single_position", body)


@check("C1", "C2")
def exact_single_position(round_law: Callable | None = None, acceptance: Callable | None = None,
                          residual_fn: Callable | None = None, cases: int = 300) -> CheckResult:
    """Fraction enumeration, k = 1: the first emitted token has law p exactly; P(accept) = sum min = 1 - TV."""
    from exactspec.reference.laws import acceptance_rate, emitted_count_law, first_token_marginal, residual, round_distribution

    round_law = round_law or round_distribution
    acceptance = acceptance or acceptance_rate
    residual_fn = residual_fn or residual

    def body():
        pairs = edge_pairs() + random_pairs(SEED + 1, cases)
        rng = random.Random(SEED + 2)
        for name, p, q in pairs:
            vocab = len(p)
            bonus = random_dist(rng, vocab)
            law = round_law([p, bonus], [q])
            marginal = first_token_marginal(law, vocab)
            _expect(list(marginal) == list(p), f"{name}: first-token law {marginal} != p {p} (q = {q})")
            alpha = sum((min(a, b) for a, b in zip(p, q)), F0)
            _expect(alpha == 1 - tv(p, q), f"{name}: sum min(p,q) != 1 - TV")
            _expect(acceptance(p, q) == alpha, f"{name}: acceptance_rate {acceptance(p, q)} != sum min {alpha}")
            counts = emitted_count_law(law, 1)
            _expect(counts[1] == alpha, f"{name}: P(accept) = P(N=2) = {counts[1]} != alpha = {alpha}")
            r = residual_fn(p, q)
            positive = [max(F0, a - b) for a, b in zip(p, q)]
            if alpha < 1:
                _expect([(1 - alpha) * v for v in r] == positive, f"{name}: (1 - alpha) * residual != max(0, p - q)")
            else:
                _expect(list(r) == list(p), f"{name}: residual should fall back to p when p == q")
            # the independent kernel gives the same one-position law
            _expect(first_token_law(standard_kernel, p, q) == list(p), f"{name}: kernel law != p")
        return len(pairs), f"{len(edge_pairs())} edge + {cases} random rational cases, V in 2..6"

    return _run_guarded("exact_single_position", body)


# --------------------------------------------------------------------------------------------------
# C3, C4, C5: the chain of k drafts, the loop, stopping
# --------------------------------------------------------------------------------------------------


@check("C3")
def exact_round_chain(round_law: Callable | None = None, cases: int = 120) -> CheckResult:
    """Fraction enumeration, k = 1..3: the round, completed by draws from the unused target rows, has law prod p_i."""
    from exactspec.reference.laws import round_distribution

    round_law = round_law or round_distribution

    def body():
        rng = random.Random(SEED + 3)
        count = 0
        edges = edge_pairs()
        for i in range(cases):
            k = 1 + i % 3
            vocab = rng.choice([2, 3, 4] if k < 3 else [2, 3])
            p_rows = [random_dist(rng, vocab) for _ in range(k + 1)]
            q_rows = [random_dist(rng, vocab) for _ in range(k)]
            if i < len(edges) and vocab == 4:
                p_rows[0], q_rows[0] = edges[i][1], edges[i][2]
            law = round_law(p_rows, q_rows)
            _expect(sum(law.values(), F0) == 1, f"case {i}: round law does not sum to 1")
            extended = _nonzero(product_extension(law, p_rows))
            expected = _nonzero(product_law(p_rows))
            _expect(extended == expected, f"case {i} (k={k}, V={vocab}): completed round law != prod p_i, "
                                          f"TV = {_fmt(tv_law(extended, expected))}")
            count += 1
        # the edge cases as whole rounds with k = 2 (same pair at both draft positions)
        for name, p, q in edges:
            p_rows, q_rows = [p, p, p], [q, q]
            extended = _nonzero(product_extension(round_law(p_rows, q_rows), p_rows))
            _expect(extended == _nonzero(product_law(p_rows)), f"{name}: k=2 round law wrong")
            count += 1
        return count, f"{count} rounds (k = 1..3, V = 2..4, position-dependent rows, edge cases)"

    return _run_guarded("exact_round_chain", body)


def _sequence_cases(seed: int) -> list[tuple[str, ToyModel, ToyModel, int, int, int]]:
    """(name, target, draft, vocab, length, k) for prefix-dependent toy models."""
    cases = []
    for i, (vocab, length, k) in enumerate([(2, 5, 1), (2, 5, 2), (2, 5, 3), (3, 4, 1), (3, 4, 2), (3, 3, 3), (2, 4, 4)]):
        target = toy_model(f"{seed}-t{i}", vocab)
        cases.append((f"random V={vocab} L={length} k={k}", target, toy_model(f"{seed}-d{i}", vocab), vocab, length, k))
    t = toy_model(f"{seed}-edge", 3)
    cases.append(("draft == target", t, t, 3, 4, 2))
    cases.append(("draft one-hot (deterministic)", t, greedy_model(toy_model(f"{seed}-g", 3)), 3, 4, 2))
    cases.append(("greedy target, random draft", greedy_model(t), toy_model(f"{seed}-d", 3), 3, 4, 2))
    sparse_t, sparse_d = toy_model(f"{seed}-st", 3, p_zero=0.5), toy_model(f"{seed}-sd", 3, p_zero=0.5)
    cases.append(("sparse rows (zeros on both sides)", sparse_t, sparse_d, 3, 4, 3))
    return cases


@check("C4", "C5")
def exact_sequence_law(speculative_law: Callable | None = None, target_law: Callable | None = None) -> CheckResult:
    """Fraction enumeration: the whole loop (prefix-dependent p, q; max-token cut mid-round) has the target's sequence law."""
    from exactspec.reference.sequences import speculative_sequence_law, target_sequence_law

    speculative_law = speculative_law or speculative_sequence_law
    target_law = target_law or target_sequence_law

    def body():
        cases = _sequence_cases(SEED + 4)
        for name, target, draft, vocab, length, k in cases:
            prompt = (0,)
            expected = _nonzero(target_law(target, prompt, length))
            _expect(expected == _nonzero(ancestral_law(target, prompt, length)), f"{name}: target_sequence_law != ancestral law")
            got = _nonzero(speculative_law(target, draft, prompt, length, k))
            _expect(got == expected, f"{name}: speculative law != target law, TV = {_fmt(tv_law(got, expected))}")
            mine = _nonzero(kernel_sequence_law(standard_kernel, target, draft, prompt, length, k))
            _expect(mine == expected, f"{name}: loop written from the argument != target law")
        return len(cases), f"{len(cases)} prefix-dependent model pairs, lengths 3..5, k = 1..4 (oracle and independent loop)"

    return _run_guarded("exact_sequence_law", body)


def _schedules(k_max: int) -> dict[str, KSchedule]:
    """k schedules that look only at the past, as adaptive implementations do (k = 0 is a plain step)."""
    return {
        "grow-shrink": lambda g, h: min(h[-1] + 1, k_max) if h else 1,
        "context": lambda g, h: (sum(g) + len(h)) % (k_max + 1),
        "acceptance-rate": lambda g, h: k_max if sum(h) * 2 >= len(h) else (len(g) % 2),
    }


@check("C4")
def exact_adaptive_k(kernel: Kernel = standard_kernel) -> CheckResult:
    """Fraction enumeration: a k chosen afresh each round from the past (outcomes, context; k = 0 allowed) keeps the law."""

    def body():
        count = 0
        for name, target, draft, vocab, length, k in _sequence_cases(SEED + 9)[:6]:
            expected = _nonzero(ancestral_law(target, (0,), length))
            for label, schedule in _schedules(max(k, 2)).items():
                got = _nonzero(kernel_sequence_law(kernel, target, draft, (0,), length, schedule))
                _expect(got == expected, f"{name}, schedule {label}: law != target's, TV = {_fmt(tv_law(got, expected))}")
                count += 1
        return count, f"{count} (model pair, schedule) cases: grow/shrink, context-driven and acceptance-driven k in 0..4"

    return _run_guarded("exact_adaptive_k", body)


@check("C5")
def exact_stopping(kernel: Kernel = standard_kernel) -> CheckResult:
    """Fraction enumeration: stopping at EOS (discarding the rest of the round) and at max tokens keeps the target's law."""

    def body():
        count = 0
        for i, (vocab, length, k) in enumerate([(3, 4, 1), (3, 4, 2), (3, 4, 3), (2, 6, 2), (4, 3, 2)]):
            eos = vocab - 1
            target = toy_model(f"eos-t{i}", vocab, eos=eos)
            draft = toy_model(f"eos-d{i}", vocab, eos=eos if i % 2 else None)
            expected = _nonzero(ancestral_law(target, (), length, eos))
            got = _nonzero(kernel_sequence_law(kernel, target, draft, (), length, k, eos))
            _expect(got == expected, f"V={vocab} L={length} k={k}: EOS-stopped loop law != target's, TV = {_fmt(tv_law(got, expected))}")
            _expect(any(s and s[-1] == eos and len(s) < length for s in expected), "case never stops at EOS early")
            count += 1
        return count, f"{count} EOS + max-token cases, V = 2..4, k = 1..3"

    return _run_guarded("exact_stopping", body)


# --------------------------------------------------------------------------------------------------
# C6: maximal coupling
# --------------------------------------------------------------------------------------------------


@check("C6")
def coupling_bound(rule_acceptance: Callable | None = None, cases: int = 60) -> CheckResult:
    """alpha = 1 - TV is attained by the standard rule and is the LP maximum of P(X = Y) over couplings of (q, p)."""
    from scipy.optimize import linprog

    def standard_acceptance(p, q):
        return sum((q[x] * a for x, (a, _) in enumerate(standard_kernel(p, q))), F0)

    rule_acceptance = rule_acceptance or standard_acceptance

    def body():
        pairs = edge_pairs() + random_pairs(SEED + 5, cases, vocabs=(2, 3, 4, 5))
        worst_gap = 0.0
        for name, p, q in pairs:
            vocab = len(p)
            alpha = sum((min(a, b) for a, b in zip(p, q)), F0)
            got = rule_acceptance(p, q)
            # a valid rule emits p; its acceptance can never beat the best coupling
            _expect(first_token_law(standard_kernel, p, q) == list(p), f"{name}: standard kernel not valid")
            _expect(got == alpha, f"{name}: rule accepts with {got}, 1 - TV = {alpha}")
            match = sum((a * b for a, b in zip(p, q)), F0)
            _expect(match <= alpha, f"{name}: sampler-match acceptance {match} > alpha {alpha}")
            # LP over couplings pi(x, y) >= 0 with marginals q (x) and p (y): max sum_x pi(x, x)
            cost = -np.eye(vocab).ravel()
            a_eq = np.vstack([np.kron(np.eye(vocab), np.ones(vocab)), np.kron(np.ones(vocab), np.eye(vocab))])
            b_eq = np.concatenate([[float(v) for v in q], [float(v) for v in p]])
            result = linprog(cost, A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs")
            _expect(result.status == 0, f"{name}: LP failed: {result.message}")
            gap = abs(-result.fun - float(alpha))
            worst_gap = max(worst_gap, gap)
            _expect(gap < 1e-9, f"{name}: LP max P(X=Y) = {-result.fun} != alpha = {float(alpha)}")
        return len(pairs), f"{len(pairs)} cases; LP optimum = alpha within {worst_gap:.1e}; sum p q <= alpha"

    return _run_guarded("coupling_bound", body)


# --------------------------------------------------------------------------------------------------
# C7, C8: number of tokens per round and walltime
# --------------------------------------------------------------------------------------------------


@check("C7")
def sym_token_count(law_formula: Callable | None = None, mean_formula: Callable | None = None,
                    var_formula: Callable | None = None) -> CheckResult:
    """sympy, k = 1..8: sum P(N=n) = 1, E[N] = (1 - a^(k+1))/(1 - a), Var[N] closed form; per-position E[N]."""
    import sympy as sp

    a = sp.Symbol("alpha", positive=True)

    def zero(expr) -> bool:  # rational functions in alpha: exact and fast
        return sp.expand(sp.numer(sp.together(expr))) == 0

    law_formula = law_formula or (lambda al, k, n: al ** (n - 1) * (1 - al) if n <= k else al**k)
    mean_formula = mean_formula or (lambda al, k: (1 - al ** (k + 1)) / (1 - al))
    var_formula = var_formula or (lambda al, k: (al - (2 * k + 1) * al ** (k + 1) * (1 - al) - al ** (2 * k + 2)) / (1 - al) ** 2)

    def body():
        for k in range(1, 9):
            law = [law_formula(a, k, n) for n in range(1, k + 2)]
            _expect(zero(sum(law) - 1), f"k={k}: law does not sum to 1")
            mean = sum(n * law[n - 1] for n in range(1, k + 2))
            _expect(zero(mean - mean_formula(a, k)), f"k={k}: sum n P(N=n) != mean formula")
            second = sum(n**2 * law[n - 1] for n in range(1, k + 2))
            _expect(zero(second - mean**2 - var_formula(a, k)), f"k={k}: variance formula wrong")
            # per-position rates: P(N >= n) = prod_{i<n} alpha_i, E[N] = 1 + sum_j prod_{i<=j} alpha_i
            al = sp.symbols(f"a1:{k + 1}", positive=True)
            per = [sp.Mul(*al[: n - 1]) * (1 - al[n - 1]) for n in range(1, k + 1)] + [sp.Mul(*al)]
            _expect(sp.expand(sum(per) - 1) == 0, f"k={k}: per-position law does not sum to 1")
            mean_per = 1 + sum(sp.Mul(*al[: j + 1]) for j in range(k))
            _expect(sp.expand(sum(n * per[n - 1] for n in range(1, k + 2)) - mean_per) == 0, f"k={k}: per-position mean wrong")
            var_per = sum((2 * n - 1) * sp.Mul(*al[: n - 1]) for n in range(1, k + 2)) - mean_per**2
            _expect(sp.expand(sum(n**2 * per[n - 1] for n in range(1, k + 2)) - mean_per**2 - var_per) == 0,
                    f"k={k}: per-position variance wrong")
        return 8, "k = 1..8: law, mean and variance (constant alpha) and per-position law, mean, variance"

    return _run_guarded("sym_token_count", body)


@check("C7")
def oracle_token_count(tokens_law_fn: Callable | None = None, expected_fn: Callable | None = None,
                       variance_fn: Callable | None = None, round_law: Callable | None = None) -> CheckResult:
    """The oracle's count law / mean / variance agree with the formulas; exact count law of enumerated rounds."""
    from exactspec.reference import speedup
    from exactspec.reference.laws import emitted_count_law, round_distribution

    tokens_law_fn = tokens_law_fn or speedup.tokens_law_per_position
    expected_fn = expected_fn or speedup.expected_tokens
    variance_fn = variance_fn or speedup.tokens_variance
    round_law = round_law or round_distribution

    def body():
        count = 0
        for k in range(1, 9):
            for alpha in (0.0, 0.1, 0.37, 0.5, 0.8, 0.99, 1.0):
                mean = sum(alpha**j for j in range(k + 1))
                var = sum((2 * n - 1) * alpha ** (n - 1) for n in range(1, k + 2)) - mean**2
                _expect(abs(expected_fn(alpha, k) - mean) < 1e-12, f"expected_tokens({alpha}, {k}) != {mean}")
                _expect(abs(variance_fn(alpha, k) - var) < 1e-12, f"tokens_variance({alpha}, {k}) != {var}")
                count += 1
        rng = random.Random(SEED + 6)
        for i in range(60):
            k = 1 + i % 3
            vocab = rng.choice([2, 3, 4])
            p_rows = [random_dist(rng, vocab) for _ in range(k + 1)]
            q_rows = [random_dist(rng, vocab) for _ in range(k)]
            alphas = [sum((min(a, b) for a, b in zip(p, q)), F0) for p, q in zip(p_rows, q_rows)]
            exact = [math.prod(alphas[: n - 1]) * (1 - alphas[n - 1]) for n in range(1, k + 1)] + [math.prod(alphas)]
            got = emitted_count_law(round_law(p_rows, q_rows), k)
            _expect(list(got) == exact, f"case {i}: enumerated count law {got} != prod formula {exact}")
            oracle = tokens_law_fn([float(v) for v in alphas])
            _expect(np.allclose(oracle, [float(v) for v in exact], atol=1e-12), f"case {i}: tokens_law_per_position wrong")
            count += 1
        return count, f"{count} cases: oracle formulas vs closed forms; Fraction count laws of 60 rounds"

    return _run_guarded("oracle_token_count", body)


@check("C8")
def sym_improvement(improvement_fn: Callable | None = None, optimal_fn: Callable | None = None) -> CheckResult:
    """sympy: d/dk of Leviathan's factor; k=1 pays iff alpha > c; optimal_k = best integer near the stationary point."""
    import sympy as sp
    from scipy.optimize import brentq

    from exactspec.reference import speedup

    improvement_fn = improvement_fn or speedup.improvement_factor
    optimal_fn = optimal_fn or speedup.optimal_k

    def body():
        a, c, k = sp.symbols("alpha c k", positive=True)
        factor = (1 - a ** (k + 1)) / ((1 - a) * (c * k + 1))
        derivative = (-(a ** (k + 1)) * sp.log(a) * (c * k + 1) - c * (1 - a ** (k + 1))) / ((1 - a) * (c * k + 1) ** 2)
        _expect(sp.simplify(sp.diff(factor, k) - derivative) == 0, "derivative of the improvement factor wrong")
        _expect(sp.simplify(factor.subs(k, 1) - (1 + a) / (1 + c)) == 0, "k = 1 factor != (1 + alpha)/(1 + c)")
        v = sp.Function("v")
        general = (1 - a ** (k + 1)) / ((1 - a) * (c * k + v(k + 1)))
        _expect(sp.simplify(general.subs(v(k + 1), 1) - factor) == 0, "v = 1 does not reduce to Leviathan's factor")
        numerator = sp.lambdify((a, c, k), -(a ** (k + 1)) * sp.log(a) * (c * k + 1) - c * (1 - a ** (k + 1)))
        count = 0
        for alpha in (0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95):
            for cost in (0.01, 0.05, 0.1, 0.2, 0.5):
                for kk in range(1, 9):
                    exact = (1 - alpha ** (kk + 1)) / ((1 - alpha) * (cost * kk + 1))
                    _expect(abs(improvement_fn(alpha, kk, cost) - exact) < 1e-12, f"improvement_factor({alpha},{kk},{cost}) != {exact}")
                best, value = optimal_fn(alpha, cost, None, 64)
                brute = max(range(1, 65), key=lambda kk: (1 - alpha ** (kk + 1)) / ((1 - alpha) * (cost * kk + 1)))
                _expect(best == brute, f"optimal_k({alpha}, {cost}) = {best}, brute force {brute}")
                # quasi-concavity: the integer optimum is next to the stationary point of the continuous factor
                if numerator(alpha, cost, 1.0) > 0 and numerator(alpha, cost, 64.0) < 0:
                    star = brentq(lambda x: numerator(alpha, cost, x), 1.0, 64.0)
                    _expect(best in (math.floor(star), math.ceil(star)), f"alpha={alpha}, c={cost}: k*={star:.3f}, optimal_k={best}")
                # k = 1 pays off exactly when alpha > c (then the optimum pays off too)
                one = improvement_fn(alpha, 1, cost)
                _expect((one > 1) == (alpha > cost) and (alpha <= cost or value > 1),
                        f"alpha={alpha}, c={cost}: k=1 factor {one} inconsistent with alpha > c")
                # generalised cost v(n) = 1 + 0.05 (n - 1) (convex): factor = E[N]/(ck + v(k+1))
                verify = lambda n: 1 + 0.05 * (n - 1)
                got = improvement_fn(alpha, 3, cost, verify)
                want = (1 - alpha**4) / ((1 - alpha) * (3 * cost + verify(4)))
                _expect(abs(got - want) < 1e-12, f"generalised factor wrong: {got} != {want}")
                # with convex v the factor is quasi-concave: optimal_k = brute force = first local maximum
                values = [(1 - alpha ** (kk + 1)) / ((1 - alpha) * (cost * kk + verify(kk + 1))) for kk in range(1, 65)]
                best_v, _ = optimal_fn(alpha, cost, verify, 64)
                first_peak = next((kk for kk in range(1, 64) if values[kk] <= values[kk - 1]), 64)
                _expect(best_v == 1 + int(np.argmax(values)) == first_peak,
                        f"alpha={alpha}, c={cost}, convex v: optimal_k {best_v}, brute {1 + int(np.argmax(values))}, first peak {first_peak}")
                count += 1
        return count, f"derivative and k = 1 identity symbolic; {count} (alpha, c) grid points vs brute force and k*"

    return _run_guarded("sym_improvement", body)


# --------------------------------------------------------------------------------------------------
# C9: warping
# --------------------------------------------------------------------------------------------------


def _exact_probs(row: np.ndarray) -> list[Fraction]:
    """A float64 probability row as exact rationals, renormalised exactly (what an exact sampler would use)."""
    values = [Fraction(float(v)) for v in row]
    total = sum(values, F0)
    return [v / total for v in values]


def warping_cases():
    """(name, intended p, q in the ratio, law the draft really samples from) for mismatched warping."""
    from exactspec.reference.warping import warp_probs

    rng = np.random.default_rng(SEED + 7)
    target_logits = np.round(rng.normal(size=6) * 2, 2)
    draft_logits = np.round(target_logits + rng.normal(size=6), 2)
    temperature, top_k = 0.6, 3
    p_warped = _exact_probs(warp_probs(target_logits, temperature, top_k))
    q_warped = _exact_probs(warp_probs(draft_logits, temperature, top_k))
    p_raw = _exact_probs(warp_probs(target_logits))
    q_raw = _exact_probs(warp_probs(draft_logits))
    q_temp_only = _exact_probs(warp_probs(draft_logits, temperature))
    return [
        ("consistent: p, q both warped (T=0.6, top-k=3)", p_warped, p_warped, q_warped, q_warped),
        ("draft samples warped q, ratio uses q at T=1", p_warped, p_warped, q_raw, q_warped),
        ("draft samples top-k q, ratio uses q without top-k", p_warped, p_warped, q_temp_only, q_warped),
        ("ratio uses the raw target p (T=1), intended warped p", p_warped, p_raw, q_warped, q_warped),
    ]


@check("C9")
def warping_counterexamples(law: Callable | None = None, min_tv: float = 1e-3) -> CheckResult:
    """Exact laws: warping p and q consistently gives the warped p; each mismatch computed here gives TV > 0."""
    law = law or (lambda intended, p_used, q_used, sampled: first_token_law(standard_kernel, p_used, q_used, sampled))

    def body():
        details = []
        for i, (name, intended, p_used, q_used, sampled) in enumerate(warping_cases()):
            emitted = law(intended, p_used, q_used, sampled)
            distance = tv(emitted, intended)
            if i == 0:
                _expect(distance == 0, f"{name}: emitted law differs from the warped p (TV {_fmt(distance)})")
            else:
                _expect(distance > min_tv, f"{name}: no counter-example (TV {_fmt(distance)})")
                details.append(f"{name.split(',')[0] if ',' in name else name}: TV={_fmt(distance)}")
        return 4, "consistent warping exact; " + "; ".join(details)

    return _run_guarded("warping_counterexamples", body)


# --------------------------------------------------------------------------------------------------
# C10, C11: greedy and sampler-match are exact; typical and thresholded acceptance are not
# --------------------------------------------------------------------------------------------------


@check("C10")
def exact_greedy_sampler_match(sampler_match: Kernel = sampler_match_kernel, greedy: Kernel = greedy_kernel) -> CheckResult:
    """Fraction enumeration: sampler-match gives the target's sequence law; greedy verification gives greedy decoding."""

    def body():
        cases = _sequence_cases(SEED + 8)
        for name, target, draft, vocab, length, k in cases:
            expected = _nonzero(ancestral_law(target, (0,), length))
            got = _nonzero(kernel_sequence_law(sampler_match, target, draft, (0,), length, k))
            _expect(got == expected, f"{name}: sampler-match loop law != target law, TV = {_fmt(tv_law(got, expected))}")
            greedy_target = greedy_model(target)
            expected_greedy = _nonzero(ancestral_law(greedy_target, (0,), length))
            got_greedy = _nonzero(kernel_sequence_law(greedy, target, draft, (0,), length, k,
                                                      bonus=lambda row: one_hot(len(row), _argmax(row))))
            _expect(got_greedy == expected_greedy, f"{name}: greedy verification != greedy decoding of the target")
            _expect(len(expected_greedy) == 1, "greedy decoding should be deterministic")
        return 2 * len(cases), f"{len(cases)} prefix-dependent model pairs for each rule"

    return _run_guarded("exact_greedy_sampler_match", body)


class _GridUniforms(np.random.Generator):
    """A numpy Generator whose `random` returns prescribed arrays in order (to enumerate uniforms on a grid)."""

    def __init__(self, draws: list[np.ndarray]):
        super().__init__(np.random.PCG64(0))
        self._draws = list(draws)

    def random(self, size=None, dtype=np.float64, out=None):  # noqa: D102 - the Generator API
        value = np.asarray(self._draws.pop(0), dtype=np.float64)
        return value.reshape(size) if size is not None else float(value)


def _lcm_denominators(values) -> int:
    out = 1
    for v in values:
        out = math.lcm(out, Fraction(v).denominator)
    return out


@check("C1", "C3", "C10")
def sampled_rules_on_grid(verify_batch_fn: Callable | None = None, sampler_match_fn: Callable | None = None,
                          greedy_fn: Callable | None = None) -> CheckResult:
    """The oracle's sampled rules, run on every point of a uniform grid, realise exactly the enumerated laws."""
    from exactspec.reference import rules
    from exactspec.reference.laws import round_distribution

    verify_batch_fn = verify_batch_fn or rules.verify_batch
    sampler_match_fn = sampler_match_fn or rules.verify_sampler_match
    greedy_fn = greedy_fn or rules.verify_greedy

    def body():
        rng = random.Random(SEED + 9)
        pairs = [(p, q) for _, p, q in edge_pairs()] + [(random_dist(rng, 3, 4), random_dist(rng, 3, 4)) for _ in range(12)]
        count = 0
        for index, (p, q) in enumerate(pairs):
            k = 1 if index % 2 == 0 else 2
            vocab = len(p)
            bonus = p
            p_rows, q_rows = [p] * k + [bonus], [q] * k
            ratios = [px / qx for px, qx in zip(p, q) if qx > 0 and px < qx]
            m1 = _lcm_denominators(ratios or [1])
            finals = standard_kernel(p, q)[0][1] + list(bonus)
            m2 = _lcm_denominators(finals)
            if m1**k * m2 > 200_000:
                continue
            grid1 = (np.arange(m1) + 0.5) / m1
            grid2 = (np.arange(m2) + 0.5) / m2
            # every draft tuple x with q > 0, every grid point of the k acceptance uniforms and of the final one
            drafts = [(x,) for x in range(vocab) if q[x] > 0]
            for _ in range(k - 1):
                drafts = [d + (x,) for d in drafts for x in range(vocab) if q[x] > 0]
            mesh = np.stack(np.meshgrid(*([grid1] * k), grid2, indexing="ij"), axis=-1).reshape(-1, k + 1)
            law: dict[tuple, Fraction] = defaultdict(lambda: F0)
            weight_grid = Fraction(1, m1**k * m2)
            for d in drafts:
                batch = mesh.shape[0]
                tokens, counts = verify_batch_fn(
                    np.broadcast_to(np.array([[float(v) for v in row] for row in p_rows]), (batch, k + 1, vocab)),
                    np.broadcast_to(np.array([[float(v) for v in row] for row in q_rows]), (batch, k, vocab)),
                    np.broadcast_to(np.array(d), (batch, k)),
                    _GridUniforms([mesh[:, :k], mesh[:, k]]),
                )
                weight = math.prod(q[x] for x in d) * weight_grid
                emitted, multiplicity = np.unique(
                    np.concatenate([tokens, counts[:, None]], axis=1), axis=0, return_counts=True)
                for row, times in zip(emitted, multiplicity):
                    law[tuple(int(t) for t in row[: row[-1]])] += weight * int(times)
            expected = _nonzero(round_distribution(p_rows, q_rows))
            _expect(_nonzero(law) == expected, f"pair {index} (k={k}): verify_batch on the grid realises a law "
                                                f"at TV {_fmt(tv_law(law, expected))} from round_distribution")
            # sampler-match: one uniform per row, inverse CDF of p; grid of p's denominators
            m3 = _lcm_denominators(list(p) + list(bonus))
            grid3 = (np.arange(m3) + 0.5) / m3
            match_law: dict[tuple, Fraction] = defaultdict(lambda: F0)
            if m3 ** (k + 1) * len(drafts) <= 20_000:
                for d in drafts:
                    for point in np.stack(np.meshgrid(*([grid3] * (k + 1)), indexing="ij"), -1).reshape(-1, k + 1):
                        out = sampler_match_fn(
                            [[float(v) for v in row] for row in p_rows], [[float(v) for v in row] for row in q_rows],
                            list(d), _GridUniforms([point]))
                        match_law[tuple(out)] += math.prod(q[x] for x in d) * Fraction(1, m3 ** (k + 1))
                want = _nonzero(kernel_round_law(sampler_match_kernel, p_rows, q_rows))
                _expect(_nonzero(match_law) == want, f"pair {index}: verify_sampler_match on the grid != its exact law")
            # greedy: deterministic; output must be the greedy prefix the draft agrees with, then the argmax
            best = [_argmax(row) for row in p_rows]
            for d in drafts:
                out = greedy_fn([[float(v) for v in row] for row in p_rows], [[float(v) for v in row] for row in q_rows], list(d))
                n = 0
                while n < k and d[n] == best[n]:
                    n += 1
                _expect(out == best[: n + 1], f"pair {index}: verify_greedy({d}) = {out}, expected {best[: n + 1]}")
            count += 1
        return count, f"{count} rounds (k = 1, 2) enumerated on uniform grids: verify_batch, verify_sampler_match, verify_greedy"

    return _run_guarded("sampled_rules_on_grid", body)


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


@check("C11")
def inexact_rules_counterexamples(kernels: dict | None = None, cases: int = 200, min_tv: float = 1e-3) -> CheckResult:
    """Computed counter-examples: typical acceptance (Medusa) and thresholded acceptance emit a law != p."""
    kernels = kernels or {"typical acceptance (eps=0.09, delta=0.3)": typical_kernel(),
                          "thresholded acceptance (p/q >= 1/2)": threshold_kernel()}

    def body():
        details = []
        pairs = edge_pairs() + random_pairs(SEED + 10, cases)
        for name, kernel in kernels.items():
            worst, witness = F0, None
            for case, p, q in pairs:
                distance = tv(first_token_law(kernel, p, q), p)
                if distance > worst:
                    worst, witness = distance, (case, p, q)
            _expect(worst > min_tv, f"{name}: no counter-example found in {len(pairs)} cases (max TV {_fmt(worst)})")
            case, p, q = witness
            details.append(f"{name}: max TV {_fmt(worst)} at {case} p={[str(v) for v in p]} q={[str(v) for v in q]}")
        return len(pairs) * len(kernels), "; ".join(details)

    return _run_guarded("inexact_rules_counterexamples", body)


# --------------------------------------------------------------------------------------------------
# C12: floating point
# --------------------------------------------------------------------------------------------------

UNIT_ROUNDOFF_F32 = Fraction(1, 2**24)  # float32, round to nearest
GRID_F32 = Fraction(1, 2**24)  # spacing of float32 uniforms in [0, 1) (torch.rand)


def float_tv_bound(vocab: int, k: int, u: Fraction = UNIT_ROUNDOFF_F32, g: Fraction = GRID_F32) -> Fraction:
    """ARGUMENT.md C12: B(V, k) = k (S(V) + 7.03 u + g + S'(V)) + S(V), with
    S'(V) = 3.01 V u + (V - 1)(g - u) and S(V) = S'(V) + u (1 + 2u); valid for V u <= 0.005."""
    sampling = Fraction(301, 100) * vocab * u + (vocab - 1) * (g - u)
    sampler = sampling + u * (1 + 2 * u)
    draft_position = sampler + Fraction(703, 100) * u + g + sampling
    return k * draft_position + sampler


def _f32_inverse_cdf_law(weights: np.ndarray) -> list[Fraction]:
    """Exact law of inverse-CDF sampling in float32: sequential cumsum C, t = fl(U * C_V), U on the 2^-24 grid,
    token = #{C_i <= t} clamped to the last positive weight (the reference's `_inverse_cdf`, in float32)."""
    w = np.asarray(weights, dtype=np.float32)
    cumulative, acc = [], np.float32(0)
    for value in w:
        acc = np.float32(acc + value)
        cumulative.append(acc)
    total = cumulative[-1]
    n_grid = 2**24
    scale = np.float32(2.0**-24)

    def t_of(j: int) -> np.float32:
        return np.float32(np.float32(np.float32(j) * scale) * total)

    def count_below(bound: np.float32) -> int:  # #{j : t_j < bound}, t_j nondecreasing in j
        lo, hi = 0, n_grid
        while lo < hi:
            mid = (lo + hi) // 2
            if t_of(mid) < bound:
                lo = mid + 1
            else:
                hi = mid
        return lo

    last_positive = max(i for i, v in enumerate(w) if v > 0)
    law, previous = [F0] * len(w), 0
    for i in range(last_positive):
        below = count_below(cumulative[i])
        law[i] = Fraction(below - previous, n_grid)
        previous = below
    law[last_positive] = Fraction(n_grid - previous, n_grid)
    return law


def f32_round_law(p_rows: Sequence[Sequence[Fraction]], q_rows: Sequence[Sequence[Fraction]]) -> dict:
    """Exact law of one round of a float32 implementation: drafts and final tokens by float32 inverse CDF,
    accept iff U < fl(p(x)/q(x)) with U on the float32 grid, residual max(0, fl(p - q))."""
    k = len(q_rows)
    p32 = [np.array([float(v) for v in row], dtype=np.float32) for row in p_rows]
    q32 = [np.array([float(v) for v in row], dtype=np.float32) for row in q_rows]
    law: dict[tuple, Fraction] = defaultdict(lambda: F0)

    def grid_below(t: np.float32) -> Fraction:  # P(U < t), U uniform on {j 2^-24}
        return min(F1, Fraction(math.ceil(Fraction(float(t)) * 2**24), 2**24))

    def walk(i: int, prefix: tuple, weight: Fraction) -> None:
        if i == k:
            for y, r_y in enumerate(_f32_inverse_cdf_law(p32[k])):
                if r_y > 0:
                    law[prefix + (y,)] += weight * r_y
            return
        reject = F0
        for x, s_x in enumerate(_f32_inverse_cdf_law(q32[i])):
            if s_x == 0:
                continue
            accept = grid_below(np.float32(p32[i][x] / q32[i][x]))
            if accept > 0:
                walk(i + 1, prefix + (x,), weight * s_x * accept)
            reject += s_x * (1 - accept)
        if reject > 0:
            residual = np.maximum(np.float32(0), (p32[i] - q32[i]).astype(np.float32))
            final = residual if residual.sum() > 0 else p32[i]
            for y, r_y in enumerate(_f32_inverse_cdf_law(final)):
                if r_y > 0:
                    law[prefix + (y,)] += weight * reject * r_y

    walk(0, (), F1)
    return dict(law)


@check("C12")
def float32_tv_bound(bound: Callable = float_tv_bound, cases: int = 40) -> CheckResult:
    """Exact law of a float32 implementation vs the exact rational law: TV per round <= the bound of C12."""
    from exactspec.reference.laws import round_distribution

    def body():
        rng = random.Random(SEED + 11)
        worst_ratio, worst_tv, nonzero = 0.0, F0, 0
        for i in range(cases):
            k = 1 + i % 2
            vocab = rng.choice([2, 3, 5, 7])
            # denominators that float32 cannot represent (3, 7, 11, 13), so rounding really happens
            p_rows = [random_dist(rng, vocab, denom=rng.choice([9, 13, 77])) for _ in range(k + 1)]
            q_rows = [random_dist(rng, vocab, denom=rng.choice([9, 13, 77])) for _ in range(k)]
            if i < 4:  # near-cancellation cases: q = p + tiny, the residual is all rounding
                q_rows[0] = list(p_rows[0])
                j = next(x for x, v in enumerate(p_rows[0]) if v > 0)
                eps = Fraction(1, 3 * 10**6)
                if p_rows[0][j] >= eps and any(v > 0 for x, v in enumerate(p_rows[0]) if x != j):
                    other = next(x for x, v in enumerate(p_rows[0]) if v > 0 and x != j)
                    q_rows[0][j] -= eps
                    q_rows[0][other] += eps
            for p, q in zip(p_rows, q_rows):  # items 2 and 3 of C12, entry by entry, exactly
                p32 = np.array([float(v) for v in p], dtype=np.float32)
                q32 = np.array([float(v) for v in q], dtype=np.float32)
                for x in range(vocab):
                    if q[x] > 0:
                        ratio = Fraction(float(np.float32(p32[x] / q32[x])))
                        err = abs(min(F1, ratio) - min(F1, p[x] / q[x]))
                        _expect(err <= Fraction(302, 100) * UNIT_ROUNDOFF_F32,
                                f"case {i}: acceptance probability moved by {_fmt(err)} > 3.02u")
                w_hat = [Fraction(float(v)) for v in np.maximum(np.float32(0), p32 - q32)]
                w_err = sum((abs(a - max(F0, b - c)) for a, b, c in zip(w_hat, p, q)), F0)
                _expect(w_err <= Fraction(401, 100) * UNIT_ROUNDOFF_F32, f"case {i}: residual weights off by {_fmt(w_err)} > 4.01u")
            exact = round_distribution(p_rows, q_rows)
            realised = f32_round_law(p_rows, q_rows)
            distance = tv_law(exact, realised)
            limit = bound(vocab, k)
            _expect(distance <= limit, f"case {i} (V={vocab}, k={k}): float32 TV {_fmt(distance)} > bound {_fmt(limit)}")
            nonzero += distance > 0
            if distance > worst_tv:
                worst_tv = distance
            worst_ratio = max(worst_ratio, float(distance / limit))
        _expect(nonzero > 0, "float32 never changed the law: the comparison is not exercising rounding")
        return cases, (f"{cases} rounds (V in 2..7, k = 1, 2): acceptance <= 3.02u and residual <= 4.01u entrywise; max exact TV {_fmt(worst_tv)}, "
                       f"max TV/bound {worst_ratio:.2f}, {nonzero} laws changed by rounding")

    return _run_guarded("float32_tv_bound", body)


# --------------------------------------------------------------------------------------------------
# Traceability: the table in ARGUMENT.md names code that exists and checks that exist
# --------------------------------------------------------------------------------------------------

_LOCATION = re.compile(r"`((?:reference|gpu_impl|conformance)/[\w/]+\.py):([\w.]+)`")
_CHECK_NAME = re.compile(r"`check:(\w+)`")
_CONFORMANCE = re.compile(r"`((?:conformance|tests)/test_\w+\.py)`( \(planned\))?")


def traceability_rows(text: str | None = None) -> list[tuple[str, str]]:
    """(claim, table row) for the rows of the traceability table in ARGUMENT.md."""
    text = ARGUMENT.read_text() if text is None else text
    section = text.split("## Traceability", 1)[1] if "## Traceability" in text else ""
    return [(line.split("|")[1].strip(), line) for line in section.splitlines() if re.match(r"\|\s*C\d+", line)]


def _resolve(path: str, dotted: str) -> bool:
    module = importlib.import_module(path[:-3].replace("/", "."))
    target: Any = module
    for part in dotted.split("."):
        if not hasattr(target, part):
            return False
        target = getattr(target, part)
    return callable(target)


@check("C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9", "C10", "C11", "C12")
def traceability(text: str | None = None) -> CheckResult:
    """Every code location in ARGUMENT.md's traceability table exists, every named check exists, every claim has a row."""

    def body():
        rows = traceability_rows(text)
        _expect(rows, "no traceability table found in ARGUMENT.md")
        claims_with_rows = {claim for claim, _ in rows}
        all_claims = {c for chk in CHECKS.values() for c in chk.claims}
        _expect(all_claims <= claims_with_rows, f"claims without a traceability row: {sorted(all_claims - claims_with_rows)}")
        try:
            import torch  # noqa: F401

            have_torch = True
        except ImportError:
            have_torch = False
        located, skipped, present, planned, appeared = 0, 0, [], [], []
        for claim, line in rows:
            for path, dotted in _LOCATION.findall(line):
                if path.startswith(("gpu_impl/", "conformance/")) and not have_torch:
                    skipped += 1
                    continue
                _expect((ROOT / path).exists(), f"{claim}: {path} does not exist")
                _expect(_resolve(path, dotted), f"{claim}: {path}:{dotted} is not a callable in that module")
                located += 1
            names = _CHECK_NAME.findall(line)
            _expect(names, f"{claim}: row names no check")
            for name in names:
                _expect(name in CHECKS, f"{claim}: check {name} is not defined in proofs/checks.py")
                _expect(claim in CHECKS[name].claims, f"{claim}: check {name} is not registered for {claim}")
            for path, is_planned in _CONFORMANCE.findall(line):
                exists = (ROOT / path).exists()
                if is_planned:
                    (appeared if exists else planned).append(path)
                else:
                    _expect(exists, f"{claim}: {path} is listed as present but does not exist")
                    present.append(path)
        extra = f"; now present, still marked planned: {sorted(set(appeared))}" if appeared else ""
        note = f", {skipped} gpu_impl/conformance locations skipped (no torch)" if skipped else ""
        return located, (f"{len(rows)} claims, {located} code locations resolved{note}; "
                         f"{len(set(present))} listed test files present, {len(set(planned))} planned conformance test files not yet written{extra}")

    return _run_guarded("traceability", body)


# --------------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------------


def run_checks(names: Sequence[str] | None = None) -> list[CheckResult]:
    results = []
    for name in names or list(CHECKS):
        start = time.perf_counter()
        result = CHECKS[name].func()
        result.seconds = time.perf_counter() - start
        results.append(result)
    return results


def claim_table(results: Sequence[CheckResult]) -> str:
    by_name = {r.name: r for r in results}
    claims = sorted({c for chk in CHECKS.values() for c in chk.claims}, key=lambda c: int(c[1:]))
    lines = ["claim  result  checks"]
    for claim in claims:
        names = [n for n, chk in CHECKS.items() if claim in chk.claims and n in by_name]
        if not names:
            continue
        ok = all(by_name[n].passed for n in names)
        marks = ", ".join(f"{n}={'ok' if by_name[n].passed else 'FAIL'}" for n in names)
        lines.append(f"{claim:<6} {'PASS' if ok else 'FAIL':<7} {marks}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--only", nargs="+", metavar="CHECK", choices=list(CHECKS), help="run only these checks")
    parser.add_argument("--list", action="store_true", help="list the checks and their claims, run nothing")


def run(args: argparse.Namespace) -> int:
    if getattr(args, "list", False):
        for name, chk in CHECKS.items():
            print(f"{name:<32} {','.join(chk.claims):<12} {chk.doc}")
        return 0
    results = run_checks(getattr(args, "only", None))
    for r in results:
        status = "ok  " if r.passed else "FAIL"
        print(f"[{status}] {r.name:<30} {r.seconds:6.2f}s  {r.detail}")
    print()
    print(claim_table(results))
    failed = [r.name for r in results if not r.passed]
    print(f"\n{len(results) - len(failed)}/{len(results)} checks passed" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m proofs", description="Run every machine check of proofs/ARGUMENT.md.")
    add_arguments(parser)
    return run(parser.parse_args(argv))
