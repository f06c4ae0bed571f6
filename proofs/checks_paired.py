"""Checks of C18 (ARGUMENT.md): the candidate's paired checks are valid whatever the reports, on the engine level's
own code (`conformance/engine/paired_checks.py`). Under any seed-coupling with equal marginals, the block factor
on cross pairs has mean exactly 1 (`cross_pair_mean_is_one`: exact, by pairing sigma(d) with sigma(-d)); the
within-unit pair can be biased, enough to false-fail a test at 0.05 with probability 0.43 (`within_unit_pair_can_be_
biased`); the code's factor lies in [0, 2] (`block_factor_is_bounded`); and the code's `block_log_e` reads cross pairs
with ell learned from the earlier blocks only (`block_log_e_reads_cross_pairs`)."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from fractions import Fraction
from types import SimpleNamespace
from typing import Callable, Sequence
from unittest import mock

import numpy as np

# paired_checks._sigmoid read at the call: a test breaks it
from ..conformance.engine import (
    paired_checks,
    scorers,
)
from ..conformance.engine.paired_checks import SCALES, block_log_e

from .cases import SEED
from .kernels import F0, F1, fmt
from .registry import CheckResult, check, expect, run_guarded

HALF = Fraction(1, 2)


def _coupling(rng: random.Random, size: int) -> list[list[Fraction]]:
    """A random joint law J of (C, R) on size x size values with equal marginals: a diagonal plus directed cycles
    (each adds w to (a1, a2), (a2, a3), ..., (ak, a1): row and column sums grow alike), normalised; asymmetric."""
    weights = [[F0] * size for _ in range(size)]
    for i in range(size):
        weights[i][i] += rng.randint(0, 3)
    for _ in range(rng.randint(1, 3)):
        cycle = rng.sample(range(size), rng.randint(2, size))
        w = rng.randint(1, 5)
        for a, b in zip(cycle, cycle[1:] + cycle[:1]):
            weights[a][b] += w
    total = sum(sum(row) for row in weights)
    return [[x / total for x in row] for row in weights]


def _coefficients(
    joint: Sequence[Sequence[Fraction]], ell: Sequence[Fraction], pairing: str
) -> dict:
    """{d: total probability of the terms sigma(d)} of the block factor's mean over two independent units
    (C1, R1), (C2, R2) ~ J (enumerated): cross pairs sigma(ell(C1) - ell(R2)) + sigma(ell(C2) - ell(R1)), or
    within-unit pairs sigma(ell(C1) - ell(R1)) + sigma(ell(C2) - ell(R2))."""
    size = len(joint)
    out: defaultdict[Fraction, Fraction] = defaultdict(lambda: F0)
    cells = [(x, y) for x in range(size) for y in range(size) if joint[x][y]]
    for c1, r1 in cells:
        for c2, r2 in cells:
            weight = joint[c1][r1] * joint[c2][r2]
            pairs = ((c1, r2), (c2, r1)) if pairing == "cross" else ((c1, r1), (c2, r2))
            for x, y in pairs:
                out[ell[x] - ell[y]] += weight
    return dict(out)


def _exact_mean(coef: dict) -> Fraction | None:
    """sum_d a(d) sigma(d) exactly when a(d) = a(-d) for every d (then sigma(d) + sigma(-d) = 1 pairs the terms);
    None when the coefficients are not symmetric."""
    if any(coef.get(-d, F0) != a for d, a in coef.items()):
        return None
    return sum((a for d, a in coef.items() if d > 0), F0) + coef.get(F0, F0) * HALF


@check("C18")
def cross_pair_mean_is_one(cases: int = 300, pairing: str = "cross") -> CheckResult:
    """Random joint laws of (C, R) with equal marginals, asymmetric couplings, random ell: the block factor on cross
    pairs has mean exactly 1 (its sigma terms pair as sigma(d) + sigma(-d) = 1), and 1 within 1e-12 with the code's
    sigma in float64; within-unit pairs lose the symmetry."""

    def body():
        rng, asymmetric, biased = random.Random(SEED + 180), 0, 0
        for case in range(cases):
            size = rng.randint(2, 6)
            joint = _coupling(rng, size)
            expect(
                [sum(joint[x]) for x in range(size)]
                == [sum(joint[x][y] for x in range(size)) for y in range(size)],
                f"case {case}: the marginals differ",
            )
            asymmetric += any(joint[x][y] != joint[y][x] for x in range(size) for y in range(size))
            ell = [Fraction(rng.randint(-40, 40), rng.randint(1, 8)) for _ in range(size)]
            coef = _coefficients(joint, ell, pairing)
            exact = _exact_mean(coef)
            expect(
                exact == F1,
                f"case {case}: the block factor's mean is not exactly 1 "
                f"({'coefficients not symmetric' if exact is None else fmt(exact)})",
            )
            floated = math.fsum(
                float(a) * float(paired_checks._sigmoid(float(d))) for d, a in coef.items()
            )
            expect(abs(floated - 1.0) < 1e-12, f"case {case}: float64 mean {floated!r} != 1")
            within = _coefficients(joint, ell, "within")
            biased += _exact_mean(within) is None
        expect(asymmetric > cases // 2, f"only {asymmetric} asymmetric couplings")
        return cases, (
            f"{cases} couplings ({asymmetric} asymmetric): the cross-pair factor's mean is exactly 1; the "
            f"within-unit pairs' sigma terms are not symmetric in {biased}"
        )

    return run_guarded("cross_pair_mean_is_one", body)


@check("C18")
def within_unit_pair_can_be_biased(
    size: int = 10, units: int = 8, rate: float = 0.05
) -> CheckResult:
    """The counter-example of C18 (c): C uniform on 0..9, R = C - 1 mod 10 (a seed-coupling, equal marginals), ell(x)
    = x: E sigma(ell(C) - ell(R)) = 0.9 sigma(1) + 0.1 sigma(-9) != 1/2 on the same unit, exactly 1/2 across units;
    the within-unit product reaches 1/rate after 8 units with probability 0.9^8 = 0.43 > rate."""

    def body():
        joint = [
            [Fraction(1, size) if (x - 1) % size == y else F0 for y in range(size)]
            for x in range(size)
        ]
        ell = [Fraction(x) for x in range(size)]
        within = _coefficients(joint, ell, "within")
        expect(
            within == {F1: Fraction(2 * (size - 1), size), Fraction(1 - size): Fraction(2, size)},
            f"unexpected within-unit terms {within}",
        )
        mean = (
            float(
                sum(float(a) * float(paired_checks._sigmoid(float(d))) for d, a in within.items())
            )
            / 2
        )
        expect(abs(mean - 0.5) > 0.1, f"the within-unit mean {mean:.6f} is not biased")
        expect(
            _exact_mean(_coefficients(joint, ell, "cross")) == F1,
            "the cross-pair factor's mean is not 1",
        )
        grown = (2.0 * float(paired_checks._sigmoid(1.0))) ** units
        chance = Fraction(size - 1, size) ** units
        expect(
            grown >= 1 / rate and chance > rate,
            f"the within-unit product {grown:.3g} after {units} units, with "
            f"probability {fmt(chance)}",
        )
        return 1, (
            f"E sigma(ell(C) - ell(R)) = {mean:.4f} on one unit (1/2 across units); the within-unit product "
            f"reaches {grown:.1f} >= 1/{rate} with probability {float(chance):.3f} after {units} units"
        )

    return run_guarded("within_unit_pair_can_be_biased", body)


@check("C18")
def block_factor_is_bounded(points: int = 2001) -> CheckResult:
    """The code's sigma is in [0, 1] with sigma(d) + sigma(-d) = 1 (to 1e-15) from -1e300 to 1e300 and at +-inf, so
    each block's factor sigma(c a) + sigma(c b) over the code's scales c is in [0, 2]."""

    def body():
        grid = np.concatenate(
            [
                np.linspace(-60.0, 60.0, points),
                [0.0, 1e-300, 700.0, 1e300, np.inf],
                -np.array([1e-300, 700.0, 1e300, np.inf]),
            ]
        )
        s, mirrored = paired_checks._sigmoid(grid), paired_checks._sigmoid(-grid)
        expect(bool(np.all((s >= 0) & (s <= 1))), "sigma leaves [0, 1]")
        gap = float(np.max(np.abs(s + mirrored - 1.0)))
        expect(gap <= 1e-15, f"sigma(d) + sigma(-d) differs from 1 by {gap:.3g}")
        a, b = np.meshgrid(grid[:: max(1, points // 200)], grid[:: max(1, points // 200)])
        worst = (np.inf, -np.inf)
        for c in SCALES:
            with np.errstate(invalid="ignore", over="ignore"):
                factor = paired_checks._sigmoid(c * a) + paired_checks._sigmoid(c * b)
            expect(
                bool(np.all((factor >= 0) & (factor <= 2))), f"scale {c}: a factor leaves [0, 2]"
            )
            worst = (min(worst[0], float(factor.min())), max(worst[1], float(factor.max())))
        return grid.size, (
            f"{grid.size} differences: |sigma(d) + sigma(-d) - 1| <= {gap:.1g}; factors over "
            f"{SCALES.size} scales in [{worst[0]:.3g}, {worst[1]:.3g}]"
        )

    return run_guarded("block_factor_is_bounded", body)


class _Stub:
    """A scorer whose ell(view) = value x (1 + what it learned) and which records what it had learned when scored."""

    log: list = []

    def __init__(self, by_prompt: bool = False) -> None:
        self.learned: list = []

    def score(self, view) -> float:
        _Stub.log.append((view[0], tuple(self.learned)))
        return view[1] * (1.0 + 0.1 * len(self.learned))

    def learn(self, view, role: str) -> None:
        self.learned.append(view[0])


def _expected_log_e(units: Sequence[tuple]) -> float:
    """log of mean over SCALES of prod over blocks of sigma(c (ell(C1) - ell(R2))) + sigma(c (ell(C2) - ell(R1)))."""
    logs = np.zeros(SCALES.size)
    for j in range(0, len(units) - 1, 2):
        scale = 1.0 + 0.1 * 2 * j  # the stub has learned the 2 j views of the earlier blocks
        (c1, r1), (c2, r2) = units[j], units[j + 1]
        first, second = scale * (c1[1] - r2[1]), scale * (c2[1] - r1[1])
        logs += np.log(
            [1 / (1 + math.exp(-c * first)) + 1 / (1 + math.exp(-c * second)) for c in SCALES]
        )
    top = float(logs.max())
    return top + math.log(float(np.mean(np.exp(logs - top))))


@check("C18")
def block_log_e_reads_cross_pairs(cases: int = 50, block: Callable | None = None) -> CheckResult:
    """The code's `block_log_e` (a stub scorer put in its registry for the check): the log of the mean over the
    scales of the product over blocks of sigma(c (ell(C1) - ell(R2))) + sigma(c (ell(C2) - ell(R1))), each block
    scored with ell learned from the earlier blocks' units only."""
    block = block or block_log_e

    def body():
        rng = random.Random(SEED + 181)
        for case in range(cases):
            units = [
                ((f"C{u}", rng.uniform(-3, 3)), (f"R{u}", rng.uniform(-3, 3)))
                for u in range(rng.randint(2, 9))
            ]
            # the code keys views by id(unit)
            holders = [SimpleNamespace(unit=u) for u in range(len(units))]
            chosen: list = [(holders[j], holders[j + 1]) for j in range(0, len(units) - 1, 2)]
            _Stub.log = []
            with mock.patch.dict(scorers.SCORERS, {"_proof_stub": _Stub}):
                got = block("_proof_stub", chosen, {id(h): units[h.unit] for h in holders})
            want = _expected_log_e(units)
            expect(
                abs(got - want) <= 1e-9 * max(1.0, abs(want)),
                f"case {case}: log e {got} != the cross-pair product's {want}",
            )
            for name, learned in _Stub.log:
                earlier = {v for u in range(2 * (int(name[1:]) // 2)) for v in (f"C{u}", f"R{u}")}
                expect(
                    set(learned) == earlier,
                    f"case {case}: {name} scored after learning {sorted(learned)}",
                )
        return (
            cases,
            f"{cases} unit lists: block_log_e is the cross-pair product, ell learned from earlier blocks only",
        )

    return run_guarded("block_log_e_reads_cross_pairs", body)


__all__ = [
    "block_factor_is_bounded",
    "block_log_e_reads_cross_pairs",
    "cross_pair_mean_is_one",
    "within_unit_pair_can_be_biased",
]
