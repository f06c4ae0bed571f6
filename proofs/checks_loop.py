"""Checks of C3, C4 and C5 (ARGUMENT.md): a round of k drafts plus the bonus follows the target position
by position, the whole loop (also with an adaptive k) has the target's sequence law, and stopping at max
tokens or EOS keeps it. The oracle's `reference/laws.py` and `reference/sequences.py` are under test."""

from __future__ import annotations

import random
from typing import Callable

from ..reference.laws import round_distribution
from ..reference.sequences import speculative_sequence_law, target_sequence_law

from .cases import SEED, edge_pairs, random_dist, schedules, sequence_cases, toy_model
from .kernels import (
    F0,
    Kernel,
    ancestral_law,
    fmt,
    kernel_sequence_law,
    nonzero,
    product_extension,
    product_law,
    standard_kernel,
    tv_law,
)
from .registry import CheckResult, check, expect, run_guarded


@check("C3")
def exact_round_chain(round_law: Callable | None = None, cases: int = 120) -> CheckResult:
    """Fraction enumeration, k = 1..3: the round, completed by draws from the unused target rows, has law prod p_i."""
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
            expect(sum(law.values(), F0) == 1, f"case {i}: round law does not sum to 1")
            extended = nonzero(product_extension(law, p_rows))
            expected = nonzero(product_law(p_rows))
            expect(
                extended == expected,
                f"case {i} (k={k}, V={vocab}): completed round law != prod p_i, "
                f"TV = {fmt(tv_law(extended, expected))}",
            )
            count += 1
        # the edge cases as whole rounds with k = 2 (same pair at both draft positions)
        for name, p, q in edges:
            p_rows, q_rows = [p, p, p], [q, q]
            extended = nonzero(product_extension(round_law(p_rows, q_rows), p_rows))
            expect(extended == nonzero(product_law(p_rows)), f"{name}: k=2 round law wrong")
            count += 1
        return count, f"{count} rounds (k = 1..3, V = 2..4, position-dependent rows, edge cases)"

    return run_guarded("exact_round_chain", body)


@check("C4", "C5")
def exact_sequence_law(
    speculative_law: Callable | None = None, target_law: Callable | None = None
) -> CheckResult:
    """Fraction enumeration: the whole loop (prefix-dependent p, q; max-token cut mid-round) has the target's sequence law."""
    speculative_law = speculative_law or speculative_sequence_law
    target_law = target_law or target_sequence_law

    def body():
        cases = sequence_cases(SEED + 4)
        for name, target, draft, vocab, length, k in cases:
            prompt = (0,)
            expected = nonzero(target_law(target, prompt, length))
            expect(
                expected == nonzero(ancestral_law(target, prompt, length)),
                f"{name}: target_sequence_law != ancestral law",
            )
            got = nonzero(speculative_law(target, draft, prompt, length, k))
            expect(
                got == expected,
                f"{name}: speculative law != target law, TV = {fmt(tv_law(got, expected))}",
            )
            mine = nonzero(kernel_sequence_law(standard_kernel, target, draft, prompt, length, k))
            expect(mine == expected, f"{name}: loop written from the argument != target law")
        return (
            len(cases),
            f"{len(cases)} prefix-dependent model pairs, lengths 3..5, k = 1..4 (oracle and independent loop)",
        )

    return run_guarded("exact_sequence_law", body)


@check("C4")
def exact_adaptive_k(kernel: Kernel = standard_kernel) -> CheckResult:
    """Fraction enumeration: a k chosen afresh each round from the past (outcomes, context; k = 0 allowed) keeps the law."""

    def body():
        count = 0
        for name, target, draft, vocab, length, k in sequence_cases(SEED + 9)[:6]:
            expected = nonzero(ancestral_law(target, (0,), length))
            for label, schedule in schedules(max(k, 2)).items():
                got = nonzero(kernel_sequence_law(kernel, target, draft, (0,), length, schedule))
                expect(
                    got == expected,
                    f"{name}, schedule {label}: law != target's, TV = {fmt(tv_law(got, expected))}",
                )
                count += 1
        return (
            count,
            f"{count} (model pair, schedule) cases: grow/shrink, context-driven and acceptance-driven k in 0..4",
        )

    return run_guarded("exact_adaptive_k", body)


@check("C5")
def exact_stopping(kernel: Kernel = standard_kernel) -> CheckResult:
    """Fraction enumeration: stopping at EOS (discarding the rest of the round) and at max tokens keeps the target's law."""

    def body():
        count = 0
        for i, (vocab, length, k) in enumerate(
            [(3, 4, 1), (3, 4, 2), (3, 4, 3), (2, 6, 2), (4, 3, 2)]
        ):
            eos = vocab - 1
            target = toy_model(f"eos-t{i}", vocab, eos=eos)
            draft = toy_model(f"eos-d{i}", vocab, eos=eos if i % 2 else None)
            expected = nonzero(ancestral_law(target, (), length, eos))
            got = nonzero(kernel_sequence_law(kernel, target, draft, (), length, k, eos))
            expect(
                got == expected,
                f"V={vocab} L={length} k={k}: EOS-stopped loop law != target's, TV = {fmt(tv_law(got, expected))}",
            )
            expect(
                any(s and s[-1] == eos and len(s) < length for s in expected),
                "case never stops at EOS early",
            )
            count += 1
        return count, f"{count} EOS + max-token cases, V = 2..4, k = 1..3"

    return run_guarded("exact_stopping", body)
