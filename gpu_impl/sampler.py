"""On-device rejection sampler: one verification round for a whole batch, without host syncs.

Standard mode is the Leviathan/Chen rule: accept draft token x ~ q iff u < p(x)/q(x) (u ~ U[0,1)),
at the first rejection draw from norm(max(0, p - q)) (falling back to p when that mass is 0, which can
only happen when p == q, where nothing is rejected), and after k acceptances draw a bonus token from
p_{k+1}.  The bonus row is handled as a residual against q = 0, so both cases share one code path.
"""

from __future__ import annotations

import numpy as np
import torch

from exactspec.reference import validation

from .randomness import Generators, exponential, race, uniform

MODES = ("standard", "greedy", "sampler_match")
PAD = -1


def _check_round(target_probs: torch.Tensor, draft_probs: torch.Tensor, draft_tokens: torch.Tensor, mode: str) -> None:
    """Shape/dtype checks only (no values: those would force a device->host sync)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    for name, tensor, ndim in (("target_probs", target_probs, 3), ("draft_probs", draft_probs, 3), ("draft_tokens", draft_tokens, 2)):
        if not isinstance(tensor, torch.Tensor) or tensor.ndim != ndim:
            raise ValueError(f"{name} must be a {ndim}-D torch.Tensor, got {getattr(tensor, 'shape', type(tensor))}")
    if draft_probs.shape[-1] != target_probs.shape[-1]:
        raise ValueError(
            f"draft_probs and target_probs have mismatched vocabularies: {draft_probs.shape[-1]} vs {target_probs.shape[-1]}"
        )
    batch, k, _ = draft_probs.shape
    if k < 1:
        raise ValueError(f"draft_probs must hold k >= 1 rows, got shape {tuple(draft_probs.shape)}")
    if target_probs.shape[:2] != (batch, k + 1):
        raise ValueError(f"target_probs must have shape (B, k+1, V) = ({batch}, {k + 1}, V), got {tuple(target_probs.shape)}")
    if draft_tokens.shape != (batch, k):
        raise ValueError(f"draft_tokens must have shape (B, k) = ({batch}, {k}), got {tuple(draft_tokens.shape)}")
    if draft_tokens.dtype != torch.long:
        raise ValueError(f"draft_tokens must be a long tensor, got {draft_tokens.dtype}")
    if not target_probs.is_floating_point() or not draft_probs.is_floating_point():
        raise ValueError("target_probs and draft_probs must be floating-point tensors")


def _leading_true(flags: torch.Tensor) -> torch.Tensor:
    """Number of leading True entries per row of a (B, k) bool tensor."""
    return flags.long().cumprod(dim=-1).sum(dim=-1)


def _emit(draft_tokens: torch.Tensor, n_accepted: torch.Tensor, last: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
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


def _standard(target_probs, draft_probs, draft_tokens, generator):
    batch, k, vocab = draft_probs.shape
    p_x = target_probs[:, :k].gather(-1, draft_tokens[..., None]).squeeze(-1).double()
    q_x = draft_probs.gather(-1, draft_tokens[..., None]).squeeze(-1).double()
    u = uniform(batch, (k,), generator, target_probs.device)
    n_accepted = _leading_true(u < p_x / q_x)  # p(x) = 0 gives ratio 0: never accepted
    p_row = _row(target_probs, n_accepted)
    q_row = _row(draft_probs, n_accepted.clamp(max=k - 1)) * (n_accepted < k)[:, None]  # bonus row: q = 0
    residual = (p_row - q_row).clamp_min(0)
    weights = torch.where(residual.sum(-1, keepdim=True) > 0, residual, p_row)
    last = race(weights, exponential(batch, (vocab,), generator, target_probs.device))
    return _emit(draft_tokens, n_accepted, last)


def _greedy(target_probs, draft_tokens):
    best = target_probs.argmax(dim=-1)  # (B, k+1), ties to the lowest id
    n_accepted = _leading_true(draft_tokens == best[:, :-1])
    return _emit(draft_tokens, n_accepted, best.gather(1, n_accepted[:, None]).squeeze(1))


def _sampler_match(target_probs, draft_tokens, generator):
    batch, rows, vocab = target_probs.shape
    drawn = race(target_probs, exponential(batch, (rows, vocab), generator, target_probs.device))
    n_accepted = _leading_true(drawn[:, :-1] == draft_tokens)
    return _emit(draft_tokens, n_accepted, drawn.gather(1, n_accepted[:, None]).squeeze(1))


def verify_batch(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    draft_tokens: torch.Tensor,
    generator: Generators = None,
    mode: str = "standard",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Verify one round for B rows: -> (tokens (B, k+1) long padded with -1, counts (B,) long).

    target_probs (B, k+1, V), draft_probs (B, k, V), draft_tokens (B, k).  `generator` is one
    torch.Generator (or None) for the whole batch, or one per row (each row then draws only from its
    own stream).  Values are not checked (that would sync): q(x) = 0 on a drafted token is impossible
    input.  All work stays on the tensors' device.
    """
    _check_round(target_probs, draft_probs, draft_tokens, mode)
    if mode == "greedy":
        return _greedy(target_probs, draft_tokens)
    if mode == "sampler_match":
        return _sampler_match(target_probs, draft_tokens, generator)
    return _standard(target_probs, draft_probs, draft_tokens, generator)


class TorchVerifier:
    """NumPy-facing verifier for the conformance suite: numpy in, numpy out, numpy rng the only randomness.

    Each call seeds a fresh torch.Generator from `rng.integers(2**63)`, so a fixed numpy seed fixes
    the result.  Inputs are checked with the oracle's validators (bad input -> ValueError).
    """

    def __init__(self, device: str | torch.device = "cpu", mode: str = "standard", dtype: torch.dtype = torch.float32):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        self.device = torch.device(device)
        self.mode = mode
        self.dtype = dtype

    def _generator(self, rng: np.random.Generator) -> torch.Generator:
        seed = int(validation.check_rng(rng).integers(2**63))
        return torch.Generator(device=self.device).manual_seed(seed)

    def _checked(self, target_probs, draft_probs, draft_tokens, batched: bool):
        ndim = 3 if batched else 2
        target = validation.as_prob_array(target_probs, "target_probs", ndim)
        draft = validation.as_prob_array(draft_probs, "draft_probs", ndim)
        k = validation.check_round_shapes(target, draft, batched=batched)
        shape = (draft.shape[0], k) if batched else (k,)
        tokens = validation.as_token_array(draft_tokens, "draft_tokens", shape, draft.shape[-1])
        if self.mode == "standard":
            q_x = np.take_along_axis(draft, tokens[..., None], axis=-1)
            if (q_x <= 0).any():
                raise ValueError("draft_probs gives probability 0 to a drafted token (x ~ q makes that impossible)")
        as_tensor = lambda a, dt: torch.tensor(a, dtype=dt, device=self.device)  # copies (inputs may be views)
        if not batched:
            target, draft, tokens = target[None], draft[None], tokens[None]
        return as_tensor(target, self.dtype), as_tensor(draft, self.dtype), as_tensor(tokens, torch.long)

    def verify_batch(self, target_probs, draft_probs, draft_tokens, rng) -> tuple[np.ndarray, np.ndarray]:
        """(B, k+1, V), (B, k, V), (B, k) -> (tokens (B, k+1) int64 padded with -1, counts (B,) int64)."""
        target, draft, tokens = self._checked(target_probs, draft_probs, draft_tokens, batched=True)
        out, counts = verify_batch(target, draft, tokens, self._generator(rng), self.mode)
        return out.cpu().numpy().astype(np.int64), counts.cpu().numpy().astype(np.int64)

    def verify(self, target_probs, draft_probs, draft_tokens, rng) -> list[int]:
        """One round, one sequence: (k+1, V), (k, V), (k,) -> the emitted tokens."""
        target, draft, tokens = self._checked(target_probs, draft_probs, draft_tokens, batched=False)
        out, counts = verify_batch(target, draft, tokens, self._generator(rng), self.mode)
        return out[0, : int(counts[0])].tolist()
