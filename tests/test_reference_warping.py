"""Warping semantics: order of operations, ties, greedy, and argument checks."""

from __future__ import annotations

import numpy as np
import pytest

from exactspec.reference import SamplingParams, greedy_probs, warp_probs


def logits_of(probs):
    return np.log(np.asarray(probs, dtype=float))


def test_temperature_one_is_softmax():
    probs = np.array([0.5, 0.3, 0.15, 0.05])
    np.testing.assert_allclose(warp_probs(logits_of(probs)), probs)


def test_temperature_sharpens_and_flattens():
    logits = logits_of([0.5, 0.3, 0.15, 0.05])
    cold, hot = warp_probs(logits, 0.5), warp_probs(logits, 2.0)
    assert cold[0] > 0.5 > hot[0]
    np.testing.assert_allclose(cold, np.array([0.25, 0.09, 0.0225, 0.0025]) / 0.365)


def test_top_k_keeps_ties_at_the_boundary():
    out = warp_probs(np.array([3.0, 1.0, 1.0, 0.0]), top_k=2)
    assert (out > 0).tolist() == [True, True, True, False]


def test_top_p_keeps_shortest_prefix_reaching_mass():
    logits = np.log([0.5, 0.25, 0.125, 0.125])  # exact binary fractions
    assert (warp_probs(logits, top_p=0.75) > 0).tolist() == [True, True, False, False]
    assert (warp_probs(logits, top_p=0.76) > 0).tolist() == [True, True, True, False]
    assert (warp_probs(logits, top_p=0.1) > 0).tolist() == [True, False, False, False]


def test_min_p_relative_to_the_largest():
    logits = np.log([0.5, 0.25, 0.125, 0.125])
    assert (warp_probs(logits, min_p=0.5) > 0).tolist() == [True, True, False, False]


def test_order_of_operations_matters():
    """Temperature before top-p: a hot temperature flattens, so top-p keeps more tokens."""
    logits = np.log([0.6, 0.2, 0.1, 0.1])
    hot_then_top_p = warp_probs(logits, temperature=3.0, top_p=0.7)
    assert (hot_then_top_p > 0).sum() == 3
    assert (warp_probs(logits, temperature=1.0, top_p=0.7) > 0).sum() == 2


def test_greedy_tie_goes_to_lowest_id_and_ignores_filters():
    logits = np.array([[1.0, 3.0, 3.0], [0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(
        warp_probs(logits, temperature=0, top_k=1, top_p=0.5), [[0, 1, 0], [1, 0, 0]]
    )
    np.testing.assert_array_equal(greedy_probs(logits), [[0, 1, 0], [1, 0, 0]])


def test_masked_logits_stay_zero():
    out = warp_probs(np.array([0.0, -np.inf, 1.0]), temperature=0.7, top_p=0.99)
    assert out[1] == 0 and out.sum() == pytest.approx(1.0)


def test_sampling_params_record():
    params = SamplingParams(temperature=0.7, top_k=20, top_p=0.9, min_p=0.05)
    assert not params.greedy and SamplingParams(temperature=0).greedy
    np.testing.assert_allclose(params.warp(np.zeros(4)), np.full(4, 0.25))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"temperature": -0.1}, "temperature must be >= 0"),
        ({"temperature": float("nan")}, "temperature must be a finite"),
        ({"top_k": 0}, "top_k must be None or an integer >= 1"),
        ({"top_p": 0.0}, "top_p must be in \\(0, 1\\]"),
        ({"top_p": 1.5}, "top_p must be in \\(0, 1\\]"),
        ({"min_p": -0.5}, "min_p must be in \\[0, 1\\]"),
    ],
)
def test_warping_rejects_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        warp_probs(np.zeros(3), **kwargs)
    with pytest.raises(ValueError, match=message):
        SamplingParams(**kwargs)


@pytest.mark.parametrize(
    "logits, message",
    [
        (np.array([0.0, np.nan]), "logits contains NaN"),
        (np.array([0.0, np.inf]), "logits contains \\+inf"),
        (np.array([-np.inf, -np.inf]), "every entry is -inf"),
        (np.zeros(0), "non-empty last"),
    ],
)
def test_warping_rejects_bad_logits(logits, message):
    with pytest.raises(ValueError, match=message):
        warp_probs(logits)
