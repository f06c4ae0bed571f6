"""Hypothesis strategies for speculative-verification rounds, exported for users:

    from hypothesis import given
    from exactspec.conformance.rule.strategies import round_cases

    @given(round_cases())
    def test_my_rule(case): ...

A generated `Case` is built with NumPy from a few drawn integers (a seed, V, k, one "kind" per
position), so large vocabularies (V >= 32k) cost nothing to generate, and shrinking works on the
integers. Kinds are the edges that break implementations: one-hot rows, p == q, disjoint supports,
q(x) = 0 where p(x) > 0, p(x) = 0 where q(x) > 0, probabilities near 1e-12, rows that differ across
positions, spiky/flat random rows. The row kinds themselves live in `cases.py` (recipe "generated"),
so case files can name them; this module imports `cases`, never the reverse.
"""

from __future__ import annotations

from hypothesis import strategies as st

from .cases import GENERATED_WHY, ROW_KINDS, Case, generated_cases, generated_name, generated_rows

SMALL_VOCABS = (2, 3, 4, 5, 8, 16, 64)
LARGE_VOCABS = (32768, 50257)

__all__ = [
    "ROW_KINDS",
    "SMALL_VOCABS",
    "LARGE_VOCABS",
    "build_case",
    "round_cases",
    "statistical_cases",
]


def build_case(V: int, k: int, kinds: list[str], seed: int, same_rows: bool = False) -> Case:
    """Deterministic case from drawn parameters (also usable without Hypothesis): the rows of recipe
    "generated" in `exactspec.conformance.rule.cases`."""
    return Case(
        generated_name(k, V, kinds, seed, same_rows),
        *generated_rows(k, V, kinds, seed, same_rows),
        GENERATED_WHY,
        ("generated",),
    )


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


#: The generated cases that join the statistical checks (defined in cases.py, re-exported here).
statistical_cases = generated_cases
