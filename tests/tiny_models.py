"""Tiny random Llama models for the gpu_impl tests (a fixed torch seed; `scale` sharpens the logits).

The library's own builder is `gpu_impl.models.tiny_llama`; this one keeps the exact weights the gpu tests were
written against."""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB = 96


def tiny_llama(seed: int = 0, layers: int = 2, hidden: int = 64, vocab: int = VOCAB, scale: float = 1.0):
    """A random LlamaForCausalLM; `scale` sharpens its logits so greedy argmaxes are not near-ties."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(scale)
    return model
