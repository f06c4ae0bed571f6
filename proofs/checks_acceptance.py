"""Checks of C6, C7 and C8 (ARGUMENT.md): what the acceptance rate alpha = 1 - TV buys. No valid rule
accepts more often (C6); the law, mean and variance of the tokens per round (C7); the walltime improvement
factor and its optimal k (C8). The oracle's `reference/speedup.py` and `reference/laws.py` are under test."""

from __future__ import annotations

import math
import random
from typing import Callable

import numpy as np
import sympy as sp
from scipy.optimize import brentq, linprog

from ..reference import speedup
from ..reference.laws import emitted_count_law, round_distribution

from .cases import SEED, edge_pairs, random_dist, random_pairs
from .kernels import F0, first_token_law, overlap, standard_kernel
from .registry import CheckResult, check, expect, run_guarded


def _max_coupling_lp(p, q) -> tuple[int, float, str]:
    """(status, max P(X = Y), message) of the LP over couplings pi(x, y) >= 0 with marginals q (x), p (y)."""
    vocab = len(p)
    cost = -np.eye(vocab).ravel()
    a_eq = np.vstack(
        [np.kron(np.eye(vocab), np.ones(vocab)), np.kron(np.ones(vocab), np.eye(vocab))]
    )
    b_eq = np.concatenate([[float(v) for v in q], [float(v) for v in p]])
    result = linprog(cost, A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    return result.status, -result.fun if result.status == 0 else math.nan, result.message


@check("C6")
def coupling_bound(rule_acceptance: Callable | None = None, cases: int = 60) -> CheckResult:
    """alpha = 1 - TV is attained by the standard rule and is the LP maximum of P(X = Y) over couplings of (q, p)."""

    def standard_acceptance(p, q):
        return sum((q[x] * a for x, (a, _) in enumerate(standard_kernel(p, q))), F0)

    rule_acceptance = rule_acceptance or standard_acceptance

    def body():
        pairs = edge_pairs() + random_pairs(SEED + 5, cases, vocabs=(2, 3, 4, 5))
        worst_gap = 0.0
        for name, p, q in pairs:
            alpha = overlap(p, q)
            got = rule_acceptance(p, q)
            # a valid rule emits p; its acceptance can never beat the best coupling
            expect(
                first_token_law(standard_kernel, p, q) == list(p),
                f"{name}: standard kernel not valid",
            )
            expect(got == alpha, f"{name}: rule accepts with {got}, 1 - TV = {alpha}")
            match = sum((a * b for a, b in zip(p, q)), F0)
            expect(match <= alpha, f"{name}: sampler-match acceptance {match} > alpha {alpha}")
            status, best, message = _max_coupling_lp(p, q)
            expect(status == 0, f"{name}: LP failed: {message}")
            gap = abs(best - float(alpha))
            worst_gap = max(worst_gap, gap)
            expect(gap < 1e-9, f"{name}: LP max P(X=Y) = {best} != alpha = {float(alpha)}")
        return len(
            pairs
        ), f"{len(pairs)} cases; LP optimum = alpha within {worst_gap:.1e}; sum p q <= alpha"

    return run_guarded("coupling_bound", body)


@check("C7")
def sym_token_count(
    law_formula: Callable | None = None,
    mean_formula: Callable | None = None,
    var_formula: Callable | None = None,
) -> CheckResult:
    """sympy, k = 1..8: sum P(N=n) = 1, E[N] = (1 - a^(k+1))/(1 - a), Var[N] closed form; per-position E[N]."""
    a = sp.Symbol("alpha", positive=True)

    def zero(expr) -> bool:  # rational functions in alpha: exact and fast
        return sp.expand(sp.numer(sp.together(expr))) == 0

    law_formula = law_formula or (lambda al, k, n: al ** (n - 1) * (1 - al) if n <= k else al**k)
    mean_formula = mean_formula or (lambda al, k: (1 - al ** (k + 1)) / (1 - al))
    var_formula = var_formula or (
        lambda al, k: (
            (al - (2 * k + 1) * al ** (k + 1) * (1 - al) - al ** (2 * k + 2)) / (1 - al) ** 2
        )
    )

    def body():
        for k in range(1, 9):
            law = [law_formula(a, k, n) for n in range(1, k + 2)]
            expect(zero(sum(law) - 1), f"k={k}: law does not sum to 1")
            mean = sum(n * law[n - 1] for n in range(1, k + 2))
            expect(zero(mean - mean_formula(a, k)), f"k={k}: sum n P(N=n) != mean formula")
            second = sum(n**2 * law[n - 1] for n in range(1, k + 2))
            expect(zero(second - mean**2 - var_formula(a, k)), f"k={k}: variance formula wrong")
            # per-position rates: P(N >= n) = prod_{i<n} alpha_i, E[N] = 1 + sum_j prod_{i<=j} alpha_i
            al = sp.symbols(f"a1:{k + 1}", positive=True)
            per = [sp.Mul(*al[: n - 1]) * (1 - al[n - 1]) for n in range(1, k + 1)] + [sp.Mul(*al)]
            expect(sp.expand(sum(per) - 1) == 0, f"k={k}: per-position law does not sum to 1")
            mean_per = 1 + sum(sp.Mul(*al[: j + 1]) for j in range(k))
            expect(
                sp.expand(sum(n * per[n - 1] for n in range(1, k + 2)) - mean_per) == 0,
                f"k={k}: per-position mean wrong",
            )
            var_per = sum((2 * n - 1) * sp.Mul(*al[: n - 1]) for n in range(1, k + 2)) - mean_per**2
            expect(
                sp.expand(sum(n**2 * per[n - 1] for n in range(1, k + 2)) - mean_per**2 - var_per)
                == 0,
                f"k={k}: per-position variance wrong",
            )
        return (
            8,
            "k = 1..8: law, mean and variance (constant alpha) and per-position law, mean, variance",
        )

    return run_guarded("sym_token_count", body)


@check("C7")
def oracle_token_count(
    tokens_law_fn: Callable | None = None,
    expected_fn: Callable | None = None,
    variance_fn: Callable | None = None,
    round_law: Callable | None = None,
) -> CheckResult:
    """The oracle's count law / mean / variance agree with the formulas; exact count law of enumerated rounds."""
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
                expect(
                    abs(expected_fn(alpha, k) - mean) < 1e-12,
                    f"expected_tokens({alpha}, {k}) != {mean}",
                )
                expect(
                    abs(variance_fn(alpha, k) - var) < 1e-12,
                    f"tokens_variance({alpha}, {k}) != {var}",
                )
                count += 1
        rng = random.Random(SEED + 6)
        for i in range(60):
            k = 1 + i % 3
            vocab = rng.choice([2, 3, 4])
            p_rows = [random_dist(rng, vocab) for _ in range(k + 1)]
            q_rows = [random_dist(rng, vocab) for _ in range(k)]
            alphas = [overlap(p, q) for p, q in zip(p_rows, q_rows)]
            exact = [math.prod(alphas[: n - 1]) * (1 - alphas[n - 1]) for n in range(1, k + 1)] + [
                math.prod(alphas)
            ]
            got = emitted_count_law(round_law(p_rows, q_rows), k)
            expect(
                list(got) == exact, f"case {i}: enumerated count law {got} != prod formula {exact}"
            )
            oracle = tokens_law_fn([float(v) for v in alphas])
            expect(
                np.allclose(oracle, [float(v) for v in exact], atol=1e-12),
                f"case {i}: tokens_law_per_position wrong",
            )
            count += 1
        return (
            count,
            f"{count} cases: oracle formulas vs closed forms; Fraction count laws of 60 rounds",
        )

    return run_guarded("oracle_token_count", body)


def _improvement_identities() -> Callable:
    """Check the symbolic identities of C8; return the numerator of d/dk of the factor as a float function."""
    a, c, k = sp.symbols("alpha c k", positive=True)
    factor = (1 - a ** (k + 1)) / ((1 - a) * (c * k + 1))
    derivative = (-(a ** (k + 1)) * sp.log(a) * (c * k + 1) - c * (1 - a ** (k + 1))) / (
        (1 - a) * (c * k + 1) ** 2
    )
    expect(
        sp.simplify(sp.diff(factor, k) - derivative) == 0,
        "derivative of the improvement factor wrong",
    )
    expect(
        sp.simplify(factor.subs(k, 1) - (1 + a) / (1 + c)) == 0,
        "k = 1 factor != (1 + alpha)/(1 + c)",
    )
    v = sp.Function("v")
    general = (1 - a ** (k + 1)) / ((1 - a) * (c * k + v(k + 1)))
    expect(
        sp.simplify(general.subs(v(k + 1), 1) - factor) == 0,
        "v = 1 does not reduce to Leviathan's factor",
    )
    return sp.lambdify(
        (a, c, k), -(a ** (k + 1)) * sp.log(a) * (c * k + 1) - c * (1 - a ** (k + 1))
    )


def _improvement_at(
    alpha: float, cost: float, improvement_fn: Callable, optimal_fn: Callable, numerator: Callable
) -> None:
    """Check the oracle's improvement factor and optimal k at one (alpha, c) against brute force and k*."""
    for kk in range(1, 9):
        exact = (1 - alpha ** (kk + 1)) / ((1 - alpha) * (cost * kk + 1))
        expect(
            abs(improvement_fn(alpha, kk, cost) - exact) < 1e-12,
            f"improvement_factor({alpha},{kk},{cost}) != {exact}",
        )
    best, value = optimal_fn(alpha, cost, None, 64)
    brute = max(
        range(1, 65), key=lambda kk: (1 - alpha ** (kk + 1)) / ((1 - alpha) * (cost * kk + 1))
    )
    expect(best == brute, f"optimal_k({alpha}, {cost}) = {best}, brute force {brute}")
    # quasi-concavity: the integer optimum is next to the stationary point of the continuous factor
    if numerator(alpha, cost, 1.0) > 0 and numerator(alpha, cost, 64.0) < 0:
        star = brentq(lambda x: numerator(alpha, cost, x), 1.0, 64.0)
        expect(
            best in (math.floor(star), math.ceil(star)),
            f"alpha={alpha}, c={cost}: k*={star:.3f}, optimal_k={best}",
        )
    # k = 1 pays off exactly when alpha > c (then the optimum pays off too)
    one = improvement_fn(alpha, 1, cost)
    expect(
        (one > 1) == (alpha > cost) and (alpha <= cost or value > 1),
        f"alpha={alpha}, c={cost}: k=1 factor {one} inconsistent with alpha > c",
    )
    # generalised cost v(n) = 1 + 0.05 (n - 1) (convex): factor = E[N]/(ck + v(k+1))
    verify = lambda n: 1 + 0.05 * (n - 1)  # noqa: E731
    got = improvement_fn(alpha, 3, cost, verify)
    want = (1 - alpha**4) / ((1 - alpha) * (3 * cost + verify(4)))
    expect(abs(got - want) < 1e-12, f"generalised factor wrong: {got} != {want}")
    # with convex v the factor is quasi-concave: optimal_k = brute force = first local maximum
    values = [
        (1 - alpha ** (kk + 1)) / ((1 - alpha) * (cost * kk + verify(kk + 1)))
        for kk in range(1, 65)
    ]
    best_v, _ = optimal_fn(alpha, cost, verify, 64)
    first_peak = next((kk for kk in range(1, 64) if values[kk] <= values[kk - 1]), 64)
    expect(
        best_v == 1 + int(np.argmax(values)) == first_peak,
        f"alpha={alpha}, c={cost}, convex v: optimal_k {best_v}, brute {1 + int(np.argmax(values))}, first peak {first_peak}",
    )


@check("C8")
def sym_improvement(
    improvement_fn: Callable | None = None, optimal_fn: Callable | None = None
) -> CheckResult:
    """sympy: d/dk of Leviathan's factor; k=1 pays iff alpha > c; optimal_k = best integer near the stationary point."""
    improvement_fn = improvement_fn or speedup.improvement_factor
    optimal_fn = optimal_fn or speedup.optimal_k

    def body():
        numerator = _improvement_identities()
        count = 0
        for alpha in (0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95):
            for cost in (0.01, 0.05, 0.1, 0.2, 0.5):
                _improvement_at(alpha, cost, improvement_fn, optimal_fn, numerator)
                count += 1
        return (
            count,
            f"derivative and k = 1 identity symbolic; {count} (alpha, c) grid points vs brute force and k*",
        )

    return run_guarded("sym_improvement", body)
