"""Adapters for exactspec's PyTorch implementation (`gpu_impl.sampler.TorchVerifier`).

Factories (zero-argument callables) so that `--impl conformance.adapters.gpu_impl:TorchCUDA` reports
"unavailable" (a skip with the reason) on a machine without CUDA instead of failing at import.
"""

import warnings

from exactspec.conformance.harness import ImplUnavailable


class _Quiet:
    """Forwards to TorchVerifier, silencing torch's 'non-writable NumPy array' warning (the suite's
    inputs are read-only views on purpose; torch only reads them)."""

    def __init__(self, verifier):
        self._v = verifier

    def verify(self, target_probs, draft_probs, draft_tokens, rng):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            return self._v.verify(target_probs, draft_probs, draft_tokens, rng)

    def verify_batch(self, target_probs, draft_probs, draft_tokens, rng):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            return self._v.verify_batch(target_probs, draft_probs, draft_tokens, rng)


def _verifier(device: str, mode: str = "standard", dtype: str = "float32", method: str = "auto"):
    try:
        import torch

        from exactspec.gpu_impl.sampler import TorchVerifier
    except ImportError as error:  # pragma: no cover - depends on the checkout
        raise ImplUnavailable(f"exactspec.gpu_impl.sampler.TorchVerifier cannot be imported: {error}") from error
    if device == "cuda" and not torch.cuda.is_available():
        raise ImplUnavailable("torch.cuda.is_available() is False: no CUDA device to certify on")
    return _Quiet(TorchVerifier(device=device, mode=mode, dtype=getattr(torch, dtype), method=method))


def TorchCPU():
    """gpu_impl standard rule on the CPU (float32 arithmetic, the production dtype; blocked inverse CDF, the CPU default)."""
    return _verifier("cpu")


def TorchCPURace():
    """gpu_impl standard rule on the CPU with the exponential race for the final token (the GPU default)."""
    return _verifier("cpu", method="race")


def TorchCUDA():
    """gpu_impl standard rule on the first CUDA device (exponential race, the CUDA default; skipped without CUDA)."""
    return _verifier("cuda")


def TorchCUDAInverseCDF():
    """gpu_impl standard rule on the first CUDA device with the blocked inverse CDF (skipped without CUDA)."""
    return _verifier("cuda", method="inverse_cdf")


def TorchCPUFloat64():
    return _verifier("cpu", dtype="float64")


def TorchCPUSamplerMatch():
    """gpu_impl's sampler-match mode: exact, but accepts less than the standard rule."""
    return _verifier("cpu", mode="sampler_match")
