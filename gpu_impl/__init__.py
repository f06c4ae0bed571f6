"""Optimised PyTorch speculative sampling: torch warping, on-device verifier, ragged-batch generator, drafts.

`gpu_impl.models` (model loading) is imported only by those who need it. The names below are imported on
first use (PEP 562), so torch-free modules of the package (`cli_args`, `drafts.registry`, `model_config`)
can be imported without torch: `exactspec generate --help` stays fast.
"""

import importlib

_LAZY = {
    "SpeculativeGenerator": "exactspec.gpu_impl.generator",
    "SamplingParams": "exactspec.reference.warping",
    "generate_plain": "exactspec.gpu_impl.plain",
    "GenerationResult": "exactspec.gpu_impl.stats",
    "SpecStats": "exactspec.gpu_impl.stats",
    "TorchVerifier": "exactspec.gpu_impl.sampler",
    "verify_batch": "exactspec.gpu_impl.sampler",
    "warp_probs": "exactspec.gpu_impl.warping",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "SpeculativeGenerator",
    "SamplingParams",
    "generate_plain",
    "GenerationResult",
    "SpecStats",
    "TorchVerifier",
    "verify_batch",
    "warp_probs",
]
