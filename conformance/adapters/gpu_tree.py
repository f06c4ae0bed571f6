"""Tree-level adapters for exactspec's batched torch tree verifier (`gpu_impl.sampling.tree_sampler`).

NumPy in, NumPy out, the suite's rng the only randomness: each call seeds one torch.Generator from
`rng.integers(2**63)` (as `gpu_impl.sampling.torch_verifier.TorchVerifier` does), so a fixed numpy seed fixes the
result.  Trees are `exactspec.reference.trees.DraftTree`s, validated on construction by the oracle
(parents before children, drafted tokens with q > 0, distinct siblings without replacement); a batch
is padded to its largest tree with masks and verified in one call on the device.
"""

from __future__ import annotations

from ..rule.harness import ImplUnavailable
from ...reference import validation
from ...reference.trees import DraftTree


def _checked_trees(trees) -> list[DraftTree]:
    if not isinstance(trees, (list, tuple)) or not trees:
        raise ValueError(f"trees must be a non-empty list of DraftTree, got {type(trees).__name__}")
    for index, tree in enumerate(trees):
        if not isinstance(tree, DraftTree):
            raise ValueError(f"trees[{index}] must be a DraftTree, got {type(tree).__name__}")
    return list(trees)


class TorchTreeVerifier:
    """The standard tree rule (with or without replacement, per tree) on a torch device."""

    def __init__(self, device="cpu", dtype_name: str = "float32"):
        try:
            import torch

            from ...gpu_impl.sampling import tree_sampler
        except ImportError as error:  # pragma: no cover - depends on the install
            raise ImplUnavailable(
                f"exactspec.gpu_impl.sampling.tree_sampler cannot be imported: {error}"
            ) from error
        if dtype_name not in ("float32", "float64"):
            raise ValueError(f"dtype_name must be 'float32' or 'float64', got {dtype_name!r}")
        self._torch, self._sampler = torch, tree_sampler
        self.device = torch.device(device)
        self.dtype = getattr(torch, dtype_name)

    def verify_tree_batch(self, trees, rng) -> list[list[int]]:
        """One round per tree, all trees in one padded device call."""
        trees = _checked_trees(trees)
        seed = int(validation.check_rng(rng).integers(2**63))
        generator = self._torch.Generator(device=self.device).manual_seed(seed)
        rows = [(t.parent, t.tokens, t.target_probs, t.draft_probs, t.replacement) for t in trees]
        parent, tokens, target, draft, mask, replacement = self._sampler.pad_trees(
            rows, self.device, self.dtype
        )
        out, counts = self._sampler.verify_tree_batch(
            parent, tokens, target, draft, mask, replacement, generator=generator
        )
        out, counts = out.cpu().tolist(), counts.cpu().tolist()
        return [row[:count] for row, count in zip(out, counts)]

    def verify_tree(self, tree, rng) -> list[int]:
        """One round on one tree: the accepted path's tokens, then the correction or bonus token."""
        if not isinstance(tree, DraftTree):
            raise ValueError(f"tree must be a DraftTree, got {type(tree).__name__}")
        return self.verify_tree_batch([tree], rng)[0]


def TreeTorchCPU():
    """gpu_impl tree verifier on the CPU (float32 rows, the production dtype)."""
    return TorchTreeVerifier("cpu")


def TreeTorchCPUFloat64():
    return TorchTreeVerifier("cpu", "float64")


def TreeTorchCUDA():
    """gpu_impl tree verifier on the first CUDA device (unavailable when there is none)."""
    try:
        import torch
    except ImportError as error:  # pragma: no cover
        raise ImplUnavailable(f"torch cannot be imported: {error}") from error
    if not torch.cuda.is_available():
        raise ImplUnavailable("torch.cuda.is_available() is False: no CUDA device to certify on")
    return TorchTreeVerifier("cuda")
