"""k policies: the walltime-model chooser follows the acceptance rate and measured costs; k = 0 rounds keep drafts consistent."""

from __future__ import annotations

import pytest
import torch

from exactspec.gpu_impl import SpeculativeGenerator, generate_plain
from exactspec.gpu_impl.drafts import ModelDraft, PromptLookupDraft
from exactspec.gpu_impl.k_policy import CostModelK, Costs, next_k
from exactspec.reference.speedup import improvement_factor
from exactspec.reference.warping import SamplingParams
from tests.tiny_models import scaled_llama

pytestmark = pytest.mark.usefixtures("one_torch_thread")
GREEDY = SamplingParams(temperature=0)


def flat_costs(verify_per_token: float, draft: float) -> Costs:
    return Costs({n: 1.0 + verify_per_token * (n - 1) for n in range(1, 10)}, draft)


def test_chooser_maximises_the_walltime_model():
    chooser = CostModelK(flat_costs(0.1, 0.05), k_max=8)
    chooser.accepted, chooser.examined = [90.0] * 8, [100.0] * 8  # acceptance rate ~ 0.9 at every position
    best = chooser.choose()
    acceptance_rate = chooser.acceptance_rates[0]
    factors = [improvement_factor(acceptance_rate, k, 0.05, {k + 1: 1 + 0.1 * k}) for k in range(1, 9)]
    assert best == 1 + max(range(8), key=factors.__getitem__)
    assert chooser.factor(best) == pytest.approx(max(factors))


def test_chooser_drafts_nothing_when_verification_is_dear_and_acceptance_low():
    chooser = CostModelK(flat_costs(0.6, 0.3), k_max=8)
    chooser.accepted, chooser.examined = [5.0] * 8, [100.0] * 8
    assert chooser.choose() == 0


def test_per_position_acceptance_rates_see_a_copy_behind_a_doubtful_first_token():
    """First draft accepted 40 % of the time, the rest of the copy always: worth a long k, not k = 1."""
    chooser = CostModelK(flat_costs(0.15, 0.0), k_max=6)
    chooser.accepted, chooser.examined = [40.0] + [40.0] * 5, [100.0] + [40.0] * 5
    assert chooser.choose() == 6
    assert chooser.factor(1) < 1.3 < chooser.factor(6)


def test_acceptance_rate_drifts_back_to_the_prior_and_costs_follow_the_timers():
    chooser = CostModelK(flat_costs(0.6, 0.3), k_max=8, prior_acceptance_rate=0.5, prior_weight=1.0, decay=0.5)
    chooser.update(4, [1], target_s=5.0, draft_s=2.0)  # first draft accepted, second rejected
    assert chooser.acceptance_rates[:3] == pytest.approx([1.5 / 2, 0.5 / 2, 0.5])
    assert chooser.target[5] == pytest.approx(0.7 * (1 + 0.6 * 4) + 0.3 * 5.0)
    assert chooser.draft == pytest.approx(0.7 * 0.3 + 0.3 * 2.0 / 4)
    for _ in range(30):
        chooser.update(0, [0], target_s=1.0, draft_s=0.0)  # plain steps examine nothing
    assert chooser.acceptance_rates == pytest.approx([0.5] * 8, abs=1e-6)


def test_grow_shrink():
    assert next_k(3, [3, 3], 6) == 4 and next_k(6, [6], 6) == 6
    assert next_k(4, [1, 0], 8) == 3 and next_k(1, [0], 8) == 1
    assert next_k(4, [2, 4], 8) == 4


@pytest.fixture(scope="module")
def pair():
    return scaled_llama(0, layers=3, scale=20), scaled_llama(1, layers=1, scale=20)


@pytest.mark.parametrize("source", ["model", "prompt_lookup"])
def test_cost_policy_keeps_greedy_output_and_measures_once(pair, source):
    target, draft_model = pair
    ids = torch.tensor([[5, 9, 2, 5, 9, 2, 5, 9]])
    draft = ModelDraft(draft_model) if source == "model" else PromptLookupDraft()
    gen = SpeculativeGenerator(target, draft, k=3, sampling=GREEDY, adaptive_k="cost")
    first = gen.generate(ids, 24)
    assert first.sequences == generate_plain(target, ids, 24, GREEDY).sequences
    assert first.stats.calibration_time_s > 0 and set(gen.costs[1].target) == set(range(1, 8))
    again = gen.generate(ids, 24)
    assert again.stats.calibration_time_s == 0 and again.sequences == first.sequences


def test_bad_policy_is_refused(pair):
    with pytest.raises(ValueError, match="adaptive_k must be"):
        SpeculativeGenerator(pair[0], PromptLookupDraft(), adaptive_k="sometimes")


@torch.inference_mode()
def test_model_draft_catches_up_after_a_round_without_drafts(pair):
    """After a k = 0 round the draft feeds the pending tokens itself: its q equals a fresh draft's on the same context."""
    _, draft_model = pair
    sampling = SamplingParams(1.0)
    ids = torch.tensor([[4, 8, 15, 16, 23, 42], [1, 2, 3, 4, 5, 6]])
    draft = ModelDraft(draft_model)
    draft.reset(ids, None, 96)
    proposed, _ = draft.propose(3, sampling, torch.Generator().manual_seed(0))
    p = proposed.tolist()
    emitted = [p[0] + [7], [p[1][0], 9]]  # row 0 accepts all three and adds a bonus, row 1 accepts one
    tokens = torch.tensor([row + [-1] * (4 - len(row)) for row in emitted])
    draft.accept(tokens, torch.tensor([4, 2]), emitted)
    none, none_q = draft.propose(0, sampling, None)
    assert none.shape == (2, 0) and none_q.shape == (2, 0, 96)
    draft.accept(torch.tensor([[11], [12]]), torch.tensor([1, 1]), [[11], [12]])
    _, q = draft.propose(2, sampling, torch.Generator().manual_seed(1))
    for row in range(2):
        context = ids[row].tolist() + emitted[row] + [[11], [12]][row]
        fresh = ModelDraft(draft_model)
        fresh.reset(torch.tensor([context]), None, 96)
        _, fresh_q = fresh.propose(1, sampling, torch.Generator().manual_seed(2))
        torch.testing.assert_close(q[row, 0], fresh_q[0, 0], rtol=1e-4, atol=1e-5)
