"""The target's first n decoder layers (+ its final norm and lm_head) as a draft, weights shared."""

from __future__ import annotations

import copy

import torch

from .model_draft import ModelDraft


def truncated_model(target: torch.nn.Module, n_layers: int) -> torch.nn.Module:
    """A model of target's class running only its first `n_layers` layers, sharing all weights.

    Built on the meta device (no allocation), then every submodule is replaced by the target's own.
    Works for decoder-only models laid out as `.model.{embed_tokens, layers, norm, rotary_emb}` + `.lm_head`.
    """
    inner = getattr(target, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None or not hasattr(target, "lm_head"):
        raise ValueError(
            "target must be a causal LM with .model.layers and .lm_head (Llama-style) for EarlyExitDraft"
        )
    if (
        isinstance(n_layers, bool)
        or not isinstance(n_layers, int)
        or not 1 <= n_layers <= len(layers)
    ):
        raise ValueError(f"n_layers must be an integer in [1, {len(layers)}], got {n_layers!r}")
    config = copy.deepcopy(target.config)
    config.num_hidden_layers = n_layers
    if getattr(config, "layer_types", None) is not None:
        config.layer_types = list(config.layer_types)[:n_layers]
    with torch.device("meta"):
        shallow = type(target)(config)
    for name, module in inner.named_children():
        setattr(
            shallow.model,
            name,
            torch.nn.ModuleList(list(layers)[:n_layers]) if name == "layers" else module,
        )
    shallow.lm_head = target.lm_head
    leftover = [n for n, t in [*shallow.named_parameters(), *shallow.named_buffers()] if t.is_meta]
    if leftover:
        raise ValueError(f"EarlyExitDraft cannot share these target tensors: {leftover[:3]}")
    return shallow.eval()


class EarlyExitDraft(ModelDraft):
    """Draft = target truncated after `n_layers` layers, with its own KV cache."""

    def __init__(
        self, target: torch.nn.Module, n_layers: int, tokenizer=None, cpu_matmul: str = "auto"
    ):
        super().__init__(truncated_model(target, n_layers), tokenizer, cpu_matmul)
