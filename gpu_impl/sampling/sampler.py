"""On-device rejection sampler: one verification round for a whole batch, without host syncs on an accelerator.

Standard mode is the Leviathan/Chen rule: accept draft token x ~ q iff u < p(x)/q(x) (u ~ U[0,1)),
at the first rejection draw from norm(max(0, p - q)) (falling back to p when that mass is 0, which can
only happen when p == q, where nothing is rejected), and after k acceptances draw a bonus token from
p_{k+1}.  The bonus row's residual is p itself (max(0, p - 0)), so both cases share one code path.

The final token is drawn by the blocked inverse CDF on a CPU (k+1 uniforms per row in all; the p and q
rows behind each batch row's final draw are read once from memory, row by row into a cache-sized buffer,
never stored whole, and a bonus row's q not at all; one flag read, free on a CPU, skips the fallback's
extra pass) and by the exponential race on other devices (`categorical.method_for`; figures in
benchmarks/results/sampler.json).
"""

from __future__ import annotations

import numpy as np
import torch

from .categorical import (
    block_size,
    block_sums,
    block_window,
    inverse_cdf,
    method_for,
    pick_block,
    pick_in_block,
    race,
    windows,
)
from .randomness import Generators, exponential, uniform

MODES = ("standard", "greedy", "sampler_match")
PAD = -1
# CPU: residual rows per chunk (cached for the clamp and block sums; 1-4 MB measured alike)
CHUNK_BYTES = 2 << 20
# CPU rows subtracted through NumPy (IEEE: torch's very results)
NUMPY_DTYPES = (
    torch.float32,
    torch.float64,
)


def _check_round(
    target_probs: torch.Tensor, draft_probs: torch.Tensor, draft_tokens: torch.Tensor, mode: str
) -> None:
    """Shape/dtype checks only (no values: those would force a device->host sync)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    for name, tensor, ndim in (
        ("target_probs", target_probs, 3),
        ("draft_probs", draft_probs, 3),
        ("draft_tokens", draft_tokens, 2),
    ):
        if not isinstance(tensor, torch.Tensor) or tensor.ndim != ndim:
            raise ValueError(
                f"{name} must be a {ndim}-D torch.Tensor, got {getattr(tensor, 'shape', type(tensor))}"
            )
    if draft_probs.shape[-1] != target_probs.shape[-1]:
        raise ValueError(
            f"draft_probs and target_probs have mismatched vocabularies: {draft_probs.shape[-1]} vs {target_probs.shape[-1]}"
        )
    batch, k, _ = draft_probs.shape
    if k < 1:
        raise ValueError(f"draft_probs must hold k >= 1 rows, got shape {tuple(draft_probs.shape)}")
    if target_probs.shape[:2] != (batch, k + 1):
        raise ValueError(
            f"target_probs must have shape (B, k+1, V) = ({batch}, {k + 1}, V), got {tuple(target_probs.shape)}"
        )
    if draft_tokens.shape != (batch, k):
        raise ValueError(
            f"draft_tokens must have shape (B, k) = ({batch}, {k}), got {tuple(draft_tokens.shape)}"
        )
    if draft_tokens.dtype != torch.long:
        raise ValueError(f"draft_tokens must be a long tensor, got {draft_tokens.dtype}")
    if not target_probs.is_floating_point() or not draft_probs.is_floating_point():
        raise ValueError("target_probs and draft_probs must be floating-point tensors")


def _leading_true(flags: torch.Tensor) -> torch.Tensor:
    """Number of leading True entries per row of a (B, k) bool tensor."""
    return flags.long().cumprod(dim=-1).sum(dim=-1)


def _emit(
    draft_tokens: torch.Tensor, n_accepted: torch.Tensor, last: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, k+1) tokens: the first n accepted drafts, then `last`, then PAD; and counts n + 1."""
    batch, k = draft_tokens.shape
    positions = torch.arange(k + 1, device=draft_tokens.device)
    padded = torch.cat([draft_tokens, draft_tokens.new_full((batch, 1), PAD)], dim=1)
    tokens = torch.where(positions < n_accepted[:, None], padded, PAD)
    tokens.scatter_(1, n_accepted[:, None], last[:, None])
    return tokens, n_accepted + 1


def _row(probs: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """probs[b, index[b], :] for a (B, R, V) tensor."""
    return probs.gather(1, index[:, None, None].expand(-1, 1, probs.shape[-1])).squeeze(1)


def _acceptances(target_probs, draft_probs, draft_tokens, u):
    """Number of leading accepted drafts per row: u_i < p(x_i) / q(x_i) (p(x) = 0 gives 0: never accepted)."""
    k = draft_probs.shape[1]
    p_x = target_probs[:, :k].gather(-1, draft_tokens[..., None]).squeeze(-1).double()
    q_x = draft_probs.gather(-1, draft_tokens[..., None]).squeeze(-1).double()
    return _leading_true(u < p_x / q_x)


def _final_rows(target_probs, draft_probs, n_accepted):
    """Flat row ids of p and q behind each row's final draw, and whether q counts (False on the bonus row)."""
    batch, k, _ = draft_probs.shape
    rows = torch.arange(batch, device=n_accepted.device)
    return rows * (k + 1) + n_accepted, rows * k + n_accepted.clamp(max=k - 1), n_accepted < k


def _residual(p, q, keep_q):
    """The final row's weights: max(0, p - q) where q counts, max(0, p) (= p) on a bonus row.

    The block masses (`_cpu_residual_block_sums` does the same IEEE ops row by row) and the in-block
    weights both come from these ops, so the two levels of the inverse CDF agree bit for bit."""
    return torch.where(keep_q, p - q, p).clamp_min_(0)


def _residual_block_sums(p_flat, q_flat, p_index, q_index, keep_q) -> torch.Tensor:
    """Block masses of each row's final residual (`_residual`): all rows at once off a CPU, row by row on one."""
    if p_flat.device.type != "cpu":
        p_rows = p_flat.index_select(0, p_index)
        return block_sums(_residual(p_rows, q_flat.index_select(0, q_index), keep_q[:, None]))
    return _cpu_residual_block_sums(
        p_flat, q_flat, p_index.tolist(), q_index.tolist(), keep_q.tolist()
    )


def _cpu_residual_block_sums(p_flat, q_flat, p_index, q_index, keep_q) -> torch.Tensor:
    """CPU: each row's p - q (a bonus row's p; its q is never read) goes from memory straight into a buffer
    of CHUNK_BYTES that stays in cache for the clamp and the block sums.  Row by row through NumPy where the
    dtype allows (~1 us a call there, ~4 us in torch): the same IEEE subtraction either way."""
    rows, vocab = len(p_index), p_flat.shape[1]
    sums = p_flat.new_empty((rows, -(-vocab // block_size(vocab))))
    chunk = max(1, min(rows, CHUNK_BYTES // (vocab * p_flat.element_size())))
    buffer = p_flat.new_empty((chunk, vocab))
    if p_flat.dtype in NUMPY_DTYPES:
        p, q, slots, subtract, copy = (
            p_flat.detach().numpy(),
            q_flat.detach().numpy(),
            buffer.numpy(),
            np.subtract,
            np.copyto,
        )
    else:
        p, q, slots, subtract, copy = p_flat, q_flat, buffer, torch.sub, torch.Tensor.copy_
    for lo in range(0, rows, chunk):
        hi = min(rows, lo + chunk)
        for slot, row in zip(slots, range(lo, hi)):
            if keep_q[row]:
                subtract(p[p_index[row]], q[q_index[row]], out=slot)
            else:
                copy(slot, p[p_index[row]])
        block_sums(buffer[: hi - lo].clamp_min_(0), sums[lo:hi])
    return sums


def _with_fallback(sums, p_flat, p_index):
    """Rows whose residual has no mass fall back to p: -> (block masses, which rows fell back).

    p's block masses cost one more pass, so a CPU (where reading the flag costs no queue drain) computes
    them only when some row needs them; other devices always do, to stay free of host syncs."""
    empty = sums.sum(-1) == 0
    if p_flat.device.type == "cpu" and not bool(empty.any()):
        return sums, empty[:, None]
    # max(0, p), as in `_residual`
    target_sums = block_sums(p_flat.index_select(0, p_index).clamp_min_(0))
    return torch.where(empty[:, None], target_sums, sums), empty[:, None]


def _residual_inverse_cdf(target_probs, draft_probs, n_accepted, u):
    """The final token by the blocked inverse CDF of norm(max(0, p - q)) (p where that mass is 0)."""
    vocab = target_probs.shape[-1]
    p_flat, q_flat = target_probs.reshape(-1, vocab), draft_probs.reshape(-1, vocab)
    p_index, q_index, keep_q = _final_rows(target_probs, draft_probs, n_accepted)
    sums, empty = _with_fallback(
        _residual_block_sums(p_flat, q_flat, p_index, q_index, keep_q), p_flat, p_index
    )
    block, local = pick_block(sums, u)
    first, real = block_window(block, vocab)
    p_in, q_in = windows(p_flat, p_index, first), windows(q_flat, q_index, first)
    # p itself where the residual had no mass
    weights = _residual(p_in, q_in, (keep_q[:, None] & ~empty))
    return first + pick_in_block(weights, local, real)


def _residual_race(target_probs, draft_probs, n_accepted, generator):
    batch, k, vocab = draft_probs.shape
    p_row = _row(target_probs, n_accepted)
    # bonus row: q = 0
    q_row = _row(draft_probs, n_accepted.clamp(max=k - 1)) * (n_accepted < k)[:, None]
    residual = (p_row - q_row).clamp_min(0)
    weights = torch.where(residual.sum(-1, keepdim=True) > 0, residual, p_row)
    return race(weights, exponential(batch, (vocab,), generator, target_probs.device))


def _standard_one_row(target_probs, draft_probs, draft_tokens, generator):
    """B = 1 on a CPU (a per-round caller's case): the batched inverse-CDF path's draws and IEEE ops for one
    row, its tokens bit for bit, without the batch bookkeeping (each torch op costs microseconds here).

    Reading the acceptances on the host is free on a CPU; the residual's mass is 0 exactly where all of its
    block masses are (non-negative terms), so the fallback to p is taken on the same rows."""
    k = draft_probs.shape[1]
    u = uniform(1, (k + 1,), generator, "cpu")[0]
    p, q, x = target_probs[0], draft_probs[0], draft_tokens[0]
    ratios = (
        p[:k].gather(1, x[:, None]).squeeze(1).double()
        / q.gather(1, x[:, None]).squeeze(1).double()
    )
    accepted = (u[:k] < ratios).tolist()
    n = accepted.index(False) if False in accepted else k
    weights = torch.sub(p[n], q[n]).clamp_min_(0) if n < k else p[k].clamp_min(0)
    if n < k and not bool(weights.sum() > 0):
        weights = p[n].clamp_min(0)  # max(0, p), as `_with_fallback` takes it
    last = int(inverse_cdf(weights[None], u[k:])[0])
    return torch.tensor([x[:n].tolist() + [last] + [PAD] * (k - n)]), torch.tensor([n + 1])


def _standard(target_probs, draft_probs, draft_tokens, generator, method):
    batch, k, _ = draft_probs.shape
    if batch == 1 and method == "inverse_cdf" and target_probs.device.type == "cpu":
        return _standard_one_row(target_probs, draft_probs, draft_tokens, generator)
    if method == "race":  # k acceptance uniforms, then V exponentials per row
        n_accepted = _acceptances(
            target_probs,
            draft_probs,
            draft_tokens,
            uniform(batch, (k,), generator, target_probs.device),
        )
        last = _residual_race(target_probs, draft_probs, n_accepted, generator)
    else:  # k acceptance uniforms and the final one, in one draw per row
        u = uniform(batch, (k + 1,), generator, target_probs.device)
        n_accepted = _acceptances(target_probs, draft_probs, draft_tokens, u[:, :k])
        last = _residual_inverse_cdf(target_probs, draft_probs, n_accepted, u[:, k])
    return _emit(draft_tokens, n_accepted, last)


def _greedy(target_probs, draft_tokens):
    best = target_probs.argmax(dim=-1)  # (B, k+1), ties to the lowest id
    n_accepted = _leading_true(draft_tokens == best[:, :-1])
    return _emit(draft_tokens, n_accepted, best.gather(1, n_accepted[:, None]).squeeze(1))


def _sampler_match(target_probs, draft_tokens, generator, method):
    batch, rows, vocab = target_probs.shape
    if method == "race":
        drawn = race(
            target_probs, exponential(batch, (rows, vocab), generator, target_probs.device)
        )
    else:
        drawn = inverse_cdf(target_probs, uniform(batch, (rows,), generator, target_probs.device))
    n_accepted = _leading_true(drawn[:, :-1] == draft_tokens)
    return _emit(draft_tokens, n_accepted, drawn.gather(1, n_accepted[:, None]).squeeze(1))


def verify_batch(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    draft_tokens: torch.Tensor,
    generator: Generators = None,
    mode: str = "standard",
    method: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Verify one round for B rows: -> (tokens (B, k+1) long padded with -1, counts (B,) long).

    target_probs (B, k+1, V), draft_probs (B, k, V), draft_tokens (B, k).  `generator` is one
    torch.Generator (or None) for the whole batch, or one per row (each row then draws only from its
    own stream).  `method` draws the final token: "auto" (by device), "inverse_cdf" or "race".
    Values are not checked (that would sync): q(x) = 0 on a drafted token is impossible input.  All
    work stays on the tensors' device.
    """
    _check_round(target_probs, draft_probs, draft_tokens, mode)
    method = method_for(target_probs.device, method)
    if mode == "greedy":
        return _greedy(target_probs, draft_tokens)
    if mode == "sampler_match":
        return _sampler_match(target_probs, draft_tokens, generator, method)
    return _standard(target_probs, draft_probs, draft_tokens, generator, method)
