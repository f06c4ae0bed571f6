"""Checks of C15 and C16 (ARGUMENT.md): the engine level's sequential statistics and its coupling certificate, on
exactspec's own code (`stat_tests/sequential.py`, `stat_tests/coupling.py`, `conformance/engine/law_checks.py`).

C15: Fan's inequality on the grid the bounds use (`fan_inequality`); the drift factor's mean is <= 1 under every
law whose mean is within the slack, for any prediction (`drift_factor_supermartingale`); the near-zero bettors'
factor likewise (`near_zero_factor_mean`). C16: the coupling inequality on exact laws of seeded engines
(`coupling_inequality_exact`); the per-token bound e_t <= d_t + d_(t-1) on exact two-token laws
(`prefix_tv_triangle`); the spent false-pass rates and the certifying seed counts (`coupling_spending`); the
route reads no report, so teacher forcing may wait while a declared coupling holds
(`coupling_route_reads_no_report`)."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from dataclasses import replace
from fractions import Fraction

import numpy as np
from scipy import stats

from ..conformance.engine.law_checks import NEAR_ZERO_RATES
from ..conformance.engine.engine_level import certify_samples
from ..conformance.engine.samples import Completion, Header, PrefixProbs, SampleFile
from ..stat_tests import sequential  # psi read at the call: the tests break it to see a check fail
from ..stat_tests.coupling import min_num_samples_coupled_within, spent_rate
from ..stat_tests.sequential import LAMBDAS

from .cases import SEED, random_dist
from .kernels import F0, fmt, tv
from .registry import CheckResult, check, expect, run_guarded


@check("C15")
def fan_inequality(points: int = 4001) -> CheckResult:
    """exp(lam xi - psi(lam) xi^2) <= 1 + lam xi for every xi in [-1, 1] and every lam of the bounds' grid."""

    def body():
        xi = np.linspace(-1.0, 1.0, points)
        worst = -np.inf
        for lam in LAMBDAS:
            gap = np.exp(lam * xi - sequential.psi(lam) * xi**2) - (1.0 + lam * xi)
            worst = max(worst, float(gap.max()))
            expect(
                gap.max() <= 1e-12,
                f"lam {lam}: exp(lam xi - psi xi^2) exceeds 1 + lam xi by {gap.max():.3g}",
            )
        return (
            LAMBDAS.size * points,
            f"{LAMBDAS.size} lam x {points} xi; largest excess {worst:.3g} (<= 0)",
        )

    return run_guarded("fan_inequality", body)


@check("C15")
def drift_factor_supermartingale(cases: int = 2000) -> CheckResult:
    """For X in [-1/2, 1/2] with |E X| <= eta and any prediction in [-1/2, 1/2], every grid lam and both signs:
    E exp(lam (s X - eta) - psi(lam) (X - X_hat)^2) <= 1 (the drift e-process's factor; C15 (a))."""

    def body():
        rng, worst = np.random.default_rng(SEED + 15), -np.inf
        for case in range(cases):
            support = rng.uniform(-0.5, 0.5, int(rng.integers(2, 7)))
            weights = rng.dirichlet(np.ones(support.size))
            eta = float(rng.choice([0.0, 1e-3, 0.02]))
            mean = float(weights @ support)
            if abs(mean) > eta:  # move the law's mean inside [-eta, eta]
                support = np.clip(support - (mean - np.sign(mean) * eta * rng.uniform()), -0.5, 0.5)
                if abs(float(weights @ support)) > eta:
                    continue
            prediction = float(rng.uniform(-0.5, 0.5))
            for sign in (1.0, -1.0):
                x, pred = sign * support, sign * prediction
                factors = np.exp(
                    LAMBDAS[:, None] * (x[None, :] - eta)
                    - sequential.psi(LAMBDAS)[:, None] * (x - pred)[None, :] ** 2
                )
                means = factors @ weights
                worst = max(worst, float(means.max()))
                expect(
                    means.max() <= 1.0 + 1e-12,
                    f"case {case}: a factor's mean is {means.max():.15f} > 1",
                )
        return (
            cases,
            f"{cases} laws x 2 signs x {LAMBDAS.size} lam; largest mean factor {worst:.12f} (<= 1)",
        )

    return run_guarded("drift_factor_supermartingale", body)


@check("C15")
def near_zero_factor_mean(cases: int = 2000) -> CheckResult:
    """The near-zero bettors' factor 1 - r + r 1{hit} / b has mean <= 1 when P(hit) <= b, for every stake r."""

    def body():
        rng, worst = random.Random(SEED + 16), F0
        for case in range(cases):
            b = Fraction(rng.randint(1, 400), 10**6)
            hit = b * Fraction(rng.randint(0, 1000), 1000)
            for r in NEAR_ZERO_RATES:
                rate = Fraction(float(r))
                mean = Fraction((1 - hit) * (1 - rate) + hit * (1 - rate + rate / b))
                expect(mean <= 1, f"case {case}: stake {r}: mean factor {fmt(mean)} > 1")
                worst = max(worst, mean)
        return (
            cases,
            f"{cases} (b, P(hit)) pairs x {NEAR_ZERO_RATES.size} stakes; largest mean {fmt(worst)} (<= 1)",
        )

    return run_guarded("near_zero_factor_mean", body)


def _outputs(rng: random.Random, seeds: int, length: int, vocab: int) -> list[tuple[int, ...]]:
    return [tuple(rng.randrange(vocab) for _ in range(length)) for _ in range(seeds)]


@check("C16")
def coupling_inequality_exact(cases: int = 300) -> CheckResult:
    """Two engines as maps from a uniform seed to a completion: the TV of their output laws is at most the share of
    seeds at which they differ, and so is the TV of every prefix law (exact fractions)."""

    def body():
        rng, tightest = random.Random(SEED + 16), Fraction(1)
        for case in range(cases):
            seeds, length, vocab = rng.randint(2, 40), rng.randint(1, 4), rng.randint(2, 4)
            ref = _outputs(rng, seeds, length, vocab)
            cand = [
                r if rng.random() < 0.7 else out
                for r, out in zip(ref, _outputs(rng, seeds, length, vocab))
            ]
            mismatch = Fraction(sum(a != b for a, b in zip(ref, cand)), seeds)
            for t in range(1, length + 1):
                laws = [Counter(o[:t] for o in outs) for outs in (ref, cand)]
                keys = set(laws[0]) | set(laws[1])
                distance = (
                    sum((abs(Fraction(laws[0][k] - laws[1][k], seeds)) for k in keys), Fraction(0))
                    / 2
                )
                expect(
                    distance <= mismatch,
                    f"case {case}: prefix {t}: TV {fmt(distance)} > mismatch share {fmt(mismatch)}",
                )
                if mismatch:
                    tightest = min(tightest, (mismatch - distance) / mismatch)
        return (
            cases,
            f"{cases} engine pairs; every prefix law's TV <= the mismatch share (smallest slack {fmt(tightest)})",
        )

    return run_guarded("coupling_inequality_exact", body)


@check("C16")
def prefix_tv_triangle(cases: int = 300) -> CheckResult:
    """Two-token laws P, Q: E_Q[TV(Q(.|x1), P(.|x1))] <= TV(Q12, P12) + TV(Q1, P1) (exact fractions)."""

    def body():
        rng, checked = random.Random(SEED + 17), 0
        for case in range(cases):
            vocab = rng.randint(2, 4)
            first = [random_dist(rng, vocab, denom=12, p_zero=0.2) for _ in range(2)]
            nexts = [
                [random_dist(rng, vocab, denom=12, p_zero=0.2) for _ in range(vocab)]
                for _ in range(2)
            ]
            # 0: the reference P, 1: the candidate Q
            joint = [
                {
                    (a, b): first[m][a] * nexts[m][a][b]
                    for a, b in itertools.product(range(vocab), repeat=2)
                }
                for m in range(2)
            ]
            d1 = tv(first[0], first[1])
            d2 = sum(abs(joint[0][k] - joint[1][k]) for k in joint[0]) / 2
            e2 = sum((first[1][a] * tv(nexts[1][a], nexts[0][a]) for a in range(vocab)), F0)
            expect(
                e2 <= d2 + d1,
                f"case {case}: E_Q TV of the second token {fmt(e2)} > d2 + d1 = {fmt(d2 + d1)}",
            )
            checked += 1
        return checked, f"{checked} pairs of two-token laws: e_2 <= d_2 + d_1 on every one"

    return run_guarded("prefix_tv_triangle", body)


@check("C16")
def coupling_spending(max_mismatches: int = 6) -> CheckResult:
    """sum over k of beta_k <= beta; and at the seed count n_k that certifies with k mismatches, P(Bin(n_k, pi) <= k)
    <= beta_k for every pi at the target (so certifying when pi >= target has probability <= beta, at any look)."""

    def body():
        beta, checked = 1e-3, 0
        total = sum(spent_rate(beta, k) for k in range(100_000))
        expect(total <= beta, f"the spent rates sum to {total} > beta {beta}")
        for target in (0.0125, 0.025, 0.075):
            for k in range(max_mismatches + 1):
                # per-token TV = 2 x completion TV
                n = min_num_samples_coupled_within(2 * target, beta, k)
                expect(n is not None, f"target {target}, k {k}: no seed count certifies")
                tail = float(stats.binom.cdf(k, n, target))
                expect(
                    tail <= spent_rate(beta, k) * (1 + 1e-9),
                    f"target {target}, k {k}, n {n}: "
                    f"P(Bin <= k) = {tail:.3g} > beta_k = {spent_rate(beta, k):.3g}",
                )
                checked += 1
        return checked, (
            f"sum of beta_k = {total / beta:.6f} beta; {checked} (target, k) seed counts whose binomial tail "
            f"at the target is <= beta_k (largest n {min_num_samples_coupled_within(0.025, beta, max_mismatches)})"
        )

    return run_guarded("coupling_spending", body)


def _toy_files(rng: np.random.Generator, seeds: int, mismatch: float) -> tuple:
    """A toy reference and candidate (3 tokens, V = 5, random seeds): the candidate repeats the reference's tokens
    at a seed except with probability `mismatch`; both with every decode-time and teacher-forced report."""
    vocab, length, prompts = 5, 3, {"a": (1, 2), "b": (3,)}
    # next-token law by the last token (row vocab: none)
    law = rng.dirichlet(np.ones(vocab), size=(vocab + 1,))

    def row(tokens):
        return law[tokens[-1] if tokens else vocab]

    def report(tokens):
        return tuple(
            (int(i), float(row(tokens)[i])) for i in np.argsort(-row(tokens), kind="stable")
        )

    def draw(seed_rng):
        tokens: list[int] = []
        for _ in range(length):
            tokens.append(int(seed_rng.choice(vocab, p=row(tokens))))
        return tuple(tokens)

    def file(role, outs):
        spec = (
            {"type": "draft-model", "draft_sampling": "greedy", "expect_seed_coupled": True}
            if role == "candidate"
            else None
        )
        header = Header(
            role=role,
            engine={
                "name": "toy",
                "version": "1",
                "base_url": "http://127.0.0.1:1",
                "flags": [],
                "speculation": spec,
            },
            model={"name": "toy", "sha256": None},
            request_defaults={
                "temperature": 1.0,
                "top_k": 0,
                "top_p": 1.0,
                "min_p": 0.0,
                "max_tokens": length,
                "n_probs": vocab,
                "post_sampling_probs": True,
            },
            prompts=prompts,
            created="2026-12-06T00:00:00+00:00",
            exactspec_version="proofs",
            design={
                "seeds": {"kind": "random", "space": 2**32 - 1, "key": "c16d"},
                "concurrency": 1,
            },
        )
        done = [
            Completion(
                prompt_id=pid,
                seed=seed,
                tokens=tokens,
                finish_reason="length",
                probs_kind="post_sampling",
                top_probs=tuple(report(tokens[:t]) for t in range(length)),
                timings={"draft_n": 2 if role == "candidate" else 0, "draft_n_accepted": 1},
            )
            for pid, seed, tokens in outs
        ]
        return SampleFile(f"{role}.jsonl", header, done, [])

    ref_outs, cand_outs = [], []
    for pid in prompts:
        for seed in rng.choice(2**32 - 1, size=seeds, replace=False).tolist():
            ref_outs.append((pid, seed, draw(np.random.default_rng(seed))))
            cand_outs.append((pid, seed, draw(rng) if rng.random() < mismatch else ref_outs[-1][2]))
    prefixes = {(pid, tokens[:t]) for pid, _, tokens in ref_outs + cand_outs for t in range(length)}
    forced = [
        PrefixProbs(pid, prefix, report(prefix), "post_sampling")
        for pid, prefix in sorted(prefixes)
    ]
    reference, candidate = file("reference", ref_outs), file("candidate", cand_outs)
    return reference, candidate, forced


@check("C16")
def coupling_route_reads_no_report(cases: int = 6) -> CheckResult:
    """C16 (d): a prompt's coupling route (bound, seeds, mismatches) is the same with every teacher-forced report
    and with none, so forcing may wait while the coupling holds; without reports a held coupling certifies alone."""

    def routes(result):
        return {
            pid: [r for r in entry.get("routes", []) if r["route"] == "coupling"]
            for pid, entry in result.extra["engine"]["ruled_out"]["per_prompt"].items()
        }

    def body():
        rng, certified = np.random.default_rng(SEED + 18), 0
        for case in range(cases):
            mismatch = (0.0, 0.0, 0.05, 0.3)[case % 4]
            reference, candidate, forced = _toy_files(rng, 160, mismatch)
            full = certify_samples(replace(reference, prefix_probs=forced), candidate, "quick")
            bare = certify_samples(reference, candidate, "quick")
            expect(
                routes(full) == routes(bare) and all(routes(bare).values()),
                f"case {case}: the coupling routes differ with and without reports: {routes(full)} / {routes(bare)}",
            )
            if not mismatch:
                expect(
                    bare.verdict == full.verdict == "CERTIFIED",
                    f"case {case}: a held coupling without reports "
                    f"gave {bare.verdict} ({bare.reasons[:2]})",
                )
                certified += 1
            elif any(r["mismatches"] for rs in routes(bare).values() for r in rs):
                expect(
                    bare.verdict == "INCONCLUSIVE"
                    and any("did not run" in r for r in bare.reasons),
                    f"case {case}: a disproved coupling without reports gave {bare.verdict}",
                )
        return cases, (
            f"{cases} toy engine pairs (160 random seeds a prompt, 0-30 % mismatched): the coupling routes "
            f"equal with and without reports; {certified} held couplings CERTIFIED without any report"
        )

    return run_guarded("coupling_route_reads_no_report", body)


__all__ = [
    "coupling_inequality_exact",
    "coupling_route_reads_no_report",
    "coupling_spending",
    "drift_factor_supermartingale",
    "fan_inequality",
    "near_zero_factor_mean",
    "prefix_tv_triangle",
]
