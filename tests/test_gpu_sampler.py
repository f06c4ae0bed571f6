"""On-device verifier: edge cases of the rule (by both final-token methods), modes, shapes, ValueErrors, the
oracle's tokens for the same uniforms, and a chi-square on the first token."""

import numpy as np
import pytest
import torch
from scipy import stats

from exactspec.gpu_impl.sampling import sampler
from exactspec.gpu_impl.sampling.randomness import make_generators
from exactspec.gpu_impl.sampling.sampler import verify_batch
from exactspec.gpu_impl.sampling.torch_verifier import TorchVerifier
from exactspec.reference.laws import unchecked_residual
from exactspec.reference.sampling import inverse_cdf

FALSE_FAIL_RATE = 1e-3  # of the fixed-seed chi-square checks
METHODS = ["inverse_cdf", "race"]


@pytest.fixture(params=METHODS)
def method(request):
    return request.param


def random_probs(gen, *shape, sparsity=0.0):
    w = torch.rand(*shape, generator=gen)
    if sparsity:
        w = w * (torch.rand(*shape, generator=gen) >= sparsity)
        w[..., 0] += (w.sum(-1) == 0).float()  # never an all-zero row
    return w / w.sum(-1, keepdim=True)


def draft_from(q, gen):
    return torch.multinomial(q.reshape(-1, q.shape[-1]), 1, generator=gen).reshape(q.shape[:-1])


def test_output_layout(method):
    g = torch.Generator().manual_seed(0)
    p, q = random_probs(g, 64, 5, 10), random_probs(g, 64, 4, 10)
    x = draft_from(q, g)
    tokens, counts = verify_batch(p, q, x, g, method=method)
    assert tokens.shape == (64, 5) and tokens.dtype == torch.long and counts.dtype == torch.long
    for row, n in zip(tokens.tolist(), counts.tolist()):
        assert 1 <= n <= 5 and all(t >= 0 for t in row[:n]) and all(t == -1 for t in row[n:])
    n = counts - 1
    accepted = torch.arange(4)[None] < n[:, None]
    assert torch.equal(tokens[:, :4][accepted], x[accepted])


def test_p_equal_q_never_rejects(method):
    g = torch.Generator().manual_seed(1)
    q = random_probs(g, 2000, 3, 7)
    p = torch.cat([q, random_probs(g, 2000, 1, 7)], dim=1)
    tokens, counts = verify_batch(p, q, draft_from(q, g), g, method=method)
    assert counts.eq(4).all()


def test_disjoint_supports_always_reject_and_emit_from_p(method):
    p = torch.zeros(500, 3, 8)
    p[..., :4] = 0.25
    q = torch.zeros(500, 2, 8)
    q[..., 4:] = 0.25
    g = torch.Generator().manual_seed(2)
    tokens, counts = verify_batch(p, q, draft_from(q, g), g, method=method)
    assert counts.eq(1).all() and tokens[:, 0].lt(4).all()
    assert set(tokens[:, 0].tolist()) == {0, 1, 2, 3}


def test_one_hot_rows(method):
    p = torch.nn.functional.one_hot(torch.tensor([[3, 5, 1]]), 8).float()
    q = torch.nn.functional.one_hot(torch.tensor([[3, 2]]), 8).float()
    tokens, counts = verify_batch(
        p, q, torch.tensor([[3, 2]]), torch.Generator().manual_seed(0), method=method
    )
    assert tokens.tolist() == [[3, 5, -1]] and counts.tolist() == [2]
    tokens, counts = verify_batch(
        p, p[:, :2], torch.tensor([[3, 5]]), torch.Generator().manual_seed(0), method=method
    )
    assert tokens.tolist() == [[3, 5, 1]] and counts.tolist() == [3]


def test_never_emits_a_zero_probability_token(method):
    g = torch.Generator().manual_seed(3)
    p = random_probs(g, 3000, 4, 16, sparsity=0.7)
    q = random_probs(g, 3000, 3, 16, sparsity=0.5)
    x = draft_from(q, g)
    tokens, counts = verify_batch(p, q, x, g, method=method)
    rows = torch.arange(4)[None].expand(3000, -1)
    emitted = tokens >= 0
    p_of_emitted = p.gather(-1, tokens.clamp_min(0)[..., None]).squeeze(-1)
    assert (p_of_emitted[emitted] > 0).all()
    assert rows.shape == tokens.shape


def test_tiny_probabilities_and_large_vocab(method):
    vocab, k = 32768, 8
    g = torch.Generator().manual_seed(4)
    p = torch.zeros((4, k + 1, vocab))
    p[..., : vocab // 2] = 1e-12  # half the vocabulary at 1e-12, the other half exactly 0
    p[..., 7] = 1 - 1e-12 * (vocab // 2 - 1)
    q = random_probs(g, 4, k, vocab)
    tokens, counts = verify_batch(p, q, draft_from(q, g), g, method=method)
    emitted = tokens >= 0
    assert (p.gather(-1, tokens.clamp_min(0)[..., None]).squeeze(-1)[emitted] > 0).all()
    assert counts.ge(1).all() and counts.le(k + 1).all()


def test_q_zero_where_p_positive_and_p_zero_where_q_positive(method):
    p = torch.tensor([[[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]])
    # drafted token 2 has p = 0: reject, emit from p's support
    q = torch.tensor([[[0.0, 0.0, 1.0]]])
    g = torch.Generator().manual_seed(5)
    for _ in range(50):
        tokens, counts = verify_batch(p, q, torch.tensor([[2]]), g, method=method)
        assert counts.item() == 1 and tokens[0, 0].item() in (0, 1)


def test_greedy_mode():
    p = torch.nn.functional.softmax(
        torch.tensor([[[0.0, 2.0, 1.0], [3.0, 0.0, 0.0], [0.0, 0.0, 9.0]]]), -1
    )
    q = torch.full((1, 2, 3), 1 / 3)
    assert verify_batch(p, q, torch.tensor([[1, 0]]), None, "greedy")[0].tolist() == [[1, 0, 2]]
    assert verify_batch(p, q, torch.tensor([[1, 2]]), None, "greedy")[0].tolist() == [[1, 0, -1]]
    assert verify_batch(p, q, torch.tensor([[2, 0]]), None, "greedy")[0].tolist() == [[1, -1, -1]]


def test_sampler_match_mode_with_one_hot_target(method):
    p = torch.nn.functional.one_hot(torch.tensor([[2, 0, 1]]), 3).float()
    q = torch.full((1, 2, 3), 1 / 3)
    g = torch.Generator().manual_seed(0)
    assert verify_batch(p, q, torch.tensor([[2, 0]]), g, "sampler_match", method)[0].tolist() == [
        [2, 0, 1]
    ]
    assert verify_batch(p, q, torch.tensor([[2, 1]]), g, "sampler_match", method)[0].tolist() == [
        [2, 0, -1]
    ]


def oracle_round_from_uniforms(p, q, x, u):
    """The oracle's standard rule (reference.rules._standard) given the k+1 uniforms of each row: -> (tokens, counts)."""
    batch, k = x.shape
    rows = np.arange(batch)[:, None]
    ratio = p[rows, np.arange(k), x] / q[rows, np.arange(k), x]
    n = np.cumprod(u[:, :k] < ratio, axis=1).sum(axis=1)
    at = np.arange(batch)
    final = np.where(
        (n < k)[:, None], unchecked_residual(p[at, n], q[at, np.minimum(n, k - 1)]), p[at, n]
    )
    last = inverse_cdf(final, u[:, k])
    tokens = np.where(np.arange(k + 1) < n[:, None], np.pad(x, ((0, 0), (0, 1))), -1)
    tokens[at, n] = last
    return tokens, n + 1


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("per_row", [False, True])
def test_inverse_cdf_emits_the_oracles_tokens_for_the_same_uniforms(monkeypatch, dtype, per_row):
    """Token by token against the oracle on the uniforms verify_batch draws (k+1 per row, in one draw), with a
    partial last block (V = 1100), several chunks of rows and a partial last chunk, and sparse rows."""
    # 7 rows of float64 (14 of float32) per chunk
    monkeypatch.setattr(sampler, "CHUNK_BYTES", 7 * 1100 * 8)
    rng = np.random.default_rng(3)
    batch, k, vocab = 300, 3, 1100
    q = rng.dirichlet(np.ones(vocab) * 0.2, size=(batch, k))
    p = np.concatenate(
        [
            0.7 * q + 0.3 * rng.dirichlet(np.ones(vocab) * 0.2, size=(batch, k)),
            rng.dirichlet(np.ones(vocab) * 0.2, size=(batch, 1)),
        ],
        axis=1,
    )
    # the rows the implementation sees
    p, q = (torch.tensor(a, dtype=dtype).double().numpy() for a in (p, q))
    x = inverse_cdf(q, rng.random((batch, k)))
    generators = (
        make_generators(range(batch), "cpu") if per_row else torch.Generator().manual_seed(9)
    )
    tokens, counts = verify_batch(
        torch.tensor(p, dtype=dtype),
        torch.tensor(q, dtype=dtype),
        torch.tensor(x),
        generators,
        method="inverse_cdf",
    )
    replay = make_generators(range(batch), "cpu") if per_row else torch.Generator().manual_seed(9)
    u = sampler.uniform(batch, (k + 1,), replay, "cpu").numpy()
    expected_tokens, expected_counts = oracle_round_from_uniforms(p, q, x, u)
    assert np.array_equal(counts.numpy(), expected_counts) and set(expected_counts) == {1, 2, 3, 4}
    # float32: rounding could flip a boundary; not at this seed
    assert np.array_equal(tokens.numpy(), expected_tokens)


def test_strided_rows_give_the_tokens_of_contiguous_ones(method):
    """Rows sliced out of wider tensors (row stride > V) read as their contiguous copies do, bonus rows included."""
    g = torch.Generator().manual_seed(4)
    p_wide, q_wide = random_probs(g, 40, 4, 1103), random_probs(g, 40, 3, 1103)
    p, q = p_wide[..., 2:1102] / p_wide[..., 2:1102].sum(-1, keepdim=True), q_wide[..., 1:1101]
    q = q / q.sum(-1, keepdim=True)
    p_view, q_view = torch.zeros(40, 4, 1103), torch.zeros(40, 3, 1103)
    p_view[..., 2:1102], q_view[..., 1:1101] = p, q
    p_view, q_view = p_view[..., 2:1102], q_view[..., 1:1101]
    x = draft_from(q, g)
    strided = verify_batch(p_view, q_view, x, torch.Generator().manual_seed(8), method=method)
    contiguous = verify_batch(
        p.contiguous(), q.contiguous(), x, torch.Generator().manual_seed(8), method=method
    )
    assert not p_view.is_contiguous() and set(strided[1].tolist()) > {1, 4}
    assert torch.equal(strided[0], contiguous[0]) and torch.equal(strided[1], contiguous[1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cpu_block_masses_match_the_batched_residual_through_numpy_or_torch(monkeypatch, dtype):
    """The CPU's row-by-row block masses (NumPy or torch subtraction, several chunks, bonus rows) = block_sums of
    the batched `_residual`, bit for bit."""
    g = torch.Generator().manual_seed(5)
    p, q = random_probs(g, 30, 4, 1100).to(dtype), random_probs(g, 30, 3, 1100).to(dtype)
    n = torch.randint(0, 4, (30,), generator=g)
    p_flat, q_flat = p.reshape(-1, 1100), q.reshape(-1, 1100)
    p_index, q_index, keep_q = sampler._final_rows(p, q, n)
    rows = sampler._residual(p_flat[p_index], q_flat[q_index], keep_q[:, None])
    expected = sampler.block_sums(rows)
    monkeypatch.setattr(sampler, "CHUNK_BYTES", 7 * 1100 * p.element_size())
    for numpy_dtypes in (sampler.NUMPY_DTYPES, ()):
        monkeypatch.setattr(sampler, "NUMPY_DTYPES", numpy_dtypes)
        assert torch.equal(
            sampler._residual_block_sums(p_flat, q_flat, p_index, q_index, keep_q), expected
        )


def test_zero_mass_residual_falls_back_to_p(method):
    """p = q / 2 (rows not summing to 1): max(0, p - q) is 0 everywhere, so a rejection draws from p."""
    q = torch.tensor([[[0.5, 0.5, 0.0, 0.0]]]).expand(400, -1, -1)
    p = torch.cat([q / 2, torch.tensor([[[0.0, 0.0, 0.0, 1.0]]]).expand(400, -1, -1)], dim=1)
    tokens, counts = verify_batch(
        p,
        q,
        torch.zeros((400, 1), dtype=torch.long),
        torch.Generator().manual_seed(1),
        method=method,
    )
    rejected = counts == 1
    assert 100 < rejected.sum() < 300 and set(tokens[rejected, 0].tolist()) == {0, 1}


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="method"):
        verify_batch(
            torch.full((1, 2, 3), 1 / 3),
            torch.full((1, 1, 3), 1 / 3),
            torch.zeros((1, 1), dtype=torch.long),
            None,
            method="alias",
        )
    with pytest.raises(ValueError, match="method"):
        TorchVerifier(method="alias")


def test_per_row_generators_make_rows_independent_of_the_batch(method):
    g = torch.Generator().manual_seed(6)
    p, q = random_probs(g, 3, 4, 9), random_probs(g, 3, 3, 9)
    x = draft_from(q, g)
    together = verify_batch(p, q, x, make_generators([10, 11, 12], "cpu"), method=method)[0]
    for b in range(3):
        alone = verify_batch(
            p[b : b + 1],
            q[b : b + 1],
            x[b : b + 1],
            make_generators([10 + b], "cpu"),
            method=method,
        )[0]
        assert torch.equal(together[b], alone[0])


@pytest.mark.parametrize(
    "vocab,dtype",
    [(9, torch.float32), (1100, torch.float32), (1100, torch.float64), (2048, torch.bfloat16)],
)
def test_one_row_path_emits_the_batched_paths_tokens(vocab, dtype):
    """B = 1 on a CPU takes `_standard_one_row`; row b alone (its own generator) = row b of the batch, bit for
    bit: all acceptance counts, bonus rows, a partial last block (V = 1100), sparse rows and p = q / 2 rows
    (no residual mass: the fallback to p)."""
    g = torch.Generator().manual_seed(12)
    batch, k = 160, 3
    p, q = (
        random_probs(g, batch, k + 1, vocab, sparsity=0.5),
        random_probs(g, batch, k, vocab, sparsity=0.5),
    )
    p[::7, :k] = q[::7] / 2
    p, q = p.to(dtype), q.to(dtype)
    x = draft_from(q.float(), g)
    tokens, counts = verify_batch(p, q, x, make_generators(range(batch), "cpu"))
    for b in range(batch):
        alone, count = verify_batch(
            p[b : b + 1], q[b : b + 1], x[b : b + 1], make_generators([b], "cpu")
        )
        assert torch.equal(alone[0], tokens[b]) and int(count[0]) == int(counts[b])
    assert set(counts.tolist()) == {1, 2, 3, 4}


@pytest.mark.parametrize(
    "p_shape,q_shape,x_shape,x_dtype,mode",
    [
        ((2, 4, 9), (2, 3, 8), (2, 3), torch.long, "standard"),  # vocabularies differ
        ((2, 1, 9), (2, 0, 9), (2, 0), torch.long, "standard"),  # k = 0
        ((2, 3, 9), (2, 3, 9), (2, 3), torch.long, "standard"),  # target has k rows, not k+1
        ((2, 4, 9), (2, 3, 9), (2, 2), torch.long, "standard"),  # tokens shape
        ((2, 4, 9), (2, 3, 9), (2, 3), torch.float32, "standard"),  # tokens dtype
        ((2, 4, 9), (2, 3, 9), (2, 3), torch.long, "typical"),  # unknown mode
        ((3, 4, 9), (2, 3, 9), (2, 3), torch.long, "standard"),  # batch sizes differ
    ],
)
def test_bad_input_raises(p_shape, q_shape, x_shape, x_dtype, mode):
    with pytest.raises(ValueError):
        verify_batch(
            torch.rand(p_shape),
            torch.rand(q_shape),
            torch.zeros(x_shape, dtype=x_dtype),
            None,
            mode,
        )


def _round(rng, k=3, vocab=10):
    p = rng.dirichlet(np.ones(vocab), size=k + 1)
    q = rng.dirichlet(np.ones(vocab), size=k)
    return p, q


@pytest.mark.parametrize(
    "change",
    [
        lambda p, q, x: (p * 1.1, q, x),  # rows do not sum to 1
        lambda p, q, x: (p, np.where(np.arange(q.shape[1]) == 0, -0.1, q), x),  # negative
        lambda p, q, x: (p, q, x + 100),  # token out of range
        lambda p, q, x: (p[:-1], q, x),  # target rows != k + 1
        lambda p, q, x: (p, q[:, :-1], x),  # vocabularies differ
    ],
)
def test_torch_verifier_rejects_bad_input(change):
    rng = np.random.default_rng(0)
    p, q = _round(rng)
    x = np.array([1, 2, 3])
    with pytest.raises(ValueError):
        TorchVerifier().verify(*change(p, q, x), rng)


def test_torch_verifier_rejects_q_zero_on_draft_and_foreign_rng():
    rng = np.random.default_rng(0)
    p, q = _round(rng)
    q[0] = 0.0
    q[0, 5] = 1.0
    with pytest.raises(ValueError, match="draft"):
        TorchVerifier().verify(p, q, np.array([1, 2, 3]), rng)
    with pytest.raises(ValueError, match="rng"):
        TorchVerifier().verify(p, q, np.array([5, 2, 3]), np.random.RandomState(0))


def test_torch_verifier_is_reproducible_and_batch_shapes():
    p, q = _round(np.random.default_rng(1))
    x = np.array([1, 2, 3])
    v = TorchVerifier()
    assert v.verify(p, q, x, np.random.default_rng(7)) == v.verify(
        p, q, x, np.random.default_rng(7)
    )
    tokens, counts = v.verify_batch(
        np.stack([p, p]), np.stack([q, q]), np.stack([x, x]), np.random.default_rng(7)
    )
    assert tokens.shape == (2, 4) and tokens.dtype == np.int64 and counts.shape == (2,)


@pytest.mark.parametrize("mode", ["standard", "sampler_match"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_first_emitted_token_follows_p(mode, dtype, method):
    """Chi-square (false-fail rate 1e-3, fixed seed) of the first emitted token against p_1: the rule's promise."""
    rng = np.random.default_rng(2024)
    k, vocab, n = 3, 8, 20000
    p, q = _round(rng, k, vocab)
    p[0, 6] = 0.0  # a zero of p where q is positive
    p[0] /= p[0].sum()
    q[0] = q[0] ** 3 / (q[0] ** 3).sum()  # a draft far from the target
    x = inverse_cdf(np.broadcast_to(q, (n, k, vocab)), rng.random((n, k)))
    tokens, _ = TorchVerifier(mode=mode, dtype=dtype, method=method).verify_batch(
        np.broadcast_to(p, (n, k + 1, vocab)), np.broadcast_to(q, (n, k, vocab)), x, rng
    )
    observed = np.bincount(tokens[:, 0], minlength=vocab)
    assert observed[6] == 0
    support = p[0] > 0
    assert stats.chisquare(observed[support], n * p[0][support]).pvalue > FALSE_FAIL_RATE
