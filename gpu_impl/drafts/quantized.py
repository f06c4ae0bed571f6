"""The target itself, int8 weight-only quantized (on a deep copy), as a draft with its own KV cache.

Two backends: "int8" swaps every nn.Linear for `Int8Linear` (per-output-channel symmetric int8 weights,
works on any device); "dynamic" uses torch.ao dynamic quantization (CPU only, int8 activations too).
"auto" (default) picks "dynamic" on CPU, where it measured fastest
(benchmarks/README.md#cpu-kernels-threads-and-the-quantized-draft), and "int8" elsewhere.
Caveat: "dynamic" quantizes activations with one scale per forward input, so a row's q depends slightly
on its batch-mates; the rule stays exact (q is what was sampled from) but batch == lone-run
reproducibility holds only with "int8".  On GPU the int8 path only pays off with a fused int8 kernel
(e.g. torch.compile).
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

from .model_draft import ModelDraft


#: torch's CPU weight-only int8 matmul (x @ (W_int8 * scale)^T without materialising a float weight), where this
#: torch has it; else the dequantising fallback below.
FUSED_INT8 = getattr(torch.ops.aten, "_weight_int8pack_mm", None)
FUSED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


class Int8Linear(nn.Module):
    """y = (x @ W_int8^T) * scale + bias, W_int8 = round(W / scale) per output row."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        weight = linear.weight.detach().float()
        scale = weight.abs().amax(dim=1).clamp_min(1e-12) / 127.0
        self.register_buffer(
            "weight_int8", torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8)
        )
        self.register_buffer("scale", scale.to(linear.weight.dtype))
        self.bias = (
            None
            if linear.bias is None
            else nn.Parameter(linear.bias.detach().clone(), requires_grad=False)
        )
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "cpu" and x.dtype in FUSED_DTYPES and FUSED_INT8 is not None:
            flat = x.reshape(
                -1, x.shape[-1]
            ).contiguous()  # torch's CPU kernel reads the int8 weight directly
            y = FUSED_INT8(flat, self.weight_int8, self.scale.to(x.dtype)).reshape(
                *x.shape[:-1], self.out_features
            )
        else:
            y = nn.functional.linear(x, self.weight_int8.to(x.dtype)) * self.scale.to(x.dtype)
        return y if self.bias is None else y + self.bias


def quantize_int8(model: nn.Module) -> nn.Module:
    """Replace every nn.Linear of `model` (in place) by an Int8Linear."""
    for name, child in list(model.named_children()):
        if isinstance(child, nn.Linear):
            setattr(model, name, Int8Linear(child))
        else:
            quantize_int8(child)
    return model


def quantized_copy(target: nn.Module, backend: str = "auto") -> nn.Module:
    """A deep copy of `target` with weight-only int8 Linears ("int8") or ao dynamic quantization ("dynamic")."""
    if backend not in ("auto", "int8", "dynamic"):
        raise ValueError(f"backend must be 'auto', 'int8' or 'dynamic', got {backend!r}")
    on_cpu = next(target.parameters()).device.type == "cpu"
    if backend == "auto":
        backend = (
            "dynamic" if on_cpu and hasattr(torch.ao.quantization, "quantize_dynamic") else "int8"
        )
    clone = copy.deepcopy(target).eval()
    if backend == "dynamic":
        if not on_cpu:
            raise ValueError("backend='dynamic' (torch.ao dynamic quantization) works on CPU only")
        with warnings.catch_warnings():  # torch.ao announces its migration to torchao on every call
            warnings.simplefilter("ignore")
            return torch.ao.quantization.quantize_dynamic(clone, {nn.Linear}, dtype=torch.qint8)
    return quantize_int8(clone)


class QuantizedSelfDraft(ModelDraft):
    """Draft = int8 copy of the target; same vocabulary by construction."""

    def __init__(
        self, target: nn.Module, backend: str = "auto", tokenizer=None, cpu_matmul: str = "auto"
    ):
        super().__init__(quantized_copy(target, backend), tokenizer, cpu_matmul)
