"""Properties of the exact round law, acceptance rate and residual."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings

from exactspec.reference import (
    acceptance_rate,
    emitted_count_law,
    expected_tokens_per_position,
    first_token_marginal,
    residual,
    round_distribution,
    tokens_law_per_position,
    tokens_mean_variance,
)
from tests.reference_strategies import rational_pairs, round_pairs


@settings(max_examples=150, deadline=None)
@given(round_pairs())
def test_round_law_first_token_is_p1_and_sums_to_one(pair):
    target, draft = pair
    law = round_distribution(target, draft)
    assert sum(law.values()) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(first_token_marginal(law, target.shape[1]), target[0], atol=1e-12)


@settings(max_examples=150, deadline=None)
@given(round_pairs())
def test_round_law_count_law_matches_per_position_formula(pair):
    target, draft = pair
    k = draft.shape[0]
    law = round_distribution(target, draft)
    alphas = acceptance_rate(target[:k], draft)
    counts = emitted_count_law(law, k)
    np.testing.assert_allclose(counts, tokens_law_per_position(alphas), atol=1e-12)
    mean, _ = tokens_mean_variance(counts)
    assert mean == pytest.approx(expected_tokens_per_position(alphas), abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(round_pairs())
def test_round_law_never_emits_zero_probability_tokens(pair):
    target, draft = pair
    for emitted in round_distribution(target, draft):
        *accepted, last = emitted
        for position, token in enumerate(accepted):
            assert target[position, token] > 0 and draft[position, token] > 0
        assert target[len(accepted), last] > 0


@settings(max_examples=100, deadline=None)
@given(rational_pairs())
def test_rational_mode_is_exact_and_agrees_with_float(pair):
    target, draft = pair
    law = round_distribution(target, draft)
    assert all(isinstance(v, Fraction) for v in law.values())
    assert sum(law.values()) == 1
    assert first_token_marginal(law, len(target[0])) == target[0]
    float_law = round_distribution(np.array(target, dtype=float), np.array(draft, dtype=float))
    assert set(float_law) <= set(law)
    for emitted, probability in law.items():
        assert float_law.get(emitted, 0.0) == pytest.approx(float(probability), abs=1e-12)


def test_round_law_hand_computed_case():
    half, one, zero = Fraction(1, 2), Fraction(1), Fraction(0)
    law = round_distribution([[half, half]] * 3, [[one, zero]] * 2)
    # Draft always proposes 0; accepted with probability 1/2, else the residual (1) is emitted.
    assert law == {
        (1,): half,
        (0, 1): Fraction(1, 4),
        (0, 0, 0): Fraction(1, 8),
        (0, 0, 1): Fraction(1, 8),
    }


def test_acceptance_rate_is_one_minus_total_variation():
    p = np.array([0.5, 0.3, 0.15, 0.05])
    q = np.full(4, 0.25)
    assert acceptance_rate(p, q) == pytest.approx(1 - 0.5 * np.abs(p - q).sum())
    assert acceptance_rate(p, 0.6 * p + 0.4 * q) == pytest.approx(0.88)
    assert acceptance_rate(p, p) == pytest.approx(1.0)
    assert acceptance_rate(
        [Fraction(1, 2), Fraction(1, 2)], [Fraction(1), Fraction(0)]
    ) == Fraction(1, 2)


def test_acceptance_rate_of_stacked_rows():
    p = np.array([[1.0, 0.0], [0.5, 0.5]])
    q = np.array([[0.0, 1.0], [0.5, 0.5]])
    np.testing.assert_allclose(acceptance_rate(p, q), [0.0, 1.0])


def test_residual_values_and_p_equals_q_fallback():
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.5, 0.3])
    np.testing.assert_allclose(residual(p, q), [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(residual(p, p), p)  # never sampled; defined as p
    assert residual([Fraction(1, 3), Fraction(2, 3)], [Fraction(1, 3), Fraction(2, 3)]) == [
        Fraction(1, 3),
        Fraction(2, 3),
    ]
    assert residual([Fraction(1), Fraction(0)], [Fraction(0), Fraction(1)]) == [
        Fraction(1),
        Fraction(0),
    ]


def test_large_vocabulary_round_law_k1():
    rng = np.random.default_rng(3)
    target = rng.dirichlet(np.ones(50_000), size=2)
    draft = rng.dirichlet(np.ones(50_000), size=1)
    counts = emitted_count_law(
        round_distribution(
            target[:, :200] / target[:, :200].sum(1, keepdims=True),
            draft[:, :200] / draft[:, :200].sum(1, keepdims=True),
        ),
        1,
    )
    assert sum(counts) == pytest.approx(1.0)
