"""Optimised PyTorch speculative sampling: torch warping, on-device verifier, ragged-batch generator, drafts.

`gpu_impl.models` (model loading) is imported only by those who need it. The names below are imported on
first use (PEP 562), so torch-free modules of the package (`cli_args`, `drafts.registry`, `model_config`)
can be imported without torch: `exactspec generate --help` stays fast.
"""

import importlib

_LAZY = {
    "SpeculativeGenerator": ".generator",
    "SamplingParams": "..reference.warping",
    "generate_plain": ".plain",
    "GenerationResult": ".stats",
    "SpecStats": ".stats",
    "TorchVerifier": ".sampler",
    "verify_batch": ".sampler",
    "warp_probs": ".warping",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
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
