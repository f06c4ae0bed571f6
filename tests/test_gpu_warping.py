"""exactspec.gpu_impl.sampling.warping must equal reference.warping (same kept sets, float32-close values)."""

import itertools

import numpy as np
import pytest
import torch

from exactspec.gpu_impl.sampling.warping import warp_probs
from exactspec.reference.warping import warp_probs as oracle_warp

GRID = list(
    itertools.product(
        [0.0, 0.5, 1.0, 1.7], [None, 1, 3, 17, 40], [1.0, 0.95, 0.5, 0.05], [0.0, 0.02, 0.3]
    )
)


@pytest.mark.parametrize("temperature,top_k,top_p,min_p", GRID)
def test_matches_oracle_on_random_logits(temperature, top_k, top_p, min_p):
    rng = np.random.default_rng(hash((temperature, top_k, top_p, min_p)) % 2**32)
    logits = rng.normal(scale=3.0, size=(3, 4, 40)).astype(np.float32)
    expected = oracle_warp(logits, temperature, top_k, top_p, min_p)
    got = warp_probs(torch.from_numpy(logits), temperature, top_k, top_p, min_p)
    assert got.dtype == torch.float32 and got.shape == logits.shape
    np.testing.assert_array_equal(got.numpy() > 0, expected > 0)
    np.testing.assert_allclose(got.numpy(), expected, atol=2e-7, rtol=1e-5)


@pytest.mark.parametrize(
    "top_k,top_p,min_p",
    [(2, 1.0, 0.0), (None, 0.5, 0.0), (None, 1.0, 0.5), (1, 1.0, 0.0), (3, 0.7, 0.2)],
)
def test_ties_follow_oracle(top_k, top_p, min_p):
    rng = np.random.default_rng(1)
    logits = rng.integers(0, 4, size=(50, 12)).astype(np.float32)  # many exact ties
    expected = oracle_warp(logits, 1.0, top_k, top_p, min_p)
    got = warp_probs(torch.from_numpy(logits), 1.0, top_k, top_p, min_p).numpy()
    np.testing.assert_array_equal(got > 0, expected > 0)
    np.testing.assert_allclose(got, expected, atol=2e-7, rtol=1e-5)


def test_greedy_ties_go_to_lowest_id():
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0], [5.0, 5.0, 5.0, 5.0]])
    assert warp_probs(logits, 0.0).argmax(-1).tolist() == [1, 0]
    assert warp_probs(logits, 0.0).sum(-1).tolist() == [1.0, 1.0]


def test_large_vocab_and_bf16_logits():
    logits = torch.randn(2, 32000, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    got = warp_probs(logits, 0.8, 50, 0.9, 0.01)
    expected = oracle_warp(logits.float().numpy(), 0.8, 50, 0.9, 0.01)
    np.testing.assert_array_equal(got.numpy() > 0, expected > 0)


@pytest.mark.parametrize(
    "kwargs", [{"temperature": -1}, {"top_k": 0}, {"top_p": 0.0}, {"top_p": 1.5}, {"min_p": -0.1}]
)
def test_bad_parameters_raise(kwargs):
    with pytest.raises(ValueError):
        warp_probs(torch.zeros(1, 4), **kwargs)
