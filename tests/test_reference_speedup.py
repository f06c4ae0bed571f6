"""Expected tokens, the law of N and the walltime model against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from exactspec.reference import (
    expected_tokens,
    expected_tokens_per_position,
    improvement_factor,
    optimal_k,
    tokens_law,
    tokens_law_per_position,
    tokens_mean_variance,
    tokens_variance,
    verification_cost,
)


def test_seed_article_expected_tokens():
    assert expected_tokens(0.70, 4) == pytest.approx(2.7731, abs=1e-4)
    assert expected_tokens(0.88, 4) == pytest.approx(3.9356, abs=1e-4)
    assert expected_tokens(1.0, 4) == 5.0
    assert expected_tokens(0.0, 4) == 1.0


@pytest.mark.parametrize("acceptance_rate", [0.0, 0.3, 0.7, 0.99, 1.0])
@pytest.mark.parametrize("k", [1, 2, 5, 8])
def test_law_mean_and_variance_agree_with_closed_forms(acceptance_rate, k):
    law = tokens_law(acceptance_rate, k)
    assert law.sum() == pytest.approx(1.0)
    assert law[-1] == pytest.approx(acceptance_rate**k)
    mean, variance = tokens_mean_variance(law)
    assert mean == pytest.approx(expected_tokens(acceptance_rate, k))
    assert tokens_variance(acceptance_rate, k) == pytest.approx(variance)
    n = np.arange(1, k + 2)
    assert variance == pytest.approx((n**2 * law).sum() - mean**2)


def test_per_position_law_hand_case():
    np.testing.assert_allclose(tokens_law_per_position([0.5, 0.8]), [0.5, 0.5 * 0.2, 0.4])
    assert expected_tokens_per_position([0.5, 0.8]) == pytest.approx(1 + 0.5 + 0.4)
    assert expected_tokens_per_position([0.7] * 4) == pytest.approx(expected_tokens(0.7, 4))


def test_expected_tokens_for_every_k_at_once():
    from exactspec.reference.speedup import expected_tokens_every_k

    rates = [0.4, 0.9, 0.8]
    every = expected_tokens_every_k(rates)
    assert every[0] == 1.0 and len(every) == 4
    np.testing.assert_allclose(
        every[1:], [expected_tokens_per_position(rates[:k]) for k in (1, 2, 3)]
    )
    from exactspec.reference.speedup import expected_tokens_every_k_unchecked

    # by hand: 1, 1 + 0.4, 1 + 0.4 + 0.4 * 0.9, 1 + 0.4 + 0.36 + 0.36 * 0.8 (the checked form calls this one)
    assert expected_tokens_every_k_unchecked(rates) == pytest.approx([1.0, 1.4, 1.76, 2.048])
    with pytest.raises(ValueError, match="acceptance_rates"):
        expected_tokens_every_k([0.5, float("nan")])


def test_improvement_factor_and_optimal_k():
    # Leviathan et al. Thm 3.8 form with v = 1.
    assert improvement_factor(0.8, 3, 0.05) == pytest.approx((1 - 0.8**4) / (0.2 * 1.15))
    k, factor = optimal_k(0.8, 0.05)
    assert factor == max(improvement_factor(0.8, j, 0.05) for j in range(1, 33))
    assert improvement_factor(0.8, k, 0.05) == factor
    # A measured verification cost lowers the factor and the best k.
    cpu_cost = {n: 1 + 0.29 * (n - 1) for n in range(2, 40)}
    k_cpu, factor_cpu = optimal_k(0.8, 0.05, cpu_cost)
    assert factor_cpu < factor and k_cpu <= k
    assert verification_cost(lambda n: 2.2, 5) == 2.2
    assert verification_cost([0, 1, 1.2, 1.3], 3) == 1.3


def test_no_speedup_when_draft_is_useless():
    k, factor = optimal_k(0.0, 0.5)
    assert k == 1 and factor < 1


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: expected_tokens(1.5, 4), "acceptance_rate must be in"),
        (lambda: expected_tokens(float("nan"), 4), "acceptance_rate must be in"),
        (lambda: expected_tokens(0.5, 0), "k must be >= 1"),
        (lambda: expected_tokens(0.5, 2.5), "k must be an integer"),
        (lambda: tokens_law_per_position([]), "acceptance_rates must be a non-empty"),
        (lambda: tokens_law_per_position([0.5, -0.1]), "acceptance_rates must all lie"),
        (lambda: improvement_factor(0.5, 2, -1.0), "c \\(draft cost"),
        (lambda: improvement_factor(0.5, 2, 0.1, {2: 1.0}), "verify_cost has no entry for 3"),
        (lambda: improvement_factor(0.5, 2, 0.1, lambda n: 0.0), "must be a positive number"),
        (lambda: optimal_k(0.5, 0.1, k_max=0), "k_max must be >= 1"),
    ],
)
def test_speedup_rejects_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
