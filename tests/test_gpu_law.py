"""The generators' output law on a tiny model, by chi-square at a fixed seed (alpha = 1e-3 each).

Many i.i.d. samples come cheaply from one batched call: every row has its own seeded stream.
"""

import numpy as np
import pytest
import torch
from scipy import stats

from exactspec.gpu_impl import SpeculativeGenerator, generate_plain
from exactspec.gpu_impl.drafts import ModelDraft, PromptLookupDraft
from tests.tiny_models import scaled_llama
from exactspec.gpu_impl.sampling.warping import warp
from exactspec.reference.warping import SamplingParams

ALPHA = 1e-3
VOCAB = 12


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def pair():
    return scaled_llama(0, layers=2, hidden=32, vocab=VOCAB, scale=8), scaled_llama(
        5, layers=1, hidden=32, vocab=VOCAB, scale=8
    )


PROMPT = torch.tensor([[1, 4, 2, 7, 1, 4]])  # "1 4" recurs, so prompt lookup proposes "2 7 ..."


def chi_square_pvalue(observed: np.ndarray, expected_probs: np.ndarray) -> float:
    """Pearson chi-square, pooling cells with expected count < 5 into one."""
    n = observed.sum()
    expected = n * expected_probs
    assert observed[expected_probs == 0].sum() == 0, "a zero-probability outcome was emitted"
    big = expected >= 5
    obs = np.append(observed[big], observed[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    keep = exp > 0
    return stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue


def joint_two_token_law(target, sampling):
    """P(t1, t2 | PROMPT) under the warped target, as a (V, V) table."""
    with torch.no_grad():
        p1 = warp(target(PROMPT).logits[0, -1], sampling)
        extended = torch.cat([PROMPT.expand(VOCAB, -1), torch.arange(VOCAB)[:, None]], dim=1)
        p2 = warp(target(extended).logits[:, -1], sampling)
    return (p1[:, None] * p2).double().numpy()


SAMPLINGS = [SamplingParams(1.0), SamplingParams(0.9, top_k=6, top_p=0.9, min_p=0.05)]


@pytest.mark.parametrize("sampling", SAMPLINGS, ids=["plain_T1", "filtered"])
@pytest.mark.parametrize(
    "source,k", [("model", 1), ("model", 3), ("prompt_lookup", 2), ("plain", 0)]
)
def test_first_two_tokens_follow_target_law(pair, sampling, source, k):
    target, draft_model = pair
    n = 6000
    ids = PROMPT.expand(n, -1)
    if source == "plain":
        out = generate_plain(target, ids, 2, sampling, seed=1000).sequences
    else:
        draft = ModelDraft(draft_model) if source == "model" else PromptLookupDraft(ngram_max=2)
        out = (
            SpeculativeGenerator(target, draft, k=k, sampling=sampling)
            .generate(ids, 2, seed=1000)
            .sequences
        )
    law = joint_two_token_law(target, sampling)
    pairs = np.array(out)
    observed = np.bincount(pairs[:, 0] * VOCAB + pairs[:, 1], minlength=VOCAB * VOCAB).astype(float)
    assert chi_square_pvalue(observed, law.ravel()) > ALPHA
    first = np.bincount(pairs[:, 0], minlength=VOCAB).astype(float)
    assert chi_square_pvalue(first, law.sum(1)) > ALPHA
