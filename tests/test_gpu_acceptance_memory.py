"""The cost policy's carried acceptance rates: a carry starts the run where the last one on the same prompt
ended, is dropped when the run contradicts it, and is kept per target, draft, sampling and prompt."""

from __future__ import annotations

import json
import statistics

import pytest
import torch

from exactspec.gpu_impl import SpeculativeGenerator, acceptance_memory, cost_calibration, generate_plain
from exactspec.gpu_impl.drafts import PromptLookupDraft
from exactspec.gpu_impl.k_policy import CostModelK, Costs
from exactspec.reference.warping import SamplingParams
from tests.test_gpu_k_policy import simulate
from tests.tiny_models import scaled_llama

pytestmark = pytest.mark.usefixtures("one_torch_thread")
GREEDY = SamplingParams(temperature=0)
#: A loaded CPU's v(n) (the shape measured on SmolLM2 under two busy cores) and a prompt-lookup copy: the first
#: draft is doubtful, the rest of the copy is accepted.
V = {1: 1, 2: 1.1, 3: 1.2, 4: 1.6, 5: 1.7, 6: 1.8, 7: 1.9, 8: 2.0, 9: 2.1}
COPY = [0.43] + [0.95] * 7
CHAT = [0.1] * 8


def costs() -> Costs:
    return Costs(dict(V), 0.0, {n: 0.03 for n in V}, t1_s=0.05)


def carry_from(acceptance: list[float], seed: int) -> list[tuple[float, float]]:
    """What a 13-round run on `acceptance` leaves for the next call on the same prompt."""
    earlier = CostModelK(costs(), k_max=8, seed=1000 + seed)
    simulate(earlier, acceptance, V.__getitem__, 13, 1000 + seed)
    return [(rate, min(acceptance_memory.CARRY_WEIGHT, examined)) for rate, examined in earlier.learned_acceptance()]


def test_a_carry_from_the_same_prompt_removes_the_cold_start():
    """13 rounds (a short answer), 30 seeds: cold, the policy keeps < 0.9 of the best fixed k's throughput on a
    copy; starting from the last run's rates it keeps >= 0.95 (the carry is what closes the gap)."""
    fixed = max(statistics.mean(simulate(k, COPY, V.__getitem__, 13, s) for s in range(30)) for k in range(9))
    cold = statistics.mean(simulate(CostModelK(costs(), k_max=8, seed=s), COPY, V.__getitem__, 13, s) for s in range(30))
    carried = statistics.mean(simulate(CostModelK(costs(), k_max=8, seed=s, carried=carry_from(COPY, s)),
                                       COPY, V.__getitem__, 13, s) for s in range(30))
    assert cold < 0.9 * fixed and carried >= 0.95 * fixed, (cold / fixed, carried / fixed)


def test_a_contradicted_carry_is_dropped():
    """A copy's rates carried into rounds where every first draft is rejected: dropped within a few rounds,
    after which the rates are the cold ones (the prior and the run's own counts)."""
    chooser = CostModelK(costs(), k_max=8, carried=[(0.95, 4.0)] * 8)
    assert chooser.carry_state() == "used" and chooser.best_k() == 8
    for _ in range(4):
        chooser.update(chooser.choose(), [0], 0.05, 0.0)
    assert chooser.carry_state() == "dropped" and chooser.acceptance_rates[0] < 0.3
    assert "dropped (this run's rounds contradicted it)" in chooser.note()


def test_a_carry_the_run_agrees_with_is_kept():
    chooser = CostModelK(costs(), k_max=4, carried=[(0.5, 4.0)] * 4)
    for accepted in [1, 0, 2, 0, 1, 0, 4, 0]:
        chooser.update(4, [accepted], 0.08, 0.0)
    assert chooser.carry_state() == "used" and "started from the last run's acceptance" in chooser.note()


@pytest.mark.parametrize("carried, match", [([(1.2, 4.0)], r"carried\[0\]"), ([(0.5, 4.0), (0.5, -1.0)], r"carried\[1\]"),
                                            ([(float("nan"), 1.0)], r"carried\[0\]")])
def test_bad_carries_are_refused(carried, match):
    with pytest.raises(ValueError, match=match):
        CostModelK(costs(), k_max=4, carried=carried)


def test_memory_round_trip_key_and_bound(tmp_path, monkeypatch):
    monkeypatch.setenv("EXACTSPEC_CACHE", str(tmp_path))
    monkeypatch.setattr(acceptance_memory, "MAX_PROMPTS", 3)
    key = {"version": 1, "target": "t", "draft": "d", "sampling": {"temperature": 0.0}}
    other = {**key, "draft": "e"}
    acceptance_memory.save_carry(key, "p0", [(0.5, 2), (1.0, 9), (0.0, 0)])
    assert acceptance_memory.load_carry(key, "p0") == [(0.5, 2.0), (1.0, 4.0), (0.0, 0.0)]
    assert acceptance_memory.load_carry(key, "p1") is None and acceptance_memory.load_carry(other, "p0") is None
    for name in ["p1", "p2", "p3"]:
        acceptance_memory.save_carry(key, name, [(0.5, 1)])
    assert acceptance_memory.load_carry(key, "p0") is None and acceptance_memory.load_carry(key, "p3") is not None
    acceptance_memory.memory_file(key).write_text("{not json")
    assert acceptance_memory.load_carry(key, "p3") is None  # unreadable: a cold start, never an error
    acceptance_memory.memory_file(key).write_text(json.dumps({"key": key, "prompts": {"p3": {"rates": "x"}}}))
    assert acceptance_memory.load_carry(key, "p3") is None


def test_prompt_digest_ignores_padding_only():
    ids = torch.tensor([[0, 0, 5, 6], [1, 2, 3, 4]])
    valid = torch.tensor([[False, False, True, True], [True] * 4])
    assert acceptance_memory.prompt_digest(ids, valid) == acceptance_memory.prompt_digest(
        torch.tensor([[9, 9, 5, 6], [1, 2, 3, 4]]), valid)
    assert acceptance_memory.prompt_digest(ids, valid) != acceptance_memory.prompt_digest(ids, None)


def test_generator_carries_per_prompt_draft_and_sampling(tmp_path, monkeypatch):
    """The second call on a prompt starts from the first's rates; another prompt, draft setting or sampling,
    `carry_acceptance=False` or a forgotten prompt start cold; the output stays the target's (greedy: plain
    decoding's tokens)."""
    monkeypatch.setenv("EXACTSPEC_CACHE", str(tmp_path))
    monkeypatch.setattr(cost_calibration, "busy_cores_now", lambda: 0)
    target = scaled_llama(0, layers=2, scale=20)
    ids, other = torch.tensor([[5, 9, 2, 5, 9, 2, 5, 9]]), torch.tensor([[5, 9, 2, 5, 9, 2, 5, 7]])

    def run(prompt, draft=None, sampling=GREEDY, carry=True):
        gen = SpeculativeGenerator(target, draft or PromptLookupDraft(), k=3, sampling=sampling, adaptive_k="cost",
                                   carry_acceptance=carry)
        return gen.generate(prompt, 24)

    first = run(ids)
    assert first.stats.policy_summary["acceptance_carried"] == "none"
    again = run(ids)
    assert again.stats.policy_summary["acceptance_carried"] in ("used", "dropped")
    assert again.sequences == first.sequences == generate_plain(target, ids, 24, GREEDY).sequences
    assert run(other).stats.policy_summary["acceptance_carried"] == "none"
    assert run(ids, PromptLookupDraft(ngram_max=2)).stats.policy_summary["acceptance_carried"] == "none"
    assert run(ids, sampling=SamplingParams(0.7)).stats.policy_summary["acceptance_carried"] == "none"
    assert run(ids, carry=False).stats.policy_summary["acceptance_carried"] == "none"
    key = acceptance_memory.memory_key(target, PromptLookupDraft(), GREEDY)
    acceptance_memory.forget_carry(key, acceptance_memory.prompt_digest(ids, None))
    assert run(ids).stats.policy_summary["acceptance_carried"] == "none"
