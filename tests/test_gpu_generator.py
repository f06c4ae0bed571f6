"""Speculative generator on tiny random Llamas: greedy equivalence, batching, cuts, streaming, errors."""

import pytest
import torch

from exactspec.gpu_impl import SpeculativeGenerator, generate_plain
from exactspec.gpu_impl.drafts import (
    EarlyExitDraft,
    ModelDraft,
    PromptLookupDraft,
    QuantizedSelfDraft,
)
from tests.tiny_models import scaled_llama
from exactspec.reference.warping import SamplingParams

GREEDY = SamplingParams(temperature=0)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def target():
    return scaled_llama(0, layers=3, scale=20)  # sharp logits: no near-ties in greedy argmaxes


@pytest.fixture(scope="module")
def draft_model():
    return scaled_llama(1, layers=1, scale=20)


def prompt(batch=1, length=8, seed=3):
    return torch.randint(0, 96, (batch, length), generator=torch.Generator().manual_seed(seed))


DRAFTS = {
    "model": lambda t, d: ModelDraft(d),
    "quantized": lambda t, d: QuantizedSelfDraft(t),  # "auto": ao dynamic on CPU
    "quantized_int8": lambda t, d: QuantizedSelfDraft(t, backend="int8"),
    "prompt_lookup": lambda t, d: PromptLookupDraft(),
    "early_exit": lambda t, d: EarlyExitDraft(t, 1),
}


@pytest.mark.parametrize("name", DRAFTS)
@pytest.mark.parametrize(
    "k,mode,adaptive", [(1, "standard", False), (4, "standard", True), (3, "greedy", False)]
)
def test_greedy_speculative_equals_greedy_plain(target, draft_model, name, k, mode, adaptive):
    ids = prompt()
    expected = generate_plain(target, ids, 30, GREEDY).sequences
    gen = SpeculativeGenerator(
        target,
        DRAFTS[name](target, draft_model),
        k=k,
        sampling=GREEDY,
        mode=mode,
        adaptive_k=adaptive,
    )
    assert gen.generate(ids, 30).sequences == expected


def test_plain_greedy_equals_transformers_generate(target):
    ids = prompt()
    ours = generate_plain(target, ids, 20, GREEDY).sequences[0]
    theirs = target.generate(ids, max_new_tokens=20, do_sample=False)[0, ids.shape[1] :].tolist()
    assert ours == theirs


@pytest.mark.parametrize("name", ["model", "prompt_lookup"])
def test_batched_left_padded_greedy_equals_each_row_alone(target, draft_model, name):
    ids = prompt(3, 9, seed=5)
    mask = torch.ones_like(ids)
    mask[0, :4] = 0
    mask[2, :7] = 0
    gen = SpeculativeGenerator(target, DRAFTS[name](target, draft_model), k=3, sampling=GREEDY)
    batched = gen.generate(ids, 25, attention_mask=mask).sequences
    plain = generate_plain(target, ids, 25, GREEDY, attention_mask=mask).sequences
    for b in range(3):
        alone = ids[b : b + 1, mask[b].bool()]
        assert batched[b] == plain[b] == generate_plain(target, alone, 25, GREEDY).sequences[0]


@pytest.mark.parametrize(
    "sampling", [SamplingParams(1.0), SamplingParams(0.8, top_k=20, top_p=0.9, min_p=0.02)]
)
def test_sampled_batch_row_equals_lone_run_with_its_seed(sampling):
    target, draft = scaled_llama(0, layers=2, scale=3), scaled_llama(1, layers=1, scale=3)
    ids = prompt(3, 7, seed=8)
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    gen = SpeculativeGenerator(target, ModelDraft(draft), k=3, sampling=sampling)
    batched = gen.generate(ids, 20, seed=[11, 12, 13], attention_mask=mask)
    assert batched.stats.accepted < batched.stats.proposed  # rejections really happened
    for b in range(3):
        alone = gen.generate(ids[b : b + 1, mask[b].bool()], 20, seed=11 + b).sequences[0]
        assert batched.sequences[b] == alone
    plain = generate_plain(
        target, ids, 20, sampling, seed=[11, 12, 13], attention_mask=mask
    ).sequences
    assert plain[1] == generate_plain(target, ids[1:2, 3:], 20, sampling, seed=12).sequences[0]


def test_seeded_runs_are_reproducible():
    target, draft = scaled_llama(0, scale=3), scaled_llama(1, scale=3)
    gen = SpeculativeGenerator(target, ModelDraft(draft), k=2, sampling=SamplingParams(1.0))
    a, b, c = (gen.generate(prompt(), 15, seed=s).sequences for s in (5, 5, 6))
    assert a == b and a != c


def test_eos_and_max_new_tokens_cuts_and_streaming(target, draft_model):
    ids = prompt()
    full = generate_plain(target, ids, 30, GREEDY).sequences[0]
    eos = full[9]
    cut = full[: full.index(eos) + 1]
    streamed = []
    gen = SpeculativeGenerator(target, ModelDraft(draft_model), k=4, sampling=GREEDY)
    res = gen.generate(ids, 30, eos_token_id=eos, on_tokens=lambda row, new: streamed.extend(new))
    assert res.sequences[0] == cut == streamed
    assert generate_plain(target, ids, 30, GREEDY, eos_token_id=eos).sequences[0] == cut
    assert (
        generate_plain(target, ids, 30, GREEDY, eos_token_id=[500, eos], check_every=3).sequences[0]
        == cut
    )
    assert gen.generate(ids, 30, eos_token_id=(eos, 501)).sequences[0] == cut
    assert gen.generate(ids, 7).sequences[0] == full[:7]
    assert gen.generate(ids, 0).sequences == [[]]


def test_stats_are_consistent(target, draft_model):
    gen = SpeculativeGenerator(target, EarlyExitDraft(target, 2), k=3, sampling=GREEDY)
    res = gen.generate(prompt(), 24)
    s = res.stats
    assert s.new_tokens == 24 and s.proposed == 3 * s.rounds and 0 <= s.accepted <= s.proposed
    assert len(s.acceptance_rate_per_position) == 3 and all(
        0 <= a <= 1 for a in s.acceptance_rate_per_position
    )
    assert s.tokens_per_target_call == pytest.approx((s.accepted + s.rounds) / s.rounds)
    assert s.wall_time_s >= s.target_time_s > 0 and s.draft_time_s > 0
    assert set(s.to_dict()) >= {
        "rounds",
        "proposed",
        "accepted",
        "acceptance_rate_per_position",
        "tokens_per_target_call",
    }


def test_mismatched_vocabularies_are_refused(target):
    with pytest.raises(ValueError, match="vocab"):
        SpeculativeGenerator(target, ModelDraft(scaled_llama(2, vocab=80)), k=2)

    class Tok:
        def __init__(self, vocab):
            self.vocab = vocab

        def get_vocab(self):
            return self.vocab

    with pytest.raises(ValueError, match="tokenizer"):
        SpeculativeGenerator(
            target,
            ModelDraft(scaled_llama(2), tokenizer=Tok({"a": 0})),
            target_tokenizer=Tok({"b": 0}),
        )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"k": 0},
        {"k": 2.5},
        {"mode": "typical"},
        {"sampling": {"temperature": 1}},
        {"draft": "not a draft"},
    ],
)
def test_bad_constructor_arguments(target, draft_model, kwargs):
    args = {"k": 2, "draft": ModelDraft(draft_model), **kwargs}
    with pytest.raises(ValueError):
        SpeculativeGenerator(target, **args)


def test_bad_generate_arguments(target, draft_model):
    gen = SpeculativeGenerator(target, ModelDraft(draft_model), k=2)
    ids = prompt(2)
    right_padded = torch.ones_like(ids)
    right_padded[0, -1] = 0
    for call in (
        lambda: gen.generate(ids, 5, attention_mask=right_padded),
        lambda: gen.generate(ids[0], 5),
        lambda: gen.generate(ids, -1),
        lambda: gen.generate(ids, 5, seed=[1]),
        lambda: generate_plain(target, ids, 5, attention_mask=right_padded),
        lambda: EarlyExitDraft(target, 9),
        lambda: PromptLookupDraft(ngram_max=1, ngram_min=2),
    ):
        with pytest.raises(ValueError):
            call()
