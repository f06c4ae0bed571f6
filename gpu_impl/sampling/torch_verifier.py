"""`TorchVerifier`: `sampler.verify_batch` behind a NumPy interface, the conformance suite's adapter onto it.

A per-round run of the suite calls `verify` once per round, ~20,000 times a case, so the fixed cost of a
call is most of what that run costs.  It is kept small without weakening a check: the oracle's own
validators (which clear well-formed rows in two NumPy passes), each array copied once, a one-row sampler
path (`sampler._standard_one_row`), and `torch.inference_mode` (no autograd bookkeeping on small ops).
"""

from __future__ import annotations

import numpy as np
import torch

from ...reference import validation
from .categorical import method_for
from .sampler import MODES, verify_batch

_NUMPY_DTYPE = {torch.float32: np.float32, torch.float64: np.float64}


class TorchVerifier:
    """NumPy-facing verifier for the conformance suite: numpy in, numpy out, numpy rng the only randomness.

    Each call seeds a torch.Generator from `rng.integers(2**63)`, so a fixed numpy seed fixes the result.
    Inputs are checked as the oracle's validators check them (bad input -> ValueError).
    """

    def __init__(
        self,
        device: str | torch.device = "cpu",
        mode: str = "standard",
        dtype: torch.dtype = torch.float32,
        method: str = "auto",
    ):
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
        target = validation.as_prob_array(target_probs, "target_probs", ndim)
        draft = validation.as_prob_array(draft_probs, "draft_probs", ndim)
        k = validation.check_round_shapes(target, draft, batched=batched)
        tokens = validation.as_token_array(
            draft_tokens, "draft_tokens", (draft.shape[0], k) if batched else (k,), draft.shape[-1]
        )
        if self.mode == "standard":
            q_x = (
                np.take_along_axis(draft, tokens[..., None], axis=-1)
                if batched
                else draft[np.arange(k), tokens]
            )
            if (q_x <= 0).any():
                raise ValueError(
                    "draft_probs gives probability 0 to a drafted token (x ~ q makes that impossible)"
                )
        if not batched:
            target, draft, tokens = target[None], draft[None], tokens[None]
        floats = _NUMPY_DTYPE[self.dtype]
        return (
            self._tensor(target, floats),
            self._tensor(draft, floats),
            self._tensor(tokens, np.int64),
        )

    def _round(self, target_probs, draft_probs, draft_tokens, rng, batched: bool):
        target, draft, tokens = self._checked(target_probs, draft_probs, draft_tokens, batched)
        generator = self._generator(rng)
        with torch.inference_mode():
            return self._verify_batch(target, draft, tokens, generator, self.mode, self.method)

    def verify_batch(
        self, target_probs, draft_probs, draft_tokens, rng
    ) -> tuple[np.ndarray, np.ndarray]:
        """(B, k+1, V), (B, k, V), (B, k) -> (tokens (B, k+1) int64 padded with -1, counts (B,) int64)."""
        out, counts = self._round(target_probs, draft_probs, draft_tokens, rng, batched=True)
        return out.cpu().numpy().astype(np.int64), counts.cpu().numpy().astype(np.int64)

    def verify(self, target_probs, draft_probs, draft_tokens, rng) -> list[int]:
        """One round, one sequence: (k+1, V), (k, V), (k,) -> the emitted tokens."""
        out, counts = self._round(target_probs, draft_probs, draft_tokens, rng, batched=False)
        return out[0].tolist()[: counts.item()]
