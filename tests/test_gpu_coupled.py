"""A deterministic draft at T > 0 gives plain decoding's tokens for the same seed, whatever k (generator docstring).

The generator verifies a prompt-lookup draft by sampler-match and rewinds each row's CPU stream to the
uniforms the round used, one per emitted token as a plain step spends; these tests pin that coupling and
the stream property it rests on.
"""

import pytest
import torch

from exactspec.gpu_impl import SpeculativeGenerator, generate_plain
from exactspec.gpu_impl.drafts import ModelDraft, PromptLookupDraft
from exactspec.gpu_impl.sampling.randomness import make_generators, rewind, stream_states
from exactspec.reference.warping import SamplingParams
from tests.tiny_models import scaled_llama

pytestmark = pytest.mark.usefixtures("one_torch_thread")

VOCAB = 12
PROMPTS = torch.tensor(
    [[1, 4, 2, 7, 1, 4, 2, 7, 1, 4], [3, 3, 5, 3, 3, 5, 3, 3, 5, 3], [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]]
)
SAMPLINGS = [SamplingParams(1.0), SamplingParams(0.7, top_k=6, top_p=0.9)]


@pytest.fixture(scope="module")
def target():
    return scaled_llama(0, layers=2, hidden=32, vocab=VOCAB, scale=2)


@pytest.fixture(scope="module")
def module_cache(tmp_path_factory):
    """One cache for the module: the CPU kernel plan and the cost calibration are measured once, not per test."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EXACTSPEC_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def _draws(generator: torch.Generator, n: int) -> torch.Tensor:
    return torch.empty(n, dtype=torch.float64).uniform_(generator=generator)


def test_cpu_stream_draws_add_up():
    """n draws then m draws are the first n + m draws: what `rewind` relies on."""
    whole = _draws(torch.Generator().manual_seed(3), 9)
    generator = torch.Generator().manual_seed(3)
    assert torch.equal(torch.cat([_draws(generator, n) for n in (1, 3, 1, 4)]), whole)


def test_rewind_keeps_only_the_used_draws():
    generators = make_generators([11, 12], "cpu")
    fresh = [_draws(torch.Generator().manual_seed(s), 6) for s in (11, 12)]
    states = stream_states(generators)
    round_draws = [_draws(g, 5) for g in generators]  # a round of width 5 ...
    rewind(generators, states, [2, 5])  # ... of which row 0 used 2 and row 1 all 5
    assert torch.equal(torch.cat([round_draws[0][:2], _draws(generators[0], 4)]), fresh[0])
    assert torch.equal(torch.cat([round_draws[1], _draws(generators[1], 1)]), fresh[1])


def test_no_states_for_a_shared_generator():
    assert stream_states(None) is None
    assert stream_states(torch.Generator().manual_seed(0)) is None


@pytest.mark.parametrize("sampling", SAMPLINGS, ids=["T1", "filtered"])
@pytest.mark.parametrize(
    "policy,k", [("fixed", 1), ("fixed", 3), ("fixed", 8), ("grow-shrink", 2), ("cost", 4)]
)
def test_prompt_lookup_tokens_are_plain_decodings(target, sampling, policy, k, module_cache):
    plain = generate_plain(target, PROMPTS, 40, sampling, seed=7).sequences
    generator = SpeculativeGenerator(
        target, PromptLookupDraft(), k=k, sampling=sampling, adaptive_k=policy
    )
    assert generator.plain_coupled
    result = generator.generate(PROMPTS, 40, seed=7)
    assert result.sequences == plain
    # the rounds drafted and kept drafts: the coupling was exercised, not bypassed
    if policy == "fixed":
        assert result.stats.accepted > 0 and result.stats.proposed > result.stats.accepted


def test_uncoupled_cases(target):
    """Greedy sampling, a sampled draft and an explicit mode keep the generator's own verification."""
    assert not SpeculativeGenerator(
        target, PromptLookupDraft(), sampling=SamplingParams(0.0)
    ).plain_coupled
    assert not SpeculativeGenerator(
        target, PromptLookupDraft(), sampling=SamplingParams(1.0), mode="greedy"
    ).plain_coupled
    draft = scaled_llama(5, layers=1, hidden=32, vocab=VOCAB, scale=2)
    assert not SpeculativeGenerator(
        target, ModelDraft(draft), sampling=SamplingParams(1.0)
    ).plain_coupled
