"""gpu_impl on a CUDA device: the oracle's tokens for the same uniforms (inverse CDF), the first-token law by
both methods (the race is the CUDA default), per-row streams, `sample`, and a tiny model's two-token law.

Skipped where torch sees no CUDA device. `benchmarks/cuda.sh` runs this file on a GPU machine; with
EXACTSPEC_CUDA_TEST_DEVICE=cpu (what `cuda.sh --small` sets) the same tests run on the CPU, so the file
itself is checked without a GPU. Chi-squares: fixed seeds, false-fail rate 1e-3 each.
"""

import os

import numpy as np
import pytest
import torch
from scipy import stats

from exactspec.gpu_impl import SpeculativeGenerator, generate_plain
from exactspec.gpu_impl.drafts import ModelDraft
from exactspec.gpu_impl.sampling.randomness import make_generators, sample, uniform
from exactspec.gpu_impl.sampling.sampler import verify_batch
from exactspec.gpu_impl.sampling.torch_verifier import TorchVerifier
from exactspec.reference.sampling import inverse_cdf
from exactspec.reference.warping import SamplingParams
from tests.test_gpu_law import PROMPT, VOCAB, chi_square_pvalue, joint_two_token_law
from tests.test_gpu_sampler import oracle_round_from_uniforms
from tests.tiny_models import scaled_llama

DEVICE = os.environ.get("EXACTSPEC_CUDA_TEST_DEVICE", "cuda")
FALSE_FAIL_RATE = 1e-3
pytestmark = pytest.mark.skipif(
    DEVICE.startswith("cuda") and not torch.cuda.is_available(), reason="torch sees no CUDA device"
)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("per_row", [False, True])
def test_inverse_cdf_emits_the_oracles_tokens_for_the_same_uniforms(dtype, per_row):
    rng = np.random.default_rng(5)
    batch, k, vocab = 256, 3, 3000
    q = rng.dirichlet(np.ones(vocab) * 0.2, size=(batch, k))
    p = np.concatenate(
        [
            0.7 * q + 0.3 * rng.dirichlet(np.ones(vocab) * 0.2, size=(batch, k)),
            rng.dirichlet(np.ones(vocab) * 0.2, size=(batch, 1)),
        ],
        axis=1,
    )
    p, q = (torch.tensor(a, dtype=dtype).double().numpy() for a in (p, q))
    x = inverse_cdf(q, rng.random((batch, k)))
    streams = lambda: (
        make_generators(range(batch), DEVICE) if per_row else torch.Generator(DEVICE).manual_seed(3)
    )
    tokens, counts = verify_batch(
        torch.tensor(p, dtype=dtype, device=DEVICE),
        torch.tensor(q, dtype=dtype, device=DEVICE),
        torch.tensor(x, device=DEVICE),
        streams(),
        method="inverse_cdf",
    )
    u = uniform(batch, (k + 1,), streams(), DEVICE).cpu().numpy()
    expected_tokens, expected_counts = oracle_round_from_uniforms(p, q, x, u)
    assert np.array_equal(counts.cpu().numpy(), expected_counts)
    assert np.array_equal(tokens.cpu().numpy(), expected_tokens)


@pytest.mark.parametrize("method", ["race", "inverse_cdf"])
@pytest.mark.parametrize("mode", ["standard", "sampler_match"])
def test_first_emitted_token_follows_p(method, mode):
    rng = np.random.default_rng(2024)
    k, vocab, n = 3, 8, 20000
    p, q = rng.dirichlet(np.ones(vocab), size=k + 1), rng.dirichlet(np.ones(vocab), size=k)
    p[0, 6] = 0.0
    p[0] /= p[0].sum()
    q[0] = q[0] ** 3 / (q[0] ** 3).sum()
    x = inverse_cdf(np.broadcast_to(q, (n, k, vocab)), rng.random((n, k)))
    tokens, _ = TorchVerifier(device=DEVICE, mode=mode, method=method).verify_batch(
        np.broadcast_to(p, (n, k + 1, vocab)).copy(),
        np.broadcast_to(q, (n, k, vocab)).copy(),
        x,
        rng,
    )
    observed = np.bincount(tokens[:, 0], minlength=vocab)
    assert observed[6] == 0
    assert stats.chisquare(observed[p[0] > 0], n * p[0][p[0] > 0]).pvalue > FALSE_FAIL_RATE


@pytest.mark.parametrize("method", ["race", "inverse_cdf"])
def test_rows_keep_their_own_streams_and_sample_skips_zeros(method):
    g = torch.Generator(DEVICE).manual_seed(6)
    p = torch.rand(3, 4, 500, device=DEVICE, generator=g)
    p = p * (p > 0.5)
    p = p / p.sum(-1, keepdim=True)
    q = torch.rand(3, 3, 500, device=DEVICE, generator=g).softmax(-1)
    x = torch.multinomial(q.reshape(-1, 500), 1, generator=g).reshape(3, 3)
    together = verify_batch(p, q, x, make_generators([10, 11, 12], DEVICE), method=method)[0]
    for b in range(3):
        alone = verify_batch(
            p[b : b + 1],
            q[b : b + 1],
            x[b : b + 1],
            make_generators([10 + b], DEVICE),
            method=method,
        )[0]
        assert torch.equal(together[b], alone[0])
    rows = p[:, 0].repeat(2000, 1)
    drawn = sample(rows, torch.Generator(DEVICE).manual_seed(1), method)
    assert (rows.gather(1, drawn[:, None]) > 0).all()


@pytest.mark.parametrize("source", ["model", "plain"])
def test_tiny_model_first_two_tokens_follow_the_target_law(source):
    target = scaled_llama(0, layers=2, hidden=32, vocab=VOCAB, scale=8)
    draft_model = scaled_llama(5, layers=1, hidden=32, vocab=VOCAB, scale=8)
    sampling, n = SamplingParams(1.0), 6000
    law = joint_two_token_law(target, sampling)  # on the CPU, where the reference law is computed
    target, draft_model = target.to(DEVICE), draft_model.to(DEVICE)
    ids = PROMPT.to(DEVICE).expand(n, -1)
    if source == "plain":
        out = generate_plain(target, ids, 2, sampling, seed=1000).sequences
    else:
        out = (
            SpeculativeGenerator(target, ModelDraft(draft_model), k=3, sampling=sampling)
            .generate(ids, 2, seed=1000)
            .sequences
        )
    pairs = np.array(out)
    observed = np.bincount(pairs[:, 0] * VOCAB + pairs[:, 1], minlength=VOCAB * VOCAB).astype(float)
    assert chi_square_pvalue(observed, law.ravel()) > FALSE_FAIL_RATE
