"""Checks of C1 and C2 (ARGUMENT.md): at one position the rule emits exactly p, and accepts with
probability sum min(p, q) = 1 - TV(p, q). The oracle's `reference/laws.py` is the code under test."""

from __future__ import annotations

import random
from typing import Callable

import sympy as sp

from ..reference.laws import acceptance_rate, residual, round_distribution

from .cases import SEED, edge_pairs, random_dist, random_pairs
from .kernels import (
    F0,
    count_law,
    first_token_law,
    first_token_marginal,
    overlap,
    standard_kernel,
    tv,
)
from .registry import CheckResult, check, expect, run_guarded


@check("C1")
def sym_single_position(min_plus_residual: Callable | None = None) -> CheckResult:
    """sympy: min(a, b) + max(0, a - b) = a for all reals a, b (both orders of a, b)."""

    def body():
        a, b = sp.symbols("a b", real=True)
        t = sp.Symbol("t", nonnegative=True)
        identity = min_plus_residual or (lambda x, y: sp.Min(x, y) + sp.Max(0, x - y))
        for name, subs in (("a <= b", {a: b - t}), ("a >= b", {b: a - t})):
            lhs = identity(a, b).subs(subs)
            rhs = a.subs(subs)
            expect(
                sp.simplify(lhs - rhs) == 0,
                f"min(a,b) + max(0,a-b) - a != 0 when {name}: {sp.simplify(lhs - rhs)}",
            )
        # summed over the vocabulary: sum max(0, p - q) = 1 - sum min(p, q) when sum p = 1
        p = sp.symbols("p0:4", nonnegative=True)
        q = sp.symbols("q0:4", nonnegative=True)
        for sign in range(16):  # every pattern of p_i >= q_i / p_i < q_i
            subs = {}
            for i in range(4):
                s = sp.Symbol(f"s{i}", nonnegative=True)
                subs[q[i] if sign >> i & 1 else p[i]] = (p[i] - s) if sign >> i & 1 else (q[i] - s)
            lhs = sum(identity(p[i], q[i]).subs(subs) for i in range(4))
            expect(
                sp.simplify(lhs - sum(p[i].subs(subs) for i in range(4))) == 0,
                "summed identity fails",
            )
        return 18, "identity holds in both orders and summed over all 16 sign patterns"

    return run_guarded("sym_single_position", body)


@check("C1", "C2")
def exact_single_position(
    round_law: Callable | None = None,
    acceptance: Callable | None = None,
    residual_fn: Callable | None = None,
    cases: int = 300,
) -> CheckResult:
    """Fraction enumeration, k = 1: the first emitted token has law p exactly; P(accept) = sum min = 1 - TV."""
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
            expect(
                list(marginal) == list(p), f"{name}: first-token law {marginal} != p {p} (q = {q})"
            )
            alpha = overlap(p, q)
            expect(alpha == 1 - tv(p, q), f"{name}: sum min(p,q) != 1 - TV")
            expect(
                acceptance(p, q) == alpha,
                f"{name}: acceptance_rate {acceptance(p, q)} != sum min {alpha}",
            )
            counts = count_law(law, 1)
            expect(
                counts[1] == alpha, f"{name}: P(accept) = P(N=2) = {counts[1]} != alpha = {alpha}"
            )
            r = residual_fn(p, q)
            positive = [max(F0, a - b) for a, b in zip(p, q)]
            if alpha < 1:
                expect(
                    [(1 - alpha) * v for v in r] == positive,
                    f"{name}: (1 - alpha) * residual != max(0, p - q)",
                )
            else:
                expect(list(r) == list(p), f"{name}: residual should fall back to p when p == q")
            # the independent kernel gives the same one-position law
            expect(first_token_law(standard_kernel, p, q) == list(p), f"{name}: kernel law != p")
        return len(pairs), f"{len(edge_pairs())} edge + {cases} random rational cases, V in 2..6"

    return run_guarded("exact_single_position", body)
