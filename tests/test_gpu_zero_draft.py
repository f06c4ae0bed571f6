"""A draft source may propose nothing: the round is then one plain decoding step (still exact)."""

from __future__ import annotations

import torch

from exactspec.gpu_impl import SpeculativeGenerator, generate_plain
from exactspec.gpu_impl.drafts import PromptLookupDraft
from exactspec.gpu_impl.loop.stats import SpecStats, examined_and_accepted
from tests.tiny_models import scaled_llama
from exactspec.reference.warping import SamplingParams


def test_prompt_lookup_without_a_match_proposes_nothing():
    draft = PromptLookupDraft()
    draft.reset(torch.tensor([[1, 2, 3, 4]]), None, vocab_size=16)
    tokens, probs = draft.propose(4, SamplingParams(), None)
    assert tokens.shape == (1, 0) and probs.shape == (1, 0, 16)
    draft.reset(torch.tensor([[1, 2, 3, 1]]), None, vocab_size=16)
    tokens, _ = draft.propose(4, SamplingParams(), None)
    assert tokens.tolist() == [[2, 3, 1]]


def test_plain_steps_keep_greedy_output_and_sampled_seeds_identical():
    torch.manual_seed(0)
    target = scaled_llama(seed=1, scale=4.0)
    prompt = torch.arange(1, 9)[None]  # all distinct: the first round has no match
    for sampling in (SamplingParams(temperature=0), SamplingParams(temperature=1.0)):
        spec = SpeculativeGenerator(target, PromptLookupDraft(), k=3, sampling=sampling).generate(
            prompt, 12, seed=5
        )
        assert spec.stats.rounds >= 1
        if sampling.greedy:
            assert spec.sequences == generate_plain(target, prompt, 12, sampling=sampling).sequences
        assert len(spec.sequences[0]) == 12


def test_acceptance_rate_counts_examined_drafts_only():
    stats = SpecStats()
    stats.record_round(4, [0, 4])  # row 0 rejects the first draft: drafts 2..4 never examined
    stats.finish()
    assert stats.acceptance_rate == 4 / 5
    assert stats.acceptance_rate_per_position == [0.5, 1.0, 1.0, 1.0]


def test_examined_and_accepted_is_the_one_counter_and_pooling_adds_runs():
    assert examined_and_accepted(3, [0, 3, 1]) == ([3, 2, 1], [2, 1, 1])
    first, second = SpecStats(), SpecStats()
    first.record_round(2, [0, 2])
    second.record_round(4, [4])
    second.target_time_s = 1.5
    pooled = SpecStats.pooled([first, second])
    assert pooled.reached_per_position == [3, 2, 1, 1] and pooled.accepted_per_position == [
        2,
        2,
        1,
        1,
    ]
    assert pooled.acceptance_rate == 6 / 7 and pooled.proposed == 8 and pooled.rounds == 2
    assert (
        pooled.acceptance_rate_per_position == [2 / 3, 1.0, 1.0, 1.0]
        and pooled.target_time_s == 1.5
    )


def test_per_row_acceptance_adds_up_to_the_batch():
    """Row 2 stops after round 1 (its index, not its place among the live rows, keys its counts)."""
    stats = SpecStats()
    stats.record_round(3, [0, 3, 1], rows=[0, 1, 2])
    stats.record_round(2, [2, 1], rows=[0, 1])
    assert stats.row_acceptance(0) == {
        "drafts_proposed": 5,
        "drafts_examined": 3,
        "drafts_accepted": 2,
        "acceptance_rate": 2 / 3,
        "acceptance_rate_per_position": [0.5, 1.0, 0.0],
    }
    assert (
        stats.row_acceptance(2)["drafts_examined"] == 2
        and stats.row_acceptance(2)["drafts_accepted"] == 1
    )
    assert stats.row_acceptance(7)["drafts_proposed"] == 0
    assert sum(stats.row_acceptance(r)["drafts_accepted"] for r in range(3)) == stats.accepted
    assert "rows_reached" not in stats.to_dict()
