"""Adapters for exactspec's PyTorch implementation (`gpu_impl.sampling.torch_verifier.TorchVerifier`).

Factories (zero-argument callables) so that `--impl conformance.adapters.gpu_impl:TorchCUDA` reports
"unavailable" (a skip with the reason) on a machine without CUDA instead of failing at import. The
verifier copies its inputs with NumPy before torch sees them, so the suite's read-only views raise no
torch warning and it is handed to the suite as is (no wrapper: one Python frame less per round).
"""

from ..rule.harness import ImplUnavailable


def _verifier(device: str, mode: str = "standard", dtype: str = "float32", method: str = "auto"):
    try:
        import torch

        from ...gpu_impl.sampling.torch_verifier import TorchVerifier
    except ImportError as error:  # pragma: no cover - depends on the checkout
        raise ImplUnavailable(
            f"exactspec.gpu_impl.sampling.torch_verifier.TorchVerifier cannot be imported: {error}"
        ) from error
    if device == "cuda" and not torch.cuda.is_available():
        raise ImplUnavailable("torch.cuda.is_available() is False: no CUDA device to certify on")
    return TorchVerifier(device=device, mode=mode, dtype=getattr(torch, dtype), method=method)


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
