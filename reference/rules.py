"""One verification round, sampled: the standard rule and its named alternatives.

Randomness contract (so that a fixed seed gives a fixed output): the only source is the
`numpy.random.Generator` passed in. The standard rule draws, per row, k acceptance uniforms
`rng.random(k)` and then one uniform for the correction/bonus token, sampled by inverse CDF.

- `verify`: standard rule (Leviathan et al. 2023, Algorithm 1; Chen et al. 2023, Algorithm 2).
  Accept x_i iff u_i < p_i(x_i) / q_i(x_i), u_i ~ U[0, 1): probability min(1, p/q), never when p = 0.
- `verify_sampler_match`: draw y_i ~ p_i and keep the draft while y_i == x_i (llama.cpp's and
  transformers' prompt-lookup style): exact, but accepts with probability sum_x p(x) q(x) only.
- `verify_greedy`: keep the draft while x_i == argmax p_i (lowest id on ties): the rule for a
  greedy (temperature 0) target, where every p_i is one-hot.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .laws import unchecked_residual
from .sampling import inverse_cdf
from .validation import as_prob_array, as_token_array, check_rng, check_round_shapes


def _checked_batch(target_probs: Any, draft_probs: Any, draft_tokens: Any, batched: bool):
    ndim = 3 if batched else 2
    p = as_prob_array(target_probs, "target_probs", ndim=ndim)
    q = as_prob_array(draft_probs, "draft_probs", ndim=ndim)
    k = check_round_shapes(p, q, batched=batched)
    x = as_token_array(draft_tokens, "draft_tokens", q.shape[:-1], q.shape[-1])
    if not batched:
        p, q, x = p[None], q[None], x[None]
    return p, q, x, k


def pack_round(n_accepted: np.ndarray, draft_tokens: np.ndarray, final_tokens: np.ndarray):
    """A batch of rounds as `verify_batch` returns it: the first n_accepted[b] drafts of row b then its final token,
    padded with -1 to (B, k+1) int64, and the counts n_accepted + 1 (B,)."""
    batch, k = draft_tokens.shape
    out = np.full((batch, k + 1), -1, dtype=np.int64)
    positions = np.arange(k)[None, :]
    out[:, :k] = np.where(positions < n_accepted[:, None], draft_tokens, -1)
    out[np.arange(batch), n_accepted] = final_tokens
    return out, n_accepted + 1


def _standard(p: np.ndarray, q: np.ndarray, x: np.ndarray, k: int, rng: np.random.Generator):
    batch = p.shape[0]
    rows = np.arange(batch)[:, None]
    cols = np.arange(k)[None, :]
    p_x = p[rows, cols, x]
    q_x = q[rows, cols, x]
    if (q_x <= 0).any():
        b, i = np.argwhere(q_x <= 0)[0]
        raise ValueError(
            f"draft_tokens[{b}, {i}] = {x[b, i]} has draft probability 0, so it cannot have been drawn from draft_probs"
        )
    uniforms = rng.random((batch, k))
    accepted = np.cumprod(uniforms < p_x / q_x, axis=1).astype(bool)
    n_accepted = np.where(accepted.all(axis=1), k, accepted.argmin(axis=1))
    at = np.arange(batch)
    rejected_here = n_accepted < k
    clipped = np.minimum(n_accepted, k - 1)
    final_dist = np.where(
        rejected_here[:, None],
        unchecked_residual(p[at, clipped], q[at, clipped]),
        p[at, n_accepted],
    )
    final_tokens = inverse_cdf(final_dist, rng.random(batch))
    return pack_round(n_accepted, x, final_tokens)


def verify_batch(target_probs: Any, draft_probs: Any, draft_tokens: Any, rng: np.random.Generator):
    """Standard rule over a batch: (B, k+1, V), (B, k, V), (B, k) -> (tokens (B, k+1) padded with -1, counts (B,))."""
    check_rng(rng)
    p, q, x, k = _checked_batch(target_probs, draft_probs, draft_tokens, batched=True)
    return _standard(p, q, x, k, rng)


def verify(
    target_probs: Any, draft_probs: Any, draft_tokens: Any, rng: np.random.Generator
) -> list[int]:
    """Standard rule, one round: (k+1, V), (k, V), (k,) -> the emitted tokens (length 1..k+1)."""
    check_rng(rng)
    p, q, x, k = _checked_batch(target_probs, draft_probs, draft_tokens, batched=False)
    tokens, counts = _standard(p, q, x, k, rng)
    return tokens[0, : counts[0]].tolist()


def verify_sampler_match(
    target_probs: Any, draft_probs: Any, draft_tokens: Any, rng: np.random.Generator
) -> list[int]:
    """Exact but weaker rule: draw y_i ~ p_i, keep drafts while y_i == x_i, emit y_i at the first mismatch."""
    check_rng(rng)
    p, q, x, k = _checked_batch(target_probs, draft_probs, draft_tokens, batched=False)
    samples = inverse_cdf(p[0], rng.random(k + 1))
    matches = np.cumprod(samples[:k] == x[0]).astype(bool)
    n_accepted = k if matches.all() else int(matches.argmin())
    return x[0, :n_accepted].tolist() + [int(samples[n_accepted])]


def verify_greedy(
    target_probs: Any, draft_probs: Any, draft_tokens: Any, rng: np.random.Generator | None = None
) -> list[int]:
    """Greedy rule: keep drafts while x_i == argmax p_i (lowest id on ties), then emit that argmax."""
    p, q, x, k = _checked_batch(target_probs, draft_probs, draft_tokens, batched=False)
    best = p[0].argmax(axis=-1)
    matches = np.cumprod(best[:k] == x[0]).astype(bool)
    n_accepted = k if matches.all() else int(matches.argmin())
    return x[0, :n_accepted].tolist() + [int(best[n_accepted])]
