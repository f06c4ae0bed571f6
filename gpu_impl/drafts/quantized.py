"""The target itself, int8 weight-only quantized (on a deep copy), as a draft with its own KV cache.

Two backends: "int8" swaps every nn.Linear for `Int8Linear` (per-output-channel symmetric int8 weights,
works on any device); "dynamic" uses torch.ao dynamic quantization (CPU only, int8 activations too).
Measured on the 2-core CPU box (576x1536 matmul, one row): fp32 130 us, ao dynamic 260 us, int8 pack
3.7 ms, dequantise-then-matmul 2.7 ms -- so on CPU quantization buys no speed; it models a cheaper,
slightly different draft.  On GPU the win depends on a fused int8 kernel (e.g. torch.compile).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from .model_draft import ModelDraft


class Int8Linear(nn.Module):
    """y = (x @ W_int8^T) * scale + bias, W_int8 = round(W / scale) per output row."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        weight = linear.weight.detach().float()
        scale = weight.abs().amax(dim=1).clamp_min(1e-12) / 127.0
        self.register_buffer("weight_int8", torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8))
        self.register_buffer("scale", scale.to(linear.weight.dtype))
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone(), requires_grad=False)
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
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


def quantized_copy(target: nn.Module, backend: str = "int8") -> nn.Module:
    """A deep copy of `target` with weight-only int8 Linears ("int8") or ao dynamic quantization ("dynamic")."""
    if backend not in ("int8", "dynamic"):
        raise ValueError(f"backend must be 'int8' or 'dynamic', got {backend!r}")
    clone = copy.deepcopy(target).eval()
    if backend == "dynamic":
        if next(target.parameters()).device.type != "cpu":
            raise ValueError("backend='dynamic' (torch.ao dynamic quantization) works on CPU only")
        return torch.ao.quantization.quantize_dynamic(clone, {nn.Linear}, dtype=torch.qint8)
    return quantize_int8(clone)


class QuantizedSelfDraft(ModelDraft):
    """Draft = int8 copy of the target; same vocabulary by construction."""

    def __init__(self, target: nn.Module, backend: str = "int8", tokenizer=None):
        super().__init__(quantized_copy(target, backend), tokenizer)
