"""Checks of C14 (ARGUMENT.md): what the engine level's law checks may claim, on the engine level's own code
(`conformance/engine/law_stream.py`, `law_checks.py`). Reports within the tolerance bound the true law by their
envelope and move each PIT value by at most rho + N a (`tolerance_envelope_and_slack`); a monotone deviation of
per-token TV t moves the PIT's mean by at least t / 2 (`monotone_drift_tent`); the fair-coin mixture of opposite
deviations is the reference's law itself, not a deviation (`context_mixture_is_exact`); the grouped context bettors
(`context_bettor_supermartingale`) and the reference's self-check bettors, tempered likelihood ratio and per-prefix
identity test (`reference_bettors_supermartingale`), are test supermartingales under any law within the envelope."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Sequence

import numpy as np

# read at the call: the tests break them to see a check fail
from ..conformance.engine import (
    law_checks,
    law_stream,
)
from ..conformance.engine.law_checks import CONTEXT_WEIGHTS, prefix_law_log_e, tempered_log_e
from ..conformance.engine.law_stream import StreamToken, categories

from .cases import SEED, random_dist
from .kernels import F0, F1, fmt, tv
from .registry import CheckResult, check, expect, run_guarded


def _exact_pit(law: Sequence[Fraction], order: Sequence[int], token: int, w: Fraction) -> Fraction:
    """U = F(x-) + W p(x) under `law` with the categories in `order` (ids; the last entry is the tail)."""
    before = sum((law[i] for i in order[: order.index(token)]), F0)
    return before + w * law[token]


def _report(
    law: Sequence[Fraction], listed: int, rng: random.Random, rho: Fraction, a: Fraction
) -> list[tuple]:
    """The top-`listed` of `law` (ids < len - 1), each reported with an error of at most rho p' + a (some at the edge,
    so the list may sum to more than 1): p' = (p + e) / (1 -/+ rho) with |e| <= a."""
    head = sorted(range(len(law) - 1), key=lambda i: (-law[i], i))[:listed]
    out = []
    for i in head:
        e = a * Fraction(rng.randint(-4, 4), 4)
        sign = rng.choice((-1, 1))
        out.append((i, float(max(F0, (law[i] + e) / (1 - sign * rho)))))
    return out


@check("C14")
def tolerance_envelope_and_slack(cases: int = 300) -> CheckResult:
    """Reports within rho p' + a of the truth: the envelope bounds every true category mass, and every PIT value is
    within rho + N a of the exact one (same order, same W)."""

    def body():
        rng, worst, checked = random.Random(SEED + 14), F0, 0
        rho, a = Fraction(1, 1000), Fraction(1, 10**5)
        for case in range(cases):
            vocab = rng.randint(3, 9)
            law = random_dist(rng, vocab, denom=2000, p_zero=0.2)
            if law[-1] == 0:  # keep a positive true tail (the unlisted token) in half of the cases
                law = [x * Fraction(999, 1000) for x in law[:-1]] + [Fraction(1, 1000)]
            report = _report(law, rng.randint(1, vocab - 1), rng, rho, a)
            cats = categories(tuple((int(i), float(p)) for i, p in report), float(rho), float(a))
            order = list(cats.ids)
            tail = [i for i in range(vocab) if i not in set(order)]
            true_masses = [law[i] for i in order] + [sum((law[i] for i in tail), F0)]
            for c, mass in enumerate(true_masses):
                expect(
                    Fraction(float(cats.envelope[c])) >= mass - Fraction(1, 10**12),
                    f"case {case}: category {c}: envelope {cats.envelope[c]} < true mass {fmt(mass)}",
                )
            for token in range(vocab):
                if law[token] == 0:
                    continue
                w = Fraction(rng.randint(0, 1000), 1000)
                got = law_stream.pit_value(cats, token, float(w))[1]
                exact = (
                    _exact_pit(law, order, token, w)
                    if token in order
                    else sum((law[i] for i in order), F0) + w * true_masses[-1]
                )
                gap = abs(Fraction(got) - exact)
                # float rounding of the computation itself
                bound = Fraction(cats.eta) + Fraction(1, 10**12)
                expect(
                    gap <= bound,
                    f"case {case}: token {token}: |U' - U| = {fmt(gap)} > eta = {fmt(bound)}",
                )
                worst, checked = max(worst, gap / Fraction(cats.eta)), checked + 1
        return (
            checked,
            f"{checked} (report, token, W) triples; largest |U' - U| / eta = {fmt(worst)}",
        )

    return run_guarded("tolerance_envelope_and_slack", body)


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


def _pit_mean(law: Sequence[Fraction], alt: Sequence[Fraction]) -> Fraction:
    """E[U] when the token is drawn from `alt` and U is the randomized PIT under `law`: sum of alt(c) (F(c-) + p(c)/2)."""
    order = sorted(range(len(law)), key=lambda i: (-law[i], i))
    start, mean = F0, F0
    for i in order:
        mean += alt[i] * (start + law[i] / 2)
        start += law[i]
    return mean


def _monotone_alternatives(law: list[Fraction]) -> list[tuple[str, list[Fraction], int]]:
    """(name, q, sign) with q / p monotone in p: sign +1 where q is more peaked (E[U] < 1/2), -1 flatter."""
    order = sorted(range(len(law)), key=lambda i: (-law[i], i))
    sq = [x * x for x in law]
    hot = [(x + Fraction(1, len(law))) / 2 for x in law]
    keep = set(order[: max(1, len(order) // 2)])
    kept = sum((law[i] for i in keep), F0)
    top = [law[i] / kept if i in keep else F0 for i in range(len(law))]
    best = order[0]
    pull = [(law[i] + (1 if i == best else 0)) / 2 for i in range(len(law))]
    return [
        ("cooler (p^2)", [x / sum(sq, F0) for x in sq], 1),
        ("hotter (mix with uniform)", hot, -1),
        ("truncated to the top half", top, 1),
        ("pulled to the argmax", pull, 1),
    ]


@check("C14")
def monotone_drift_tent(cases: int = 200) -> CheckResult:
    """q / p monotone in p: the PIT's mean moves from 1/2 by at least TV / 2, and its CDF's largest deviation is TV."""

    def body():
        rng, checked, tightest = random.Random(SEED + 41), 0, F1
        for case in range(cases):
            law = random_dist(rng, rng.randint(2, 8), denom=60, p_zero=0.0)
            ranked = sorted(law, reverse=True)
            # G - t is linear between these
            corners = [sum(ranked[:k], F0) for k in range(len(law) + 1)]
            for name, alt, sign in _monotone_alternatives(law):
                distance = tv(law, alt)
                if distance == 0:
                    continue
                drift = sign * (Fraction(1, 2) - _pit_mean(law, alt))
                expect(
                    drift >= distance / 2,
                    f"case {case}, {name}: |E U - 1/2| = {fmt(drift)} < TV / 2 = "
                    f"{fmt(distance / 2)}",
                )
                peak = max(abs(_pit_cdf_at(law, alt, t) - t) for t in corners)
                expect(
                    peak == distance,
                    f"case {case}, {name}: the PIT's largest deviation {fmt(peak)} != TV "
                    f"{fmt(distance)}",
                )
                tightest, checked = min(tightest, drift / distance), checked + 1
        return (
            checked,
            f"{checked} monotone alternatives; smallest |E U - 1/2| / TV = {fmt(tightest)} (>= 1/2)",
        )

    return run_guarded("monotone_drift_tent", body)


@check("C14")
def context_mixture_is_exact(cases: int = 100) -> CheckResult:
    """Deviations of TV eps whose sign is a fair coin drawn afresh at each token: the emitted token's law is p itself
    (the PIT's CDF is t exactly), so the candidate is exact: no deviation of its law to detect."""

    def body():
        rng, checked = random.Random(SEED + 44), 0
        grid = [Fraction(j, 32) for j in range(33)]
        for case in range(cases):
            law = random_dist(rng, rng.randint(2, 7), denom=40, p_zero=0.0)
            eps = min(law) / 2
            i, j = rng.sample(range(len(law)), 2)
            plus = [x + (eps if k == i else -eps if k == j else 0) for k, x in enumerate(law)]
            minus = [x - (eps if k == i else -eps if k == j else 0) for k, x in enumerate(law)]
            expect(
                tv(law, plus) == eps and tv(law, minus) == eps,
                f"case {case}: the alternatives are not at TV eps",
            )
            expect(
                [(a + b) / 2 for a, b in zip(plus, minus)] == list(law),
                f"case {case}: the mixture is not p",
            )
            for t in grid:
                mixed = (_pit_cdf_at(law, plus, t) + _pit_cdf_at(law, minus, t)) / 2
                expect(
                    mixed == t,
                    f"case {case}: the mixture's PIT CDF at {t} is {fmt(mixed)}, not {t}",
                )
            checked += 1
        return (
            checked,
            f"{checked} laws: the fair mixture of +-eps deviations is the law p itself (exact)",
        )

    return run_guarded("context_mixture_is_exact", body)


@check("C14")
def context_bettor_supermartingale(cases: int = 400) -> CheckResult:
    """The context bettors' factor 1 - s + s q(G) / envelope(G) has mean <= 1 under every law within the report's
    tolerance, whatever their counts (so their wealth is a test supermartingale)."""

    def body():
        rng, worst, checked = np.random.default_rng(SEED + 45), 0.0, 0
        for case in range(cases):
            size = int(rng.integers(2, 9))
            true = rng.dirichlet(np.full(size, 0.5))
            listed = int(rng.integers(1, size))
            errors = 1.0 + rng.uniform(-1e-3, 1e-3, listed)
            report = tuple(
                (int(i), float(true[i] * errors[k]))
                for k, i in enumerate(np.argsort(-true)[:listed])
            )
            cats = categories(report)
            true_cats = np.append(true[list(cats.ids)], true.sum() - true[list(cats.ids)].sum())
            counts = rng.integers(0, 30, size=4).astype(float)
            for kappa in CONTEXT_WEIGHTS:
                stake = 0.5 * counts.sum() / (counts.sum() + 2.0)
                mean = 0.0
                for c in range(cats.probs.size):
                    masses, envelopes, g = law_checks._grouped(cats, c)
                    q = (counts[g] + kappa * masses[g] / masses.sum()) / (counts.sum() + kappa)
                    mean += true_cats[c] * (1.0 - stake + stake * q / envelopes[g])
                expect(
                    mean <= 1.0 + 1e-12,
                    f"case {case}: kappa {kappa}: the factor's mean is {mean:.15f} > 1",
                )
                worst, checked = max(worst, mean), checked + 1
        return (
            checked,
            f"{checked} (law, counts, weight) triples; largest mean factor {worst:.12f} (<= 1)",
        )

    return run_guarded("context_bettor_supermartingale", body)


def _one_prefix_tokens(cats, categories_seen) -> list:
    return [
        StreamToken(
            i, i, 1, (), int(cats.ids[c]) if c < len(cats.ids) else -1, cats, int(c), 0.5, "p"
        )
        for i, c in enumerate(categories_seen)
    ]


@check("C14")
def reference_bettors_supermartingale(cases: int = 200) -> CheckResult:
    """The reference's self-check bettors, the code's `tempered_log_e` (factor q_theta(c) / envelope(c)) and
    `prefix_law_log_e` (Dirichlet predictive / envelope): after any history, the next token's factor on the e-value
    has mean <= 1 under every law within the report's tolerance."""

    def body():
        rng, worst, checked = np.random.default_rng(SEED + 46), 0.0, 0
        for case in range(cases):
            size = int(rng.integers(2, 9))
            true = rng.dirichlet(np.full(size, 0.5))
            listed = int(rng.integers(1, size))
            errors = 1.0 + rng.uniform(-1e-3, 1e-3, listed)
            cats = categories(
                tuple(
                    (int(i), float(true[i] * errors[k]))
                    for k, i in enumerate(np.argsort(-true)[:listed])
                )
            )
            true_cats = np.append(true[list(cats.ids)], true.sum() - true[list(cats.ids)].sum())
            history = list(rng.integers(0, cats.probs.size, size=int(rng.integers(0, 12))))
            for name, log_e in (("tempered", tempered_log_e), ("prefix_law", prefix_law_log_e)):
                before = log_e(_one_prefix_tokens(cats, history))
                mean = sum(
                    true_cats[c] * math.exp(log_e(_one_prefix_tokens(cats, history + [c])) - before)
                    for c in range(cats.probs.size)
                )
                expect(
                    mean <= 1.0 + 1e-12,
                    f"case {case}: {name}: the next factor's mean is {mean:.15f} > 1",
                )
                worst, checked = max(worst, mean), checked + 1
        return (
            checked,
            f"{checked} (law, history, bettor) triples; largest mean factor {worst:.12f} (<= 1)",
        )

    return run_guarded("reference_bettors_supermartingale", body)
