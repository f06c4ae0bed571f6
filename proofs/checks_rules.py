"""Checks of C9, C10 and C11 (ARGUMENT.md): which rules and warpings are exact. Warping must be applied
to the p, q the sampler uses (C9); greedy and sampler-match verification are exact and the oracle's sampled
rules realise the enumerated laws (C10, also C1 and C3); typical and thresholded acceptance are not (C11).
The oracle's `reference/rules.py` is under test in `sampled_rules_on_grid`."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from fractions import Fraction
from typing import Callable, Sequence

import numpy as np

from ..reference import rules
from ..reference.laws import round_distribution

from .cases import (
    SEED,
    edge_pairs,
    greedy_model,
    random_dist,
    random_pairs,
    sequence_cases,
    warping_cases,
)
from .kernels import (
    F0,
    Kernel,
    ancestral_law,
    argmax,
    first_token_law,
    fmt,
    greedy_kernel,
    kernel_round_law,
    kernel_sequence_law,
    nonzero,
    one_hot,
    sampler_match_kernel,
    standard_kernel,
    threshold_kernel,
    tv,
    tv_law,
    typical_kernel,
)
from .registry import CheckResult, check, expect, run_guarded


@check("C9")
def warping_counterexamples(law: Callable | None = None, min_tv: float = 1e-3) -> CheckResult:
    """Exact laws: warping p and q consistently gives the warped p; each mismatch computed here gives TV > 0."""
    law = law or (
        lambda intended, p_used, q_used, sampled: first_token_law(
            standard_kernel, p_used, q_used, sampled
        )
    )

    def body():
        details = []
        for i, (name, intended, p_used, q_used, sampled) in enumerate(warping_cases()):
            emitted = law(intended, p_used, q_used, sampled)
            distance = tv(emitted, intended)
            if i == 0:
                expect(
                    distance == 0,
                    f"{name}: emitted law differs from the warped p (TV {fmt(distance)})",
                )
            else:
                expect(distance > min_tv, f"{name}: no counter-example (TV {fmt(distance)})")
                details.append(f"{name.split(',')[0] if ',' in name else name}: TV={fmt(distance)}")
        return 4, "consistent warping exact; " + "; ".join(details)

    return run_guarded("warping_counterexamples", body)


@check("C10")
def exact_greedy_sampler_match(
    sampler_match: Kernel = sampler_match_kernel, greedy: Kernel = greedy_kernel
) -> CheckResult:
    """Fraction enumeration: sampler-match gives the target's sequence law; greedy verification gives greedy decoding."""

    def body():
        cases = sequence_cases(SEED + 8)
        for name, target, draft, vocab, length, k in cases:
            expected = nonzero(ancestral_law(target, (0,), length))
            got = nonzero(kernel_sequence_law(sampler_match, target, draft, (0,), length, k))
            expect(
                got == expected,
                f"{name}: sampler-match loop law != target law, TV = {fmt(tv_law(got, expected))}",
            )
            greedy_target = greedy_model(target)
            expected_greedy = nonzero(ancestral_law(greedy_target, (0,), length))
            got_greedy = nonzero(
                kernel_sequence_law(
                    greedy,
                    target,
                    draft,
                    (0,),
                    length,
                    k,
                    bonus=lambda row: one_hot(len(row), argmax(row)),
                )
            )
            expect(
                got_greedy == expected_greedy,
                f"{name}: greedy verification != greedy decoding of the target",
            )
            expect(len(expected_greedy) == 1, "greedy decoding should be deterministic")
        return 2 * len(cases), f"{len(cases)} prefix-dependent model pairs for each rule"

    return run_guarded("exact_greedy_sampler_match", body)


# --------------------------------------------------------------------------------------------------
# The oracle's sampled rules, run on every point of a grid of uniforms
# --------------------------------------------------------------------------------------------------


class GridUniforms(np.random.Generator):
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


def _floats(rows: Sequence[Sequence[Fraction]]) -> list[list[float]]:
    return [[float(v) for v in row] for row in rows]


def _grid(size: int) -> np.ndarray:
    """The midpoints of `size` equal cells of [0, 1): uniforms on them realise every rational of denominator `size`."""
    return (np.arange(size) + 0.5) / size


def _batch_grid_law(
    verify_batch_fn: Callable, p_rows, q_rows, drafts, m_accept: int, m_final: int
) -> dict:
    """Law verify_batch realises: every draft tuple, every grid point of the k acceptance and the final uniform."""
    k, vocab = len(q_rows), len(p_rows[0])
    mesh = np.stack(
        np.meshgrid(*([_grid(m_accept)] * k), _grid(m_final), indexing="ij"), axis=-1
    ).reshape(-1, k + 1)
    law: dict[tuple, Fraction] = defaultdict(lambda: F0)
    weight_grid = Fraction(1, m_accept**k * m_final)
    batch = mesh.shape[0]
    for d in drafts:
        tokens, counts = verify_batch_fn(
            np.broadcast_to(np.array(_floats(p_rows)), (batch, k + 1, vocab)),
            np.broadcast_to(np.array(_floats(q_rows)), (batch, k, vocab)),
            np.broadcast_to(np.array(d), (batch, k)),
            GridUniforms([mesh[:, :k], mesh[:, k]]),
        )
        weight = math.prod(q_rows[0][x] for x in d) * weight_grid
        emitted, multiplicity = np.unique(
            np.concatenate([tokens, counts[:, None]], axis=1), axis=0, return_counts=True
        )
        for row, times in zip(emitted, multiplicity):
            law[tuple(int(t) for t in row[: row[-1]])] += weight * int(times)
    return law


def _sampler_match_grid_law(
    sampler_match_fn: Callable, p_rows, q_rows, drafts, m_grid: int
) -> dict:
    """Law verify_sampler_match realises: one uniform per row (inverse CDF of p) on the grid of p's denominators."""
    k = len(q_rows)
    law: dict[tuple, Fraction] = defaultdict(lambda: F0)
    for d in drafts:
        for point in np.stack(np.meshgrid(*([_grid(m_grid)] * (k + 1)), indexing="ij"), -1).reshape(
            -1, k + 1
        ):
            out = sampler_match_fn(_floats(p_rows), _floats(q_rows), list(d), GridUniforms([point]))
            law[tuple(out)] += math.prod(q_rows[0][x] for x in d) * Fraction(1, m_grid ** (k + 1))
    return law


def _grid_round(index: int, p, q, verify_batch_fn, sampler_match_fn, greedy_fn) -> bool:
    """Check one round (k = 1 or 2, the same pair at each position); False if its grid is too large to run."""
    k, vocab = (1 if index % 2 == 0 else 2), len(p)
    p_rows, q_rows = [p] * k + [p], [q] * k  # the bonus row is p too
    m_accept = _lcm_denominators([px / qx for px, qx in zip(p, q) if qx > 0 and px < qx] or [1])
    m_final = _lcm_denominators([*standard_kernel(p, q)[0][1], *p])
    if m_accept**k * m_final > 200_000:
        return False
    drafts: list[tuple[int, ...]] = [(x,) for x in range(vocab) if q[x] > 0]
    for _ in range(k - 1):
        drafts = [d + (x,) for d in drafts for x in range(vocab) if q[x] > 0]
    law = _batch_grid_law(verify_batch_fn, p_rows, q_rows, drafts, m_accept, m_final)
    expected = nonzero(round_distribution(p_rows, q_rows))
    expect(
        nonzero(law) == expected,
        f"pair {index} (k={k}): verify_batch on the grid realises a law "
        f"at TV {fmt(tv_law(law, expected))} from round_distribution",
    )
    m_match = _lcm_denominators(list(p) + list(p))
    if m_match ** (k + 1) * len(drafts) <= 20_000:
        match_law = _sampler_match_grid_law(sampler_match_fn, p_rows, q_rows, drafts, m_match)
        want = nonzero(kernel_round_law(sampler_match_kernel, p_rows, q_rows))
        expect(
            nonzero(match_law) == want,
            f"pair {index}: verify_sampler_match on the grid != its exact law",
        )
    # greedy: deterministic; output must be the greedy prefix the draft agrees with, then the argmax
    best = [argmax(row) for row in p_rows]
    for d in drafts:
        out = greedy_fn(_floats(p_rows), _floats(q_rows), list(d))
        n = 0
        while n < k and d[n] == best[n]:
            n += 1
        expect(
            out == best[: n + 1],
            f"pair {index}: verify_greedy({d}) = {out}, expected {best[: n + 1]}",
        )
    return True


@check("C1", "C3", "C10")
def sampled_rules_on_grid(
    verify_batch_fn: Callable | None = None,
    sampler_match_fn: Callable | None = None,
    greedy_fn: Callable | None = None,
) -> CheckResult:
    """The oracle's sampled rules, run on every point of a uniform grid, realise exactly the enumerated laws."""
    verify_batch_fn = verify_batch_fn or rules.verify_batch
    sampler_match_fn = sampler_match_fn or rules.verify_sampler_match
    greedy_fn = greedy_fn or rules.verify_greedy

    def body():
        rng = random.Random(SEED + 9)
        pairs = [(p, q) for _, p, q in edge_pairs()] + [
            (random_dist(rng, 3, 4), random_dist(rng, 3, 4)) for _ in range(12)
        ]
        count = sum(
            _grid_round(index, p, q, verify_batch_fn, sampler_match_fn, greedy_fn)
            for index, (p, q) in enumerate(pairs)
        )
        return (
            count,
            f"{count} rounds (k = 1, 2) enumerated on uniform grids: verify_batch, verify_sampler_match, verify_greedy",
        )

    return run_guarded("sampled_rules_on_grid", body)


@check("C11")
def inexact_rules_counterexamples(
    kernels: dict | None = None, cases: int = 200, min_tv: float = 1e-3
) -> CheckResult:
    """Computed counter-examples: typical acceptance (Medusa) and thresholded acceptance emit a law != p."""
    kernels = kernels or {
        "typical acceptance (eps=0.09, delta=0.3)": typical_kernel(),
        "thresholded acceptance (p/q >= 1/2)": threshold_kernel(),
    }

    def body():
        details = []
        pairs = edge_pairs() + random_pairs(SEED + 10, cases)
        for name, kernel in kernels.items():
            worst, witness = F0, None
            for case, p, q in pairs:
                distance = tv(first_token_law(kernel, p, q), p)
                if distance > worst:
                    worst, witness = distance, (case, p, q)
            expect(
                worst > min_tv,
                f"{name}: no counter-example found in {len(pairs)} cases (max TV {fmt(worst)})",
            )
            assert witness is not None  # worst > min_tv (>= 0): some case set it
            case, p, q = witness
            details.append(
                f"{name}: max TV {fmt(worst)} at {case} p={[str(v) for v in p]} q={[str(v) for v in q]}"
            )
        return len(pairs) * len(kernels), "; ".join(details)

    return run_guarded("inexact_rules_counterexamples", body)
