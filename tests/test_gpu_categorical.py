"""The blocked inverse CDF (`gpu_impl.sampling.categorical`): the oracle's token for the oracle's uniform, its guard,
its resolution across blocks, and `randomness.sample` by both methods."""

import numpy as np
import pytest
import torch
from scipy import stats

from exactspec.gpu_impl.sampling import categorical
from exactspec.gpu_impl.sampling.randomness import make_generators, sample
from exactspec.reference.sampling import inverse_cdf as oracle_inverse_cdf

FALSE_FAIL_RATE = 1e-3  # of the fixed-seed chi-square check
JUST_BELOW_ONE = float(np.nextafter(1.0, 0.0))


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 4 tokens, so a short row spans many blocks and a partial last one."""
    monkeypatch.setattr(categorical, "BLOCK", 4)


def test_block_sums_cover_a_partial_last_block():
    w = torch.rand(3, 1100, dtype=torch.float64)
    sums = categorical.block_sums(w)
    assert sums.shape == (3, 3)
    assert torch.allclose(sums[:, 2], w[:, 1024:].sum(-1)) and torch.allclose(
        sums.sum(-1), w.sum(-1)
    )


@pytest.mark.parametrize("vocab", [7, 512, 1100, 3000])
def test_same_token_as_the_oracle_for_the_same_uniform(vocab):
    """Token by token against `reference.sampling.inverse_cdf` (float64, sparse rows, rows not summing to 1)."""
    rng = np.random.default_rng(vocab)
    weights = rng.random((400, vocab)) * (rng.random((400, vocab)) < 0.3)
    weights[:, rng.integers(vocab)] += 0.5  # positive mass in every row
    u = rng.random(400)
    u[:5] = [0.0, JUST_BELOW_ONE, 0.5, 1e-17, 1 - 1e-16]
    expected = oracle_inverse_cdf(weights, u)
    got = categorical.inverse_cdf(torch.tensor(weights), torch.tensor(u)).numpy()
    assert np.array_equal(got, expected)


def test_the_law_on_a_uniform_grid_across_blocks(small_blocks):
    """Deterministic: the share of grid uniforms mapped to each token is its probability to within 1/M."""
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(23)) * (rng.random(23) < 0.6)
    p[[0, 4, 5, 6, 7]] = 0.0  # a leading zero and a whole zero block
    p /= p.sum()
    m = 200_000
    grid = (np.arange(m) + 0.5) / m
    tokens = categorical.inverse_cdf(torch.tensor(p).expand(m, -1), torch.tensor(grid))
    share = np.bincount(tokens.numpy(), minlength=23) / m
    assert np.abs(share - p).max() <= 2 / m
    assert share[p == 0].sum() == 0


def test_guard_never_returns_a_zero_weight_token(small_blocks):
    w = torch.tensor(
        [[0.0, 0.3, 0.0, 0.0, 0.1, 0.0, 0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]] * 3, dtype=torch.float32
    )
    tokens = categorical.inverse_cdf(
        w, torch.tensor([0.0, JUST_BELOW_ONE, 0.5], dtype=torch.float64)
    )
    assert tokens.tolist() == [1, 6, 4]
    # sums to 0.9999999999999999: u * total rounds to the end
    ones = torch.full((1, 10), 0.1, dtype=torch.float64)
    ones[0, -1] = 0.0
    assert (
        categorical.inverse_cdf(ones, torch.tensor([JUST_BELOW_ONE], dtype=torch.float64)).item()
        == 8
    )


def test_a_tiny_weight_in_a_later_block_keeps_its_interval(small_blocks):
    w = torch.zeros(1, 12, dtype=torch.float64)
    w[0, 0], w[0, 9] = 1.0 - 1e-12, 1e-12  # token 9 owns [1 - 1e-12, 1) of the unit interval
    pick = lambda u: categorical.inverse_cdf(w, torch.tensor([u], dtype=torch.float64)).item()
    assert pick(1 - 0.5e-12) == 9 and pick(1 - 2e-12) == 0 and pick(JUST_BELOW_ONE) == 9


def test_method_for_picks_by_device_and_refuses_unknown_methods():
    assert categorical.method_for("cpu") == "inverse_cdf"
    assert categorical.method_for("cuda") == "race"
    assert categorical.method_for("cpu", "race") == "race"
    with pytest.raises(ValueError, match="method"):
        categorical.method_for("cpu", "alias")
    with pytest.raises(ValueError, match="method"):
        sample(torch.full((1, 3), 1 / 3), None, "gumbel")


@pytest.mark.parametrize("method", ["inverse_cdf", "race"])
def test_sample_follows_the_row_and_rows_keep_their_own_streams(method):
    """Chi-square (false-fail rate 1e-3, fixed seed, n = 20000) of sample() on one row; row b of a batch = row b alone."""
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(700) * 0.3)
    p[p < 1e-3] = 0.0
    p /= p.sum()
    n = 20_000
    tokens = sample(
        torch.tensor(p, dtype=torch.float32).expand(n, -1).contiguous(),
        torch.Generator().manual_seed(2),
        method,
    )
    observed = np.bincount(tokens.numpy(), minlength=700)
    assert observed[p == 0].sum() == 0
    big = n * p >= 5
    pooled_obs = np.append(observed[big], observed[~big].sum())
    pooled_exp = np.append(n * p[big], n * p[~big].sum())
    keep = pooled_exp > 0
    assert stats.chisquare(pooled_obs[keep], pooled_exp[keep]).pvalue > FALSE_FAIL_RATE
    probs = torch.tensor(rng.dirichlet(np.ones(700), size=3), dtype=torch.float32)
    together = sample(probs, make_generators([5, 6, 7], "cpu"), method)
    alone = [
        sample(probs[b : b + 1], make_generators([5 + b], "cpu"), method).item() for b in range(3)
    ]
    assert together.tolist() == alone


@pytest.mark.parametrize("vocab", [7, 512, 1100])
def test_windows_read_each_block_inside_its_row_on_strided_rows(vocab):
    """block_window + windows = the block's tokens (a partial last block: the row's last tokens, those before it
    masked), also on rows with a row stride other than V (a slice of a wider tensor) and a zero row stride."""
    wide = torch.rand(6, vocab + 5, dtype=torch.float64)
    rows = wide[:, 2 : 2 + vocab]
    size = categorical.block_size(vocab)
    block = torch.tensor([0, -(-vocab // size) - 1, 0, -(-vocab // size) - 1])
    first, real = categorical.block_window(block, vocab)
    got = categorical.windows(rows, torch.tensor([0, 5, 3, 2]), first)
    for n, (row, b) in enumerate(zip([0, 5, 3, 2], block.tolist())):
        assert torch.equal(got[n], rows[row, first[n] : first[n] + size])
        tokens = first[n] + torch.arange(size)
        assert torch.equal(
            tokens[real[n]] if real is not None else tokens,
            torch.arange(b * size, min(vocab, (b + 1) * size)),
        )
    same = categorical.windows(rows[:1].expand(4, -1), torch.tensor([3, 0, 1, 2]), first)
    assert torch.equal(same, torch.stack([rows[0, f : f + size] for f in first.tolist()]))


def test_guard_only_moves_rows_past_the_end():
    """`_guarded` (which skips its pass on a CPU when no row is past the end) = min(index, last positive entry)."""
    gen = torch.Generator().manual_seed(0)
    w = torch.rand(500, 9, generator=gen, dtype=torch.float64) * (
        torch.rand(500, 9, generator=gen) < 0.5
    )
    w[:, 0] += 1e-3
    cumulative = w.cumsum(-1)
    for u in (
        torch.rand(500, generator=gen, dtype=torch.float64),
        torch.ones(500, dtype=torch.float64),
    ):
        index = torch.searchsorted(
            cumulative, (u * cumulative[:, -1])[:, None], right=True
        ).squeeze(1)
        expected = torch.minimum(index, categorical._last_positive(w))
        assert torch.equal(categorical._guarded(index, w), expected) and bool(
            (w.gather(1, expected[:, None]) > 0).all()
        )
