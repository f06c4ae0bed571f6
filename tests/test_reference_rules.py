"""The sampled rules: invariants, determinism and agreement with the exact law."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from scipy import stats

from exactspec.reference import (
    round_distribution,
    verify,
    verify_batch,
    verify_greedy,
    verify_sampler_match,
)
from exactspec.reference.sampling import inverse_cdf, sample_token
from tests.reference_strategies import draw_drafts, round_pairs


@settings(max_examples=120, deadline=None)
@given(round_pairs(max_vocab=12, max_k=8))
def test_verify_invariants(pair):
    target, draft = pair
    k = draft.shape[0]
    rng = np.random.default_rng(0)
    for _ in range(20):
        drafts = draw_drafts(rng, draft)
        emitted = verify(target, draft, drafts, rng)
        assert 1 <= len(emitted) <= k + 1
        assert emitted[:-1] == drafts[: len(emitted) - 1].tolist()
        assert target[len(emitted) - 1, emitted[-1]] > 0
        assert all(target[i, t] > 0 for i, t in enumerate(emitted))


@settings(max_examples=15, deadline=None)
@given(round_pairs(large_vocab=True, max_k=4))
def test_verify_batch_never_emits_zero_probability_tokens_large_vocab(pair):
    target, draft = pair
    batch = 64
    rng = np.random.default_rng(1)
    p = np.broadcast_to(target, (batch, *target.shape))
    q = np.broadcast_to(draft, (batch, *draft.shape))
    tokens, counts = verify_batch(p, q, draw_drafts(rng, q), rng)
    for row, count in zip(tokens, counts):
        assert (row[count:] == -1).all()
        assert all(target[i, t] > 0 for i, t in enumerate(row[:count]))


def test_verify_is_deterministic_for_a_seed():
    target = np.array([[0.5, 0.5]] * 3)
    draft = np.array([[0.9, 0.1]] * 2)
    runs = [verify(target, draft, [0, 0], np.random.default_rng(7)) for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]


def test_verify_matches_verify_batch_row():
    rng = np.random.default_rng(5)
    target = rng.dirichlet(np.ones(5), size=4)
    draft = rng.dirichlet(np.ones(5), size=3)
    drafts = draw_drafts(rng, draft)
    single = verify(target, draft, drafts, np.random.default_rng(11))
    tokens, counts = verify_batch(
        target[None], draft[None], drafts[None], np.random.default_rng(11)
    )
    assert single == tokens[0, : counts[0]].tolist()


def _empirical_vs_exact(rule, target, draft, n=30_000, seed=0):
    """Pearson chi-square of sampled emitted tuples against the exact standard-rule law."""
    rng = np.random.default_rng(seed)
    law = round_distribution(target, draft)
    keys = sorted(law)
    index = {key: i for i, key in enumerate(keys)}
    observed = np.zeros(len(keys))
    for _ in range(n):
        emitted = tuple(rule(target, draft, draw_drafts(rng, draft), rng))
        observed[index[emitted]] += 1  # KeyError = an impossible tuple
    expected = np.array([law[key] for key in keys]) * n
    return stats.chisquare(observed, expected).pvalue


def test_verify_sampled_tuples_follow_the_exact_law():
    """alpha = 1e-4 per test (fixed seed): a correct rule fails with probability 1e-4."""
    target = np.array([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4]])
    draft = np.array([[0.2, 0.5, 0.3], [0.4, 0.4, 0.2]])
    assert _empirical_vs_exact(verify, target, draft) > 1e-4


def test_shared_uniform_bug_is_detected_by_the_tuple_law():
    """Power check of the helper above: reusing one uniform for every position is rejected."""

    def shared_coin(target, draft, drafts, rng):
        u = rng.random()
        out = []
        for i, x in enumerate(drafts):
            if u < target[i, x] / draft[i, x]:
                out.append(int(x))
                continue
            res = np.maximum(target[i] - draft[i], 0)
            return out + [int(rng.choice(len(res), p=res / res.sum()))]
        return out + [int(rng.choice(target.shape[1], p=target[-1]))]

    target = np.array([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4]])
    draft = np.array([[0.2, 0.5, 0.3], [0.4, 0.4, 0.2]])
    assert _empirical_vs_exact(shared_coin, target, draft) < 1e-6


def test_sampler_match_first_token_is_p_and_accepts_less():
    target = np.array([[0.5, 0.3, 0.2]] * 2)
    draft = np.array([[0.5, 0.3, 0.2]])
    rng = np.random.default_rng(2)
    firsts, accepted = np.zeros(3), 0
    n = 20_000
    for _ in range(n):
        emitted = verify_sampler_match(target, draft, draw_drafts(rng, draft), rng)
        firsts[emitted[0]] += 1
        accepted += len(emitted) == 2
    assert stats.chisquare(firsts, target[0] * n).pvalue > 1e-4
    # Acceptance is sum p q = 0.38 here, far below the standard rule's 1.0.
    assert abs(accepted / n - 0.38) < 5 * np.sqrt(0.38 * 0.62 / n)


def test_greedy_rule():
    target = np.array([[0.1, 0.9], [0.6, 0.4], [0.5, 0.5]])
    draft = np.array([[0.0, 1.0], [0.0, 1.0]])
    assert verify_greedy(target, draft, [1, 1]) == [1, 0]
    assert verify_greedy(target, draft, [1, 0]) == [1, 0, 0]  # tie in the bonus row -> lowest id


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"target_probs": np.full((2, 3), 0.5)}, "target_probs rows must sum to 1"),
        ({"draft_probs": np.array([[np.nan, 0.5, 0.5]])}, "draft_probs contains NaN"),
        ({"draft_probs": np.array([[-0.1, 0.6, 0.5]])}, "draft_probs contains a negative"),
        ({"target_probs": np.full((3, 3), 1 / 3)}, r"target_probs must hold k\+1 = 2 rows"),
        ({"draft_probs": np.full((1, 4), 0.25)}, "mismatched vocabularies"),
        ({"draft_tokens": [3]}, "draft_tokens holds a token id outside"),
        ({"draft_tokens": [0, 1]}, "draft_tokens must have shape"),
        ({"draft_tokens": [0.5]}, "draft_tokens must hold integer"),
        ({"draft_probs": np.zeros((0, 3))}, "draft_probs must hold k >= 1 rows"),
        (
            {"draft_probs": np.array([[0.0, 0.5, 0.5]]), "draft_tokens": [0]},
            "has draft probability 0",
        ),
        ({"rng": 3}, "rng must be a numpy.random.Generator"),
        ({"target_probs": np.full(3, 1 / 3)}, "target_probs must have 2 dimensions"),
    ],
)
def test_verify_rejects_bad_input(kwargs, message):
    args = {
        "target_probs": np.full((2, 3), 1 / 3),
        "draft_probs": np.full((1, 3), 1 / 3),
        "draft_tokens": [1],
        "rng": np.random.default_rng(0),
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        verify(**args)


def test_verify_batch_rejects_mismatched_batches():
    with pytest.raises(ValueError, match="different batch sizes"):
        verify_batch(
            np.full((2, 2, 3), 1 / 3),
            np.full((3, 1, 3), 1 / 3),
            np.zeros((3, 1), int),
            np.random.default_rng(0),
        )


def test_inverse_cdf_never_returns_a_zero_probability_token():
    tenths = np.array([0.1] * 10 + [0.0, 0.0])  # float cumsum ends at 0.9999999999999999, below 1
    top = np.nextafter(1.0, 0.0)
    assert inverse_cdf(tenths, np.array([0.0, 0.55, top])).tolist() == [0, 5, 9]
    rows = np.stack([tenths, np.array([0.0, 0.5] + [0.0] * 9 + [0.5])])
    assert inverse_cdf(rows, np.array([top, 0.0])).tolist() == [9, 1]
    assert sample_token(np.array([0.0, 1.0, 0.0]), np.random.default_rng(0)) == 1


def test_inverse_cdf_follows_the_row_and_rejects_bad_input():
    probs = np.array([0.2, 0.0, 0.5, 0.3])
    drawn = inverse_cdf(probs, np.random.default_rng(1).random(40_000))
    assert (
        stats.chisquare(
            np.bincount(drawn, minlength=4)[[0, 2, 3]], 40_000 * probs[[0, 2, 3]]
        ).pvalue
        > 1e-4
    )
    assert np.bincount(drawn, minlength=4)[1] == 0
    with pytest.raises(ValueError, match="uniforms must have shape"):
        inverse_cdf(np.full((2, 3), 1 / 3), np.zeros(3))
    with pytest.raises(ValueError, match="no positive probability"):
        inverse_cdf(np.zeros((1, 3)), np.zeros(1))
    with pytest.raises(ValueError, match="probs must have a non-empty vocabulary"):
        inverse_cdf(np.zeros(0), np.zeros(1))
