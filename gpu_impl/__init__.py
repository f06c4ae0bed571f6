"""Optimised PyTorch speculative sampling: torch warping, on-device verifier, ragged-batch generator, drafts.

`gpu_impl.models` (model loading) is imported only by those who need it.
"""

from exactspec.reference.warping import SamplingParams

from .generator import SpeculativeGenerator
from .plain import generate_plain
from .sampler import TorchVerifier, verify_batch
from .stats import GenerationResult, SpecStats
from .warping import warp_probs

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
