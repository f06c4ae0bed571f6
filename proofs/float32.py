"""C12 (ARGUMENT.md): what float32 rounding can change in a round's law, and by how much.

`float_tv_bound` is the bound B(V, k) the argument proves; `f32_round_law` is the *exact* law of a float32
implementation of the rule (inverse-CDF sampling and acceptance with float32 arithmetic and uniforms on
the 2^-24 grid), computed by enumeration, not by sampling; `float32_tv_bound` checks the one against the
other. The exact rational law it is compared with is the oracle's `round_distribution` (the C12 row).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from fractions import Fraction
from typing import Callable, Sequence

import numpy as np

from ..reference.laws import round_distribution

from .cases import SEED, random_dist
from .kernels import F0, F1, fmt, tv_law
from .registry import CheckResult, check, expect, run_guarded

UNIT_ROUNDOFF_F32 = Fraction(1, 2**24)  # float32, round to nearest
GRID_F32 = Fraction(1, 2**24)  # spacing of float32 uniforms in [0, 1) (torch.rand)


def float_tv_bound(
    vocab: int, k: int, u: Fraction = UNIT_ROUNDOFF_F32, g: Fraction = GRID_F32
) -> Fraction:
    """ARGUMENT.md C12: B(V, k) = k (S(V) + 7.03 u + g + S'(V)) + S(V), with
    S'(V) = 3.01 V u + (V - 1)(g - u) and S(V) = S'(V) + u (1 + 2u); valid for V u <= 0.005."""
    sampling = Fraction(301, 100) * vocab * u + (vocab - 1) * (g - u)
    sampler = sampling + u * (1 + 2 * u)
    draft_position = sampler + Fraction(703, 100) * u + g + sampling
    return k * draft_position + sampler


def _f32_inverse_cdf_law(weights: np.ndarray) -> list[Fraction]:
    """Exact law of inverse-CDF sampling in float32: sequential cumsum C, t = fl(U * C_V), U on the 2^-24 grid,
    token = #{C_i <= t} clamped to the last positive weight (the reference's `sampling.inverse_cdf`, in float32)."""
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


def f32_round_law(
    p_rows: Sequence[Sequence[Fraction]], q_rows: Sequence[Sequence[Fraction]]
) -> dict:
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


def _float32_case(rng: random.Random, i: int) -> tuple[list, list]:
    """Round i of the check: rows with denominators float32 cannot represent; the first four near-cancel."""
    k = 1 + i % 2
    vocab = rng.choice([2, 3, 5, 7])
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
    return p_rows, q_rows


def _check_entrywise(i: int, p: Sequence[Fraction], q: Sequence[Fraction]) -> None:
    """Items 2 and 3 of C12 at one position, entry by entry, exactly: acceptance <= 3.02u, residual <= 4.01u."""
    p32 = np.array([float(v) for v in p], dtype=np.float32)
    q32 = np.array([float(v) for v in q], dtype=np.float32)
    for x in range(len(p)):
        if q[x] > 0:
            ratio = Fraction(float(np.float32(p32[x] / q32[x])))
            err = abs(min(F1, ratio) - min(F1, p[x] / q[x]))
            expect(
                err <= Fraction(302, 100) * UNIT_ROUNDOFF_F32,
                f"case {i}: acceptance probability moved by {fmt(err)} > 3.02u",
            )
    w_hat = [Fraction(float(v)) for v in np.maximum(np.float32(0), p32 - q32)]
    w_err = sum((abs(a - max(F0, b - c)) for a, b, c in zip(w_hat, p, q)), F0)
    expect(
        w_err <= Fraction(401, 100) * UNIT_ROUNDOFF_F32,
        f"case {i}: residual weights off by {fmt(w_err)} > 4.01u",
    )


@check("C12")
def float32_tv_bound(bound: Callable = float_tv_bound, cases: int = 40) -> CheckResult:
    """Exact law of a float32 implementation vs the exact rational law: TV per round <= the bound of C12."""

    def body():
        rng = random.Random(SEED + 11)
        worst_ratio, worst_tv, changed = 0.0, F0, 0
        for i in range(cases):
            p_rows, q_rows = _float32_case(rng, i)
            k, vocab = len(q_rows), len(p_rows[0])
            for p, q in zip(p_rows, q_rows):
                _check_entrywise(i, p, q)
            distance = tv_law(round_distribution(p_rows, q_rows), f32_round_law(p_rows, q_rows))
            limit = bound(vocab, k)
            expect(
                distance <= limit,
                f"case {i} (V={vocab}, k={k}): float32 TV {fmt(distance)} > bound {fmt(limit)}",
            )
            changed += distance > 0
            worst_tv = max(worst_tv, distance)
            worst_ratio = max(worst_ratio, float(distance / limit))
        expect(
            changed > 0, "float32 never changed the law: the comparison is not exercising rounding"
        )
        return cases, (
            f"{cases} rounds (V in 2..7, k = 1, 2): acceptance <= 3.02u and residual <= 4.01u entrywise; "
            f"max exact TV {fmt(worst_tv)}, max TV/bound {worst_ratio:.2f}, {changed} laws changed by rounding"
        )

    return run_guarded("float32_tv_bound", body)
