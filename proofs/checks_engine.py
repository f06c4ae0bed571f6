"""Checks of C14 (ARGUMENT.md): what the engine level's PIT test may claim. Rounded reports move each PIT value
by at most N * r (`rounding_slack_bound`, on the engine level's own `conformance/engine/pit.py:pit_uniforms`);
a monotone deviation of per-token TV t moves the PIT's CDF at 1/2 by at least t / 2 (`monotone_pit_tent`); a
deviation whose direction changes with the context can leave the PIT's law exactly uniform
(`context_mixture_null`)."""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Callable, Sequence

import numpy as np

from .cases import SEED, random_dist
from .kernels import F0, F1, fmt, tv
from .registry import CheckResult, check, expect, run_guarded


class _Draws(np.random.Generator):
    """A Generator whose `random(n)` returns the given W values (so the PIT's randomization is known)."""

    def __init__(self, draws: Sequence[float]):
        super().__init__(np.random.PCG64(0))
        self._draws = np.asarray(draws, dtype=np.float64)

    def random(self, size=None, dtype=np.float64, out=None):
        return self._draws[: int(size)] if size is not None else float(self._draws[0])


def _exact_pit(law: Sequence[Fraction], order: Sequence[int], token: int, w: Fraction) -> Fraction:
    """U = F(x-) + W p(x) under `law` with the categories in `order` (ids; the last entry is the tail)."""
    before = sum((law[i] for i in order[: order.index(token)]), F0)
    return before + w * law[token]


def _report(law: Sequence[Fraction], listed: int, rng: random.Random, r: Fraction) -> list[list]:
    """The top-`listed` of `law` (id < len - 1), each reported with an error in [-r, r] (some pushed to +r, so
    the list may sum to more than 1)."""
    head = sorted(range(len(law) - 1), key=lambda i: (-law[i], i))[:listed]
    errors = [r if rng.random() < 0.5 else Fraction(rng.randint(-4, 4), 4) * r for _ in head]
    return [[i, float(max(F0, law[i] + e))] for i, e in zip(head, errors)]


@check("C14")
def rounding_slack_bound(pit_uniforms: Callable | None = None, r: float = 1e-5, cases: int = 300) -> CheckResult:
    """Reports within r of the truth: every PIT value is within N * r of the exact one (same order, same W)."""
    from ..conformance.engine import pit

    under_test: Callable = pit.pit_uniforms if pit_uniforms is None else pit_uniforms

    def body():
        rng, worst, checked = random.Random(SEED + 14), F0, 0
        rr = Fraction(r)
        for case in range(cases):
            vocab = rng.randint(3, 9)
            law = random_dist(rng, vocab, denom=2000, p_zero=0.2)
            if law[-1] == 0:  # keep a positive true tail (the unlisted token) in half of the cases
                law = [x * Fraction(999, 1000) for x in law[:-1]] + [Fraction(1, 1000)]
            report = _report(law, rng.randint(1, vocab - 1), rng, rr)
            order = [i for i, _ in sorted(report, key=lambda pair: (-pair[1], pair[0]))]
            listed = set(order)
            tail = [i for i in range(vocab) if i not in listed]
            for token in range(vocab):
                if law[token] == 0:
                    continue
                w = Fraction(rng.randint(0, 1000), 1000)
                got = float(under_test([token], [report], _Draws([float(w)]))[0])
                if token in listed:
                    exact = _exact_pit(law, order, token, w)
                else:  # the tail category: the listed mass, then W times the whole true tail
                    exact = sum((law[i] for i in order), F0) + w * sum((law[i] for i in tail), F0)
                gap = abs(Fraction(got) - exact)
                bound = len(report) * rr + Fraction(1, 10**12)  # float rounding of the computation itself
                expect(gap <= bound, f"case {case}: token {token}: |U' - U| = {fmt(gap)} > N r = {fmt(bound)}")
                worst, checked = max(worst, gap / (len(report) * rr)), checked + 1
        return checked, f"{checked} (report, token, W) triples; largest |U' - U| / (N r) = {fmt(worst)}"

    return run_guarded("rounding_slack_bound", body)


def _pit_cdf_at(law: Sequence[Fraction], alt: Sequence[Fraction], t: Fraction) -> Fraction:
    """G(t): the CDF at t of the PIT value under `law` (categories in descending `law`) of a token drawn from `alt`."""
    order = sorted(range(len(law)), key=lambda i: (-law[i], i))
    start, total = F0, F0
    for i in order:
        end = start + law[i]
        if end <= t:
            total += alt[i]
        elif start < t:
            total += alt[i] * (t - start) / law[i]
        start = end
    return total


def _monotone_alternatives(law: list[Fraction]) -> list[tuple[str, list[Fraction], int]]:
    """(name, q, sign) with q / p monotone in p: sign +1 where q is more peaked (G(t) >= t), -1 flatter."""
    order = sorted(range(len(law)), key=lambda i: (-law[i], i))
    sq = [x * x for x in law]
    hot = [(x + Fraction(1, len(law))) / 2 for x in law]
    keep = set(order[: max(1, len(order) // 2)])
    kept = sum((law[i] for i in keep), F0)
    top = [law[i] / kept if i in keep else F0 for i in range(len(law))]
    best = order[0]
    pull = [(law[i] + (1 if i == best else 0)) / 2 for i in range(len(law))]
    return [("cooler (p^2)", [x / sum(sq, F0) for x in sq], 1), ("hotter (mix with uniform)", hot, -1),
            ("truncated to the top half", top, 1), ("pulled to the argmax", pull, 1)]


@check("C14")
def monotone_pit_tent(cases: int = 200) -> CheckResult:
    """q / p monotone in p: the PIT's CDF at 1/2 is off by at least TV / 2, its largest deviation is TV."""

    def body():
        rng, checked, tightest = random.Random(SEED + 41), 0, F1
        for case in range(cases):
            law = random_dist(rng, rng.randint(2, 8), denom=60, p_zero=0.0)
            ranked = sorted(law, reverse=True)
            corners = [sum(ranked[:k], F0) for k in range(len(law) + 1)]  # G - t is linear between these
            for name, alt, sign in _monotone_alternatives(law):
                distance = tv(law, alt)
                if distance == 0:
                    continue
                half = sign * (_pit_cdf_at(law, alt, Fraction(1, 2)) - Fraction(1, 2))
                expect(half >= distance / 2, f"case {case}, {name}: G(1/2) - 1/2 = {fmt(half)} < TV / 2 = "
                       f"{fmt(distance / 2)}")
                peak = max(abs(_pit_cdf_at(law, alt, t) - t) for t in corners)
                expect(peak == distance, f"case {case}, {name}: the PIT's largest deviation {fmt(peak)} != TV "
                       f"{fmt(distance)}")
                tightest, checked = min(tightest, half / distance), checked + 1
        return checked, f"{checked} monotone alternatives; smallest (G(1/2) - 1/2) / TV = {fmt(tightest)} (>= 1/2)"

    return run_guarded("monotone_pit_tent", body)


@check("C14")
def context_mixture_null(cases: int = 100) -> CheckResult:
    """Deviations of TV eps whose sign is a fair coin per context: the PIT value's law is exactly U(0, 1)."""

    def body():
        rng, checked = random.Random(SEED + 44), 0
        grid = [Fraction(j, 32) for j in range(33)]
        for case in range(cases):
            law = random_dist(rng, rng.randint(2, 7), denom=40, p_zero=0.0)
            eps = min(law) / 2
            i, j = rng.sample(range(len(law)), 2)
            plus = [x + (eps if k == i else -eps if k == j else 0) for k, x in enumerate(law)]
            minus = [x - (eps if k == i else -eps if k == j else 0) for k, x in enumerate(law)]
            expect(tv(law, plus) == eps and tv(law, minus) == eps, f"case {case}: the alternatives are not at TV eps")
            for t in grid:
                mixed = (_pit_cdf_at(law, plus, t) + _pit_cdf_at(law, minus, t)) / 2
                expect(mixed == t, f"case {case}: the mixture's PIT CDF at {t} is {fmt(mixed)}, not {t}")
            checked += 1
        return checked, (f"{checked} laws: per-token TV eps > 0 at every context, the PIT exactly uniform (no test "
                         "can see it)")

    return run_guarded("context_mixture_null", body)
