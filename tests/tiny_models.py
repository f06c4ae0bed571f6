"""Test-only model helpers on top of the product's builder `gpu_impl.models.tiny_llama`.

`scaled_llama` keeps the exact weights the gpu tests were written against (HF's init scale 0.02,
4 heads, 2 KV heads) and multiplies the LM head by `scale` to sharpen the logits; `tiny_llama_pair`
builds a target/draft pair with one vocabulary for the model tests.
"""

from __future__ import annotations

import torch

from exactspec.gpu_impl.models import tiny_llama

VOCAB = 96


def scaled_llama(
    seed: int = 0, layers: int = 2, hidden: int = 64, vocab: int = VOCAB, scale: float = 1.0
):
    """A random LlamaForCausalLM; `scale` sharpens its logits so greedy argmaxes are not near-ties."""
    model = tiny_llama(vocab, hidden, layers, seed=seed, n_heads=4, n_kv_heads=2, init_std=0.02)
    with torch.no_grad():
        model.lm_head.weight.mul_(scale)
    return model


def tiny_llama_pair(
    vocab_size: int = 64,
    hidden_size: int = 64,
    n_layers: int = 2,
    draft_hidden_size: int = 32,
    draft_layers: int = 1,
    seed: int = 0,
    share: float = 0.0,
):
    """(target, draft): two tiny random Llamas with the same vocabulary, from one seed.

    With ``share > 0`` the draft's embedding and LM head are ``share`` * the target's (where shapes allow:
    equal hidden sizes) plus independent noise, so the pair agrees more often than two independent models.
    """
    target = tiny_llama(vocab_size, hidden_size, n_layers, seed=seed)
    draft_heads = 4 if draft_hidden_size % 4 == 0 else 1
    draft = tiny_llama(
        vocab_size,
        draft_hidden_size,
        draft_layers,
        seed=seed + 1,
        n_heads=draft_heads,
        n_kv_heads=None,
    )
    if share and draft_hidden_size == hidden_size:
        target_params, draft_params = (
            dict(target.named_parameters()),
            dict(draft.named_parameters()),
        )
        with torch.no_grad():
            for name in ("model.embed_tokens.weight", "lm_head.weight"):
                draft_params[name].mul_(1 - share).add_(share * target_params[name])
    return target, draft
