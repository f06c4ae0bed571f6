"""Optimised PyTorch speculative sampling: torch warping, on-device verifier, ragged-batch generator, drafts.

The parts (README.md): `sampling/` the exact rule on device, `loop/` the generation loop, `drafts/` the
draft sources, `cost/` the cost model that picks k and the CPU kernels and threads it measures,
`heads/` training the prediction-heads draft, `cli/` the `exactspec generate` command; `models` and
`model_config` load models and read their shape.

`gpu_impl.models` (model loading) is imported only by those who need it. The names below are imported on
first use (PEP 562), so torch-free modules of the package (`cli.cli_args`, `drafts.registry`, `model_config`)
can be imported without torch: `exactspec generate --help` stays fast.
"""

import importlib

_LAZY = {
    "SpeculativeGenerator": ".loop.generator",
    "SamplingParams": "..reference.warping",
    "generate_plain": ".loop.plain",
    "GenerationResult": ".loop.stats",
    "SpecStats": ".loop.stats",
    "TorchVerifier": ".sampling.torch_verifier",
    "verify_batch": ".sampling.sampler",
    "warp_probs": ".sampling.warping",
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
