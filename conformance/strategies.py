"""Hypothesis strategies for speculative-verification rounds, exported for users:

    from hypothesis import given
    from exactspec.conformance.strategies import round_cases

    @given(round_cases())
    def test_my_rule(case): ...

A generated `Case` is built with NumPy from a few drawn integers (a seed, V, k, one "kind" per
position), so large vocabularies (V >= 32k) cost nothing to generate, and shrinking works on the
integers. Kinds are the edges that break implementations: one-hot rows, p == q, disjoint supports,
q(x) = 0 where p(x) > 0, p(x) = 0 where q(x) > 0, probabilities near 1e-12, rows that differ across
positions, spiky/flat random rows.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from exactspec.conformance.cases import Case

ROW_KINDS = ("random", "one_hot_p", "one_hot_q", "equal", "disjoint", "q_zero_p_pos", "p_zero_q_pos", "tiny",
             "spiky")
SMALL_VOCABS = (2, 3, 4, 5, 8, 16, 64)
LARGE_VOCABS = (32768, 50257)


def _norm(x):
    x = np.asarray(x, dtype=np.float64)
    return x / x.sum()


def _random_row(rng, V, conc=0.5):
    return _norm(rng.gamma(conc, size=V) + 1e-300)


def _pair(kind: str, V: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One (p_i, q_i) pair of the given kind."""
    if kind == "one_hot_p":
        p = np.zeros(V); p[rng.integers(V)] = 1.0
        return p, _random_row(rng, V)
    if kind == "one_hot_q":
        q = np.zeros(V); q[rng.integers(V)] = 1.0
        return _random_row(rng, V), q
    if kind == "equal":
        p = _random_row(rng, V)
        return p, p.copy()
    if kind == "disjoint" and V >= 2:
        mask = rng.random(V) < 0.5
        mask[0], mask[-1] = True, False
        return _norm(_random_row(rng, V) * mask), _norm(_random_row(rng, V) * ~mask)
    if kind in ("q_zero_p_pos", "p_zero_q_pos") and V >= 2:
        zero = rng.random(V) < 0.4
        zero[rng.integers(V)] = False
        a, b = _random_row(rng, V), _norm(_random_row(rng, V) * ~zero)
        return (a, b) if kind == "q_zero_p_pos" else (b, a)
    if kind == "tiny" and V >= 3:
        p, q = _random_row(rng, V, 1.0), _random_row(rng, V, 1.0)
        for row in (p, q):
            idx = rng.choice(V, size=max(1, V // 3), replace=False)
            row[idx] = 1e-12 * (1 + rng.random(idx.size))
            rest = np.setdiff1d(np.arange(V), idx)
            row[rest] *= (1 - row[idx].sum()) / row[rest].sum()
        return p, q
    if kind == "spiky":
        return _random_row(rng, V, 0.05), _random_row(rng, V, 0.05)
    return _random_row(rng, V, 1.0), _random_row(rng, V, 1.0)


def build_case(V: int, k: int, kinds: list[str], seed: int, same_rows: bool = False) -> Case:
    """Deterministic case from drawn parameters (also usable without Hypothesis)."""
    rng = np.random.default_rng(seed)
    ps, qs = [], []
    for i in range(k):
        if same_rows and i > 0:
            ps.append(ps[0]); qs.append(qs[0])
            continue
        p, q = _pair(kinds[i % len(kinds)], V, rng)
        ps.append(p); qs.append(q)
    bonus = ps[0] if same_rows else _pair(kinds[k % len(kinds)], V, rng)[0]
    ps.append(bonus)
    name = f"gen_V{V}_k{k}_{'-'.join(kinds[:k])}_s{seed}{'_same' if same_rows else ''}"
    return Case(name, np.stack(ps), np.stack(qs), "Hypothesis-generated edge case", ("generated",))


@st.composite
def round_cases(draw, vocab_sizes=None, k_max: int = 8, allow_large_vocab: bool = True) -> Case:
    """A `Case` (p rows, q rows) with k in 1..k_max, V small or large (>= 32k), edge-case rows."""
    vocabs = list(vocab_sizes or SMALL_VOCABS)
    if allow_large_vocab and vocab_sizes is None:
        V = draw(st.one_of(st.sampled_from(vocabs), st.sampled_from(LARGE_VOCABS)))
    else:
        V = draw(st.sampled_from(vocabs))
    k = draw(st.integers(1, k_max))
    kinds = draw(st.lists(st.sampled_from(ROW_KINDS), min_size=k + 1, max_size=k + 1))
    seed = draw(st.integers(0, 2**32 - 1))
    same = draw(st.booleans())
    return build_case(V, k, kinds, seed, same)


def statistical_cases(n: int = 4, seed: int = 7) -> list[Case]:
    """A small deterministic set of generated cases (fixed seeds), small enough for the tuple law."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        V = int(rng.choice([3, 4, 5]))
        k = int(rng.integers(1, 4))
        kinds = [str(rng.choice(ROW_KINDS)) for _ in range(k + 1)]
        out.append(build_case(V, k, kinds, int(rng.integers(2**31))))
    return out
