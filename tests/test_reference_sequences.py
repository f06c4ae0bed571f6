"""Whole-loop exactness on prefix-dependent toy models, computed exactly in rationals."""

from __future__ import annotations

from fractions import Fraction

import pytest

from exactspec.reference import speculative_sequence_law, target_sequence_law


def toy_target(prefix):
    last = prefix[-1] if prefix else 0
    rows = [
        [Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)],
        [Fraction(1, 10), Fraction(0), Fraction(9, 10)],
        [Fraction(1, 3), Fraction(1, 3), Fraction(1, 3)],
    ]
    return rows[(last + len(prefix)) % 3]


def toy_draft(prefix):
    return (
        [Fraction(1, 5), Fraction(3, 5), Fraction(1, 5)]
        if len(prefix) % 2
        else [Fraction(1), Fraction(0), Fraction(0)]
    )


@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("length", [1, 3, 5])
def test_speculative_loop_law_equals_target_law_exactly(k, length):
    assert speculative_sequence_law(toy_target, toy_draft, (1,), length, k) == target_sequence_law(
        toy_target, (1,), length
    )


def test_float_models_agree_with_rational():
    float_target = lambda prefix: [float(v) for v in toy_target(prefix)]  # noqa: E731
    float_draft = lambda prefix: [float(v) for v in toy_draft(prefix)]  # noqa: E731
    exact = target_sequence_law(toy_target, (), 4)
    approx = speculative_sequence_law(float_target, float_draft, (), 4, 3)
    assert set(approx) == set(exact)
    for seq, prob in exact.items():
        assert approx[seq] == pytest.approx(float(prob), abs=1e-12)


def test_wrong_loop_is_visible_to_the_exact_comparison():
    """A loop that (wrongly) conditions the draft-side rows on nothing differs from the target law."""

    def stale_target(prefix):  # target row not updated with the accepted draft tokens
        return toy_target(prefix[:1])

    law = speculative_sequence_law(stale_target, toy_draft, (1,), 3, 2)
    assert law != target_sequence_law(toy_target, (1,), 3)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: target_sequence_law(toy_target, (), 0), "length must be an integer >= 1"),
        (lambda: speculative_sequence_law(toy_target, toy_draft, (), 2, 0), "k must be >= 1"),
        (lambda: target_sequence_law(lambda p: [Fraction(1, 2)], (), 1), "must sum to 1"),
        (lambda: target_sequence_law(lambda p: [1.5, -0.5], (), 1), "negative or NaN"),
        (lambda: target_sequence_law("nope", (), 1), "target must be a callable"),
        (
            lambda: speculative_sequence_law(toy_target, lambda p: [Fraction(1, 2)] * 2, (), 2, 1),
            "mismatched vocabularies",
        ),
    ],
)
def test_sequence_laws_reject_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
