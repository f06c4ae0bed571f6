"""`TorchVerifier`: `sampler.verify_batch` behind a NumPy interface, the conformance suite's adapter onto it.

A per-round run of the suite calls `verify` once per round, ~20,000 times a case, so the fixed cost of a
call is most of what that run costs.  It is kept small without weakening a check: well-formed input
passes the oracle's checks in fewer NumPy passes (anything the quick test does not clear goes to the
oracle's own validators, which raise the same ValueErrors as before), each array is copied once, and the
round runs under `torch.inference_mode` (no autograd bookkeeping on its small tensor ops).
"""

from __future__ import annotations

import numpy as np
import torch

from exactspec.reference import validation

from .categorical import method_for

_NUMPY_DTYPE = {torch.float32: np.float32, torch.float64: np.float64}


def _probs(array, name: str, ndim: int) -> np.ndarray:
    """`array` checked as `validation.as_prob_array` checks it: two reductions clear a well-formed float64
    array (the minimum is NaN, or below 0, on any NaN, -inf or negative entry; a row sum off 1 by more than
    the tolerance, +inf or NaN fails the sum test); anything else gets the oracle's validator and its error."""
    if type(array) is np.ndarray and array.dtype == np.float64 and array.ndim == ndim and array.size:
        if array.min() >= 0 and np.abs(array.sum(axis=-1) - 1.0).max() <= validation.PROB_SUM_TOL:
            return array
    return validation.as_prob_array(array, name, ndim)


def _tokens(tokens, shape: tuple[int, ...], vocab: int) -> np.ndarray:
    """Draft tokens checked as `validation.as_token_array` checks them (int64 input of the right shape and
    range passes as is; anything else gets the oracle's validator and its error)."""
    if type(tokens) is np.ndarray and tokens.dtype == np.int64 and tokens.shape == shape and tokens.size:
        if tokens.min() >= 0 and tokens.max() < vocab:
            return tokens
    return validation.as_token_array(tokens, "draft_tokens", shape, vocab)


class TorchVerifier:
    """NumPy-facing verifier for the conformance suite: numpy in, numpy out, numpy rng the only randomness.

    Each call seeds a torch.Generator from `rng.integers(2**63)`, so a fixed numpy seed fixes the result.
    Inputs are checked as the oracle's validators check them (bad input -> ValueError).
    """

    def __init__(self, device: str | torch.device = "cpu", mode: str = "standard", dtype: torch.dtype = torch.float32,
                 method: str = "auto"):
        from .sampler import MODES, verify_batch  # here, not at the top: sampler re-exports this class

        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if dtype not in _NUMPY_DTYPE:
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        self.device = torch.device(device)
        self.mode = mode
        self.dtype = dtype
        self.method = method_for(self.device, method)
        self._verify_batch = verify_batch

    def _generator(self, rng: np.random.Generator) -> torch.Generator:
        seed = int(validation.check_rng(rng).integers(2**63))
        return torch.Generator(device=self.device).manual_seed(seed)

    def _tensor(self, array: np.ndarray, dtype) -> torch.Tensor:
        """A contiguous torch copy of `array` on the device (astype always copies: inputs may be read-only views)."""
        tensor = torch.from_numpy(array.astype(dtype, order="C"))
        return tensor if self.device.type == "cpu" else tensor.to(self.device)

    def _checked(self, target_probs, draft_probs, draft_tokens, batched: bool):
        ndim = 3 if batched else 2
        target = _probs(target_probs, "target_probs", ndim)
        draft = _probs(draft_probs, "draft_probs", ndim)
        k = validation.check_round_shapes(target, draft, batched=batched)
        tokens = _tokens(draft_tokens, (draft.shape[0], k) if batched else (k,), draft.shape[-1])
        if self.mode == "standard":
            q_x = np.take_along_axis(draft, tokens[..., None], axis=-1) if batched else draft[np.arange(k), tokens]
            if (q_x <= 0).any():
                raise ValueError("draft_probs gives probability 0 to a drafted token (x ~ q makes that impossible)")
        if not batched:
            target, draft, tokens = target[None], draft[None], tokens[None]
        floats = _NUMPY_DTYPE[self.dtype]
        return self._tensor(target, floats), self._tensor(draft, floats), self._tensor(tokens, np.int64)

    def _round(self, target_probs, draft_probs, draft_tokens, rng, batched: bool):
        target, draft, tokens = self._checked(target_probs, draft_probs, draft_tokens, batched)
        generator = self._generator(rng)
        with torch.inference_mode():
            return self._verify_batch(target, draft, tokens, generator, self.mode, self.method)

    def verify_batch(self, target_probs, draft_probs, draft_tokens, rng) -> tuple[np.ndarray, np.ndarray]:
        """(B, k+1, V), (B, k, V), (B, k) -> (tokens (B, k+1) int64 padded with -1, counts (B,) int64)."""
        out, counts = self._round(target_probs, draft_probs, draft_tokens, rng, batched=True)
        return out.cpu().numpy().astype(np.int64), counts.cpu().numpy().astype(np.int64)

    def verify(self, target_probs, draft_probs, draft_tokens, rng) -> list[int]:
        """One round, one sequence: (k+1, V), (k, V), (k,) -> the emitted tokens."""
        out, counts = self._round(target_probs, draft_probs, draft_tokens, rng, batched=False)
        return out[0].tolist()[: counts.item()]
