"""Checks of C17 (ARGUMENT.md): the law route's any-shape bound, on the engine level's own code
(`conformance/engine/any_shape.py`). Merging categories into a "rest" bin costs at most the rest's true mass
(`bins_merge_bound`); a report within the tolerance moves the mass of every union of bins by at most rho S' + N a,
which the code's allowance covers twice over, and the code's empirical excess and rest envelope are the exact ones
(`report_set_tolerance`); Bennett's factor has mean <= 1 and the code's variance proxy bounds every union's
c_hat (1 - c_hat) (`bennett_factor_bernoulli`); the prefix prior sums to <= 1 at every length
(`prefix_prior_sums_to_at_most_one`); and the code's bound covers the realised mean TV of a known non-monotone
deviation in every run of a small Monte-Carlo (`any_shape_bound_covers_the_truth`)."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction
from types import SimpleNamespace
from typing import Callable, Sequence

import numpy as np

from ..conformance.engine.any_shape import (
    LAMBDA_GRID,
    PARTITIONS,
    PrefixCounts,
    THETA,
    _partition_terms,
    _tolerance,
    any_shape_bound,
    prefix_weight_of,
)
from ..conformance.engine.law_stream import StreamToken, categories

from .cases import SEED, random_dist
from .kernels import F0, fmt, tv
from .registry import CheckResult, check, expect, run_guarded

# the report tolerance (samples.TOLERANCE_RELATIVE, _ABSOLUTE)
RHO, ABS = (
    Fraction(1, 1000),
    Fraction(1, 10**5),
)


def _plus(x: Fraction) -> Fraction:
    return x if x > 0 else F0


def _tv_bins(
    c: Sequence[Fraction], p: Sequence[Fraction], bins: Sequence[Sequence[int]]
) -> Fraction:
    return sum((_plus(sum((c[i] for i in b), F0) - sum((p[i] for i in b), F0)) for b in bins), F0)


@check("C17")
def bins_merge_bound(
    cases: int = 600, rest_term: Callable[[Fraction], Fraction] | None = None
) -> CheckResult:
    """TV on categories <= TV on bins (top j apart, the rest merged) + p(rest), exactly; equality iff c(rest) >=
    p(rest) and c, p have disjoint supports inside the rest (found and checked)."""
    rest_term = rest_term or (lambda p_rest: p_rest)

    def body():
        rng, equal, checked = random.Random(SEED + 170), 0, 0
        for case in range(cases):
            size = rng.randint(2, 7)
            c, p = random_dist(rng, size, denom=9), random_dist(rng, size, denom=9)
            order = rng.sample(range(size), size)
            top = rng.randint(0, size - 2)
            rest = order[top:]
            # disjoint supports inside the rest, c heavier there: the equality case
            if case % 3 == 0:
                half = rng.randint(1, len(rest) - 1)
                c = [x if i not in rest[half:] else F0 for i, x in enumerate(c)]
                p = [x if i not in rest[:half] else F0 for i, x in enumerate(p)]
                if not (sum(c) and sum(p)):
                    continue
                c, p = [x / sum(c) for x in c], [x / sum(p) for x in p]
            bins = [[i] for i in order[:top]] + [rest]
            lhs = tv(c, p)
            p_rest, c_rest = sum((p[i] for i in rest), F0), sum((c[i] for i in rest), F0)
            rhs = _tv_bins(c, p, bins) + rest_term(p_rest)
            expect(lhs <= rhs, f"case {case}: TV {fmt(lhs)} > TV on bins + p(rest) = {fmt(rhs)}")
            disjoint = all(c[i] == 0 or p[i] == 0 for i in rest)
            expect(
                (lhs == rhs) == (c_rest >= p_rest and disjoint),
                f"case {case}: equality {lhs == rhs} but "
                f"c(rest) >= p(rest): {c_rest >= p_rest}, disjoint supports in the rest: {disjoint}",
            )
            equal, checked = equal + (lhs == rhs), checked + 1
        expect(equal > 0, "no equality case found")
        return (
            checked,
            f"{checked} (c, p, partition) triples; equality in {equal} (exactly the predicted ones)",
        )

    return run_guarded("bins_merge_bound", body)


def _tolerant_report(
    rng: random.Random, law: Sequence[Fraction], listed: int
) -> list[tuple[int, float]]:
    """The top `listed` tokens of `law`, each reported within rho p' + a (several at the edge, so S' may exceed 1)."""
    head = sorted(range(len(law)), key=lambda i: (-law[i], i))[:listed]
    out = []
    for i in head:
        e, u = ABS * Fraction(rng.randint(-4, 4), 4), Fraction(rng.randint(0, 4), 4)
        out.append((i, float(max(F0, (law[i] + e) / (1 - rng.choice((-1, 1)) * RHO * u)))))
    return out


def _within(law: Sequence[Fraction], report: Sequence[tuple[int, float]]) -> bool:
    return all(abs(Fraction(q) - law[i]) <= RHO * Fraction(q) + ABS for i, q in report)


def _unions(size: int):
    return itertools.chain.from_iterable(
        itertools.combinations(range(size), k) for k in range(size + 1)
    )


def _code_bins(cats, order: Sequence[int], top: int | None) -> list[list[int]]:
    """The bins of partition `top` (any_shape.PARTITIONS) as lists of category indices, in the code's order."""
    if top is None or top + 1 >= len(order):
        return [[k] for k in order]
    return [[k] for k in order[:top]] + [list(order[top:])]


def _set_tolerance_case(rng: random.Random, case: int, tolerance) -> tuple[Fraction, int]:
    size = rng.randint(3, 8)
    law = random_dist(rng, size, denom=400, p_zero=0.1)
    report = _tolerant_report(rng, law, rng.randint(1, size - 1))
    if not _within(law, report):
        # float rounding pushed an edge report out of the tolerance: not a case of the claim
        return (
            F0,
            0,
        )
    cats = categories(tuple(report))
    listed = [Fraction(float(q)) for q in cats.probs[:-1]]
    s, n = sum(listed, F0), len(listed)
    reported = listed + [max(F0, 1 - s)]
    true = [law[i] for i in cats.ids] + [1 - sum((law[i] for i in cats.ids), F0)]
    worst = max(
        abs(sum((reported[k] for k in a), F0) - sum((true[k] for k in a), F0))
        for a in _unions(n + 1)
    )
    allowed = RHO * s + n * ABS
    expect(
        worst <= allowed,
        f"case {case}: |r'(A) - p(A)| = {fmt(worst)} > rho S' + N a = {fmt(allowed)}",
    )
    code = Fraction(tolerance(cats))
    expect(
        code >= 2 * allowed,
        f"case {case}: the code's allowance {fmt(code)} < 2 (rho S' + N a) = {fmt(2 * allowed)}",
    )
    counts = np.array([rng.randint(0, 5) for _ in range(n + 1)], dtype=float)
    counts[rng.randrange(n + 1)] += 1
    emp = [Fraction(int(x), int(counts.sum())) for x in counts]
    order = sorted(range(n + 1), key=lambda k: (-reported[k], k))
    for top, (d_hat, rest, k, _) in zip(
        PARTITIONS, _partition_terms(PrefixCounts(cats, counts, 1.0))
    ):
        bins = _code_bins(cats, order, top)
        exact = max(
            sum((emp[j] - reported[j] for b in union for j in b), F0) for union in _unions_of(bins)
        )
        expect(
            abs(Fraction(d_hat) - exact) <= Fraction(1, 10**12),
            f"case {case}, partition {top}: the code's "
            f"D_hat {d_hat} != max_A [c_hat(A) - r'(A)] = {fmt(exact)}",
        )
        merged = bins[-1] if len(bins[-1]) > 1 else []
        expect(
            k == len(bins)
            and Fraction(rest) >= sum((true[j] for j in merged), F0) - Fraction(1, 10**12),
            f"case {case}, partition {top}: rest envelope {rest} < p(rest), or {k} bins != {len(bins)}",
        )
    return worst / allowed, 1


def _unions_of(bins: Sequence[Sequence[int]]):
    return itertools.chain.from_iterable(
        itertools.combinations(bins, k) for k in range(len(bins) + 1)
    )


@check("C17")
def report_set_tolerance(cases: int = 300, tolerance: Callable | None = None) -> CheckResult:
    """Reports within the tolerance: every union A of categories has |r'(A) - p(A)| <= rho S' + N a, which the code's
    allowance 2 eta max(1, S') covers twice; the code's D_hat is max_A [c_hat(A) - r'(A)] over unions of bins, its
    rest envelope >= p(rest) (exact fractions)."""
    tolerance = tolerance or _tolerance

    def body():
        rng, worst, checked = random.Random(SEED + 171), F0, 0
        for case in range(cases):
            ratio, ok = _set_tolerance_case(rng, case, tolerance)
            worst, checked = max(worst, ratio), checked + ok
        return checked, (
            f"{checked} reports x every union A; largest |r'(A) - p(A)| / (rho S' + N a) = {fmt(worst)} "
            "(<= 1; the code allows 2)"
        )

    return run_guarded("report_set_tolerance", body)


@check("C17")
def bennett_factor_bernoulli(
    cases: int = 150, phi: Callable[[float], float] | None = None
) -> CheckResult:
    """E exp(lam (mu - X) - phi(lam) mu (1 - mu)) <= 1 for X ~ Bernoulli(mu) on a grid of mu and every lam of the
    grid (lam - phi > 0 there, not at 1.2565); every union's c_hat (1 - c_hat) <= the code's v_hat; and
    c (1 - c) <= v_hat + |c - c_hat| (exact)."""
    phi = phi or (lambda lam: math.expm1(lam) - lam)

    def body():
        mu = np.linspace(0.0, 1.0, 401)
        worst = -np.inf
        for lam in [*LAMBDA_GRID, 1.1, 1.2, 1.25]:
            mean = (1 - mu) * np.exp(lam * mu - phi(lam) * mu * (1 - mu)) + mu * np.exp(
                lam * (mu - 1) - phi(lam) * mu * (1 - mu)
            )
            worst = max(worst, float(mean.max()))
            expect(
                mean.max() <= 1 + 1e-12, f"lam {lam}: the factor's mean is {mean.max():.15f} > 1"
            )
            expect(lam - phi(lam) > 0, f"lam {lam}: lam - phi(lam) <= 0")
        expect(1.2565 - phi(1.2565) <= 0, "lam - phi(lam) > 0 at 1.2565: the stated range is wrong")
        rng, unions = random.Random(SEED + 172), 0
        for case in range(cases):
            size = rng.randint(2, 8)
            cats = categories(
                tuple((i, float(x)) for i, x in enumerate(random_dist(rng, size, denom=50)[:-1]))
            )
            counts = np.array([rng.choice((0, 1, 3, 20)) for _ in range(size)], dtype=float)
            counts[rng.randrange(size)] += 1
            order = sorted(range(size), key=lambda k: (-cats.probs[k], k))
            emp = [Fraction(int(x), int(counts.sum())) for x in counts]
            for top, (_, _, _, v_hat) in zip(
                PARTITIONS, _partition_terms(PrefixCounts(cats, counts, 1.0))
            ):
                for a in _unions_of(_code_bins(cats, order, top)):
                    c_hat = sum((emp[j] for b in a for j in b), F0)
                    expect(
                        c_hat * (1 - c_hat) <= Fraction(v_hat) + Fraction(1, 10**12),
                        f"case {case}, partition "
                        f"{top}: c_hat(A) (1 - c_hat(A)) = {fmt(c_hat * (1 - c_hat))} > v_hat = {v_hat}",
                    )
                    c = Fraction(rng.randint(0, 60), 60)
                    expect(
                        c * (1 - c) <= c_hat * (1 - c_hat) + abs(c - c_hat),
                        f"case {case}: linearisation fails",
                    )
                    unions += 1
        return unions, (
            f"{len(LAMBDA_GRID) + 3} lam x 401 mu: largest mean factor {worst:.12f} (<= 1); {unions} "
            "unions: c_hat (1 - c_hat) <= v_hat and c (1 - c) <= v_hat + |c - c_hat|"
        )

    return run_guarded("bennett_factor_bernoulli", body)


def _report_tree(rng: random.Random, vocab: int, depth: int) -> dict:
    """Reports at every prefix shorter than `depth` (a few missing), top-N lists summing to 0.8..1.05."""
    reports = {}
    for length in range(depth):
        for prefix in itertools.product(range(vocab), repeat=length):
            if rng.random() < 0.1:
                continue
            listed = rng.sample(range(vocab), rng.randint(1, vocab))
            raw = [rng.randint(1, 20) for _ in listed]
            total = sum(raw) / rng.choice((0.8, 0.95, 1.0, 1.0, 1.02, 1.05))
            reports[prefix] = SimpleNamespace(
                top_probs=tuple((i, r / total) for i, r in zip(listed, raw))
            )
    return reports


@check("C17")
def prefix_prior_sums_to_at_most_one(
    cases: int = 80, weight_of: Callable | None = None
) -> CheckResult:
    """The code's prefix weights (each prompt 1 / #prompts at the root; listed token: p' / max(1, S'); unlisted:
    tail / max(1, S') / V_BOUND) sum to <= 1 over every length's prefixes of all prompts (enumerated), so the unused
    prefixes' cost sum -log(1 - eps_h) is <= 2 THETA."""
    weight_of = weight_of or prefix_weight_of

    def body():
        rng, largest, checked = random.Random(SEED + 173), 0.0, 0
        for case in range(cases):
            vocab, depth, prompts = rng.randint(2, 5), rng.randint(1, 4), rng.randint(1, 3)
            weight = weight_of({f"p{j}": _report_tree(rng, vocab, depth) for j in range(prompts)})
            for length in range(1, depth + 1):
                weights = [
                    weight(f"p{j}", h)
                    for j in range(prompts)
                    for h in itertools.product(range(vocab), repeat=length)
                ]
                total = math.fsum(weights)
                expect(
                    total <= 1 + 1e-12,
                    f"case {case}: the weights of length {length} sum to {total!r} > 1",
                )
                penalty = math.fsum(-math.log1p(-min(0.5, THETA * w)) for w in weights)
                expect(
                    penalty <= 2 * THETA * total + 1e-12,
                    f"case {case}: unused cost {penalty} > 2 THETA sum w",
                )
                largest, checked = max(largest, total), checked + 1
        return (
            checked,
            f"{checked} (report trees, length) pairs; largest sum of weights {largest:.12f} (<= 1)",
        )

    return run_guarded("prefix_prior_sums_to_at_most_one", body)


_BASE = (0.6, 0.25, 0.1, 0.05)  # the toy reference's law, rotated per prefix
# kind -> (rank losing mass, rank gaining it, amount): q / p not monotone
_SHIFTS = {
    1: (1, 2, 0.08),
    2: (2, 3, 0.04),
}


def _toy_laws(prefix: tuple) -> tuple[list[float], list[float]]:
    """(reference p, candidate q) at `prefix`: p the base law rotated by sum(prefix); q = p, or p with mass moved
    between two ranks so that q / p goes down then up along the order (a deviation of no monotone shape)."""
    shift = sum(prefix) % 4
    p = [0.0] * 4
    for rank, mass in enumerate(_BASE):
        p[(rank + shift) % 4] = mass
    q = list(p)
    kind = (7 * sum(prefix) + len(prefix) + 1) % 3
    if kind in _SHIFTS:
        lose, gain, amount = _SHIFTS[kind]
        q[(lose + shift) % 4] -= amount
        q[(gain + shift) % 4] += amount
    return p, q


def _toy_run(
    rng: np.random.Generator, completions: int, positions: int, cache: dict
) -> tuple[list, dict, list]:
    """One run: the candidate's stream of `completions` completions, the reports (prompt -> prefix -> report), and
    the summed TV(q_h, p_h) over the tokens of each position."""
    tokens, summed = [], [0.0] * positions
    for index in range(completions):
        prefix: tuple = ()
        for t in range(positions):
            if prefix not in cache:
                p, q = _toy_laws(prefix)
                top = sorted(range(4), key=lambda i: -p[i])[:3]
                report = tuple((i, p[i] * (1 + 5e-4 * rng.uniform(-1, 1))) for i in top)
                cache[prefix] = (
                    q,
                    categories(report),
                    SimpleNamespace(top_probs=report),
                    0.5 * float(np.abs(np.subtract(p, q)).sum()),
                )
            q, cats, _, distance = cache[prefix]
            token = int(rng.choice(4, p=q))
            tokens.append(
                StreamToken(index, index, t + 1, prefix, token, cats, cats.index(token), 0.5, "toy")
            )
            summed[t] += distance
            prefix = prefix + (token,)
    return tokens, {"toy": {h: v[2] for h, v in cache.items()}}, summed


@check("C17")
def any_shape_bound_covers_the_truth(
    runs: int = 200, completions: int = 500, bound_of: Callable | None = None
) -> CheckResult:
    """Monte-Carlo on a toy law with a known deviation of no monotone shape (positions 1..3, V = 4, reports within the
    tolerance): the code's any-shape bound at beta = 0.05 is >= the realised mean TV in every run, overall and at
    each position (the per-position bounds hold together: the union over positions is inside the bound)."""
    bound_of = bound_of or any_shape_bound

    def body():
        rng, ratios, first, beta, positions = np.random.default_rng(SEED + 174), [], [], 0.05, 3
        cache: dict = {}
        for run in range(runs):
            tokens, reports, summed = _toy_run(rng, completions, positions, cache)
            result = bound_of(tokens, prefix_weight_of(reports), positions, beta)
            truth = sum(summed) / len(tokens)
            expect(
                result.bound >= truth,
                f"run {run}: bound {result.bound:.4f} < realised mean TV {truth:.4f}",
            )
            for t in range(positions):
                at = result.per_position[t + 1]["bound"]
                expect(
                    at >= summed[t] / completions,
                    f"run {run}, position {t + 1}: bound {at:.4f} < realised "
                    f"mean TV {summed[t] / completions:.4f}",
                )
            ratios.append(result.bound / truth)
            first.append(result.per_position[1]["bound"] / (summed[0] / completions))
        return runs, (
            f"{runs} runs of {completions} completions: bound / realised mean TV >= {min(ratios):.2f} "
            f"(median {float(np.median(ratios)):.2f}); at position 1 >= {min(first):.2f} (median "
            f"{float(np.median(first)):.2f})"
        )

    return run_guarded("any_shape_bound_covers_the_truth", body)


__all__ = [
    "any_shape_bound_covers_the_truth",
    "bennett_factor_bernoulli",
    "bins_merge_bound",
    "prefix_prior_sums_to_at_most_one",
    "report_set_tolerance",
]
