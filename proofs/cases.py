"""The cases the checks enumerate: random rational rows from fixed seeds, the edge cases of one position,
prefix-dependent toy models, adaptive-k schedules and the warping mismatches of C9. All reproducible."""

from __future__ import annotations

import random
from fractions import Fraction
from functools import lru_cache
from typing import Sequence

import numpy as np

from .kernels import F0, KSchedule, ToyModel, argmax, exact_probs, one_hot, warped_probs

SEED = 20230718  # fixed: every random case is reproducible


def random_dist(
    rng: random.Random, vocab: int, denom: int = 12, p_zero: float = 0.3
) -> list[Fraction]:
    """A random rational distribution with some exact zeros."""
    while True:
        weights = [0 if rng.random() < p_zero else rng.randint(1, denom) for _ in range(vocab)]
        if sum(weights):
            total = sum(weights)
            return [Fraction(w, total) for w in weights]


def edge_pairs() -> list[tuple[str, list[Fraction], list[Fraction]]]:
    """(name, p, q) edge cases of one position, V = 4."""
    h, q4 = Fraction(1, 2), Fraction(1, 4)
    uniform = [q4] * 4
    skew = [Fraction(5, 10), Fraction(3, 10), Fraction(15, 100), Fraction(5, 100)]
    return [
        ("p == q", skew, list(skew)),
        ("p == q uniform", uniform, list(uniform)),
        ("q = 0 on part of supp p", [h, h, F0, F0], [F0, q4, Fraction(3, 4), F0]),
        ("disjoint supports (alpha = 0)", [h, h, F0, F0], [F0, F0, h, h]),
        ("p one-hot, q uniform", one_hot(4, 2), uniform),
        ("q one-hot inside supp p", skew, one_hot(4, 1)),
        ("q one-hot outside supp p", [h, h, F0, F0], one_hot(4, 3)),
        ("p uniform, q one-hot", uniform, one_hot(4, 0)),
        ("both one-hot, same", one_hot(4, 3), one_hot(4, 3)),
        ("p(x) == q(x) on one token", [h, q4, q4, F0], [h, F0, Fraction(1, 8), Fraction(3, 8)]),
    ]


def random_pairs(
    seed: int, count: int, vocabs: Sequence[int] = (2, 3, 4, 5, 6)
) -> list[tuple[str, list, list]]:
    """`count` random (name, p, q) pairs of one position from `seed`."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        vocab = rng.choice(list(vocabs))
        out.append((f"random #{i} (V={vocab})", random_dist(rng, vocab), random_dist(rng, vocab)))
    return out


def toy_model(
    seed: str, vocab: int, denom: int = 9, p_zero: float = 0.3, eos: int | None = None
) -> ToyModel:
    """A prefix-dependent rational model: each prefix gets its own row from a seeded generator."""

    @lru_cache(maxsize=None)
    def row(prefix: tuple) -> tuple:
        rng = random.Random(f"{seed}|{prefix}")
        dist = random_dist(rng, vocab, denom, p_zero)
        if eos is not None and rng.random() < 0.5:  # EOS with some mass, often
            dist = [v / 2 for v in dist]
            dist[eos] += Fraction(1, 2)
        return tuple(dist)

    return row


def greedy_model(model: ToyModel) -> ToyModel:
    """The deterministic model that puts all mass on `model`'s argmax."""
    return lambda prefix: tuple(one_hot(len(model(prefix)), argmax(model(prefix))))


def sequence_cases(seed: int) -> list[tuple[str, ToyModel, ToyModel, int, int, int]]:
    """(name, target, draft, vocab, length, k) for prefix-dependent toy models."""
    cases = []
    for i, (vocab, length, k) in enumerate(
        [(2, 5, 1), (2, 5, 2), (2, 5, 3), (3, 4, 1), (3, 4, 2), (3, 3, 3), (2, 4, 4)]
    ):
        target = toy_model(f"{seed}-t{i}", vocab)
        cases.append(
            (
                f"random V={vocab} L={length} k={k}",
                target,
                toy_model(f"{seed}-d{i}", vocab),
                vocab,
                length,
                k,
            )
        )
    t = toy_model(f"{seed}-edge", 3)
    cases.append(("draft == target", t, t, 3, 4, 2))
    cases.append(
        ("draft one-hot (deterministic)", t, greedy_model(toy_model(f"{seed}-g", 3)), 3, 4, 2)
    )
    cases.append(
        ("greedy target, random draft", greedy_model(t), toy_model(f"{seed}-d", 3), 3, 4, 2)
    )
    sparse_t, sparse_d = (
        toy_model(f"{seed}-st", 3, p_zero=0.5),
        toy_model(f"{seed}-sd", 3, p_zero=0.5),
    )
    cases.append(("sparse rows (zeros on both sides)", sparse_t, sparse_d, 3, 4, 3))
    return cases


def schedules(k_max: int) -> dict[str, KSchedule]:
    """k schedules that look only at the past, as adaptive implementations do (k = 0 is a plain step)."""
    return {
        "grow-shrink": lambda g, h: min(h[-1] + 1, k_max) if h else 1,
        "context": lambda g, h: (sum(g) + len(h)) % (k_max + 1),
        "acceptance-rate": lambda g, h: k_max if sum(h) * 2 >= len(h) else (len(g) % 2),
    }


def warping_cases() -> list[tuple[str, list, list, list, list]]:
    """(name, intended p, p in the ratio, q in the ratio, law the draft really samples from): C9's cases."""
    rng = np.random.default_rng(SEED + 7)
    target_logits = np.round(rng.normal(size=6) * 2, 2)
    draft_logits = np.round(target_logits + rng.normal(size=6), 2)
    temperature, top_k = 0.6, 3
    p_warped = exact_probs(warped_probs(target_logits, temperature, top_k))
    q_warped = exact_probs(warped_probs(draft_logits, temperature, top_k))
    p_raw = exact_probs(warped_probs(target_logits))
    q_raw = exact_probs(warped_probs(draft_logits))
    q_temp_only = exact_probs(warped_probs(draft_logits, temperature))
    return [
        ("consistent: p, q both warped (T=0.6, top-k=3)", p_warped, p_warped, q_warped, q_warped),
        ("draft samples warped q, ratio uses q at T=1", p_warped, p_warped, q_raw, q_warped),
        (
            "draft samples top-k q, ratio uses q without top-k",
            p_warped,
            p_warped,
            q_temp_only,
            q_warped,
        ),
        (
            "ratio uses the raw target p (T=1), intended warped p",
            p_warped,
            p_raw,
            q_warped,
            q_warped,
        ),
    ]
