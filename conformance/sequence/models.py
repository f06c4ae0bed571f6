"""Models the sequence-level suite supplies, and teacher forcing with the oracle's warping.

* :func:`tiny_pair` -- a target/draft pair of 1-layer random ``LlamaForCausalLM`` with a small vocabulary
  (default V = 6), fixed seeds, the LM head scaled so the next-token laws are spread but far from uniform.
  Small enough that the whole law over sequences of length <= 4 is enumerated exactly.
* :func:`pit_pair` -- a wider random pair (default V = 64) for the PIT level.
* :func:`real_pair` -- SmolLM2-135M (``gpu_impl.models.load_default_model``) as target and a layer-truncated
  view of it (``gpu_impl.drafts.early_exit.truncated_model``: the first few decoder layers, same
  embeddings and head, weights shared: a self-speculative draft) as draft.
* :func:`target_rows` -- the target's warped conditional distribution for every generated position, by
  one forward over prompt + generated tokens (teacher forcing), warped by ``reference.warping``.

Every model returned has ``generation_config.eos_token_id`` set to what the suite wants (None = no EOS):
adapters must stop after the first token equal to it (see conformance/CONTRACT.md, sequence level).
"""

from __future__ import annotations

import copy
import os
from functools import lru_cache
from typing import Any, Iterator, Sequence

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import torch

from ...gpu_impl.models import load_default_model, tiny_llama
from ...reference.warping import SamplingParams
from .cases import REAL_PROMPT_TEXT

TINY_VOCAB = 6
PIT_VOCAB = 64


def set_eos(model: Any, eos_token_id: int | None) -> Any:
    """Set the EOS the adapters must honour (generation_config and config), and a pad id so HF does not warn."""
    model.generation_config.eos_token_id = eos_token_id
    model.config.eos_token_id = eos_token_id
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = 0
    return model


def eos_of(model: Any) -> int | None:
    eos = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(eos, (list, tuple)):
        eos = eos[0] if eos else None
    return None if eos is None else int(eos)


def _tiny(vocab: int, hidden: int, layers: int, seed: int, head_scale: float) -> Any:
    model = tiny_llama(
        vocab_size=vocab, hidden_size=hidden, n_layers=layers, seed=seed, n_heads=2, n_kv_heads=1
    )
    with torch.no_grad():
        model.lm_head.weight.mul_(head_scale)
    return set_eos(model, None)


@lru_cache(maxsize=None)
def _tiny_pair_cached(vocab: int, seed: int, noise: float = 0.06) -> tuple[Any, Any]:
    """Target: 2-layer random Llama, LM head scaled by 0.6; draft: the target with every weight perturbed
    by Gaussian noise (std = 3 * noise * mean |w|), so per-token acceptance is high but far from 1."""
    target = _tiny(vocab, 16, 2, seed, 0.6)
    draft = copy.deepcopy(target)
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for param in draft.parameters():
            param.add_(
                3 * noise * param.abs().mean() * torch.randn(param.shape, generator=generator)
            )
    return target, draft


def tiny_pair(
    vocab: int = TINY_VOCAB, seed: int = 14, eos_token_id: int | None = None
) -> tuple[Any, Any]:
    """(target, draft) tiny random Llamas (V = `vocab`), EOS set as asked; shallow copies share the weights."""
    target, draft = _tiny_pair_cached(vocab, seed)
    target, draft = copy.copy(target), copy.copy(draft)
    target.generation_config = copy.deepcopy(target.generation_config)
    draft.generation_config = copy.deepcopy(draft.generation_config)
    target.config = copy.deepcopy(target.config)
    draft.config = copy.deepcopy(draft.config)
    return set_eos(target, eos_token_id), set_eos(draft, eos_token_id)


def pit_pair(
    vocab: int = PIT_VOCAB, seed: int = 14, eos_token_id: int | None = None
) -> tuple[Any, Any]:
    """(target, draft) random Llamas with a wider vocabulary, for the PIT level."""
    return tiny_pair(vocab, seed, eos_token_id)


_REAL: dict[str, Any] = {}


def real_pair(draft_layers: int = 6, dtype: str = "float32") -> tuple[Any, Any, Any]:
    """(target, draft, tokenizer): SmolLM2-135M in `dtype` and its first `draft_layers` decoder layers as a draft.

    Raises ``gpu_impl.models.ModelNotAvailableError`` when the model package is not installed.
    """
    if dtype not in _REAL:
        # transformers: only the real-model cases need it
        from ...gpu_impl.drafts.early_exit import (
            truncated_model,
        )

        target, tokenizer = load_default_model(dtype=dtype)
        _REAL[dtype] = (target, truncated_model(target, draft_layers), tokenizer)
    target, draft, tokenizer = _REAL[dtype]
    return set_eos(target, None), set_eos(draft, None), tokenizer


@torch.no_grad()
def last_logits(model: Any, prefixes: Sequence[Sequence[int]]) -> np.ndarray:
    """Float64 logits of the next token after each prefix (all prefixes the same length), shape (N, V)."""
    ids = torch.tensor([list(p) for p in prefixes], dtype=torch.long)
    return model(input_ids=ids).logits[:, -1, :].double().numpy()


@torch.no_grad()
def target_rows(
    target: Any, prompt: Sequence[int], generated: Sequence[int], sampling: SamplingParams
) -> np.ndarray:
    """Warped target distributions (len(generated), V) for each generated position, by teacher forcing."""
    if len(generated) == 0:
        return np.zeros((0, int(target.config.vocab_size)))
    return next(target_rows_many(target, prompt, [generated], sampling))[1]


SCORE_LOGITS = 1 << 22  # logits held per teacher-forced forward (16 MB of float32)


@torch.no_grad()
def target_rows_many(
    target: Any, prompt: Sequence[int], samples: Sequence[Sequence[int]], sampling: SamplingParams
) -> Iterator[tuple[int, np.ndarray]]:
    """(i, `target_rows` of samples[i]) for every non-empty sample, by one forward per group of equal-length
    samples (as many as SCORE_LOGITS allows) instead of one per sample: the same prompt and no padding, so
    each row of a group is computed from exactly the positions a lone forward would see. Order: by length."""
    vocab = int(target.config.vocab_size)
    by_length: dict[int, list[int]] = {}
    for i, s in enumerate(samples):
        if len(s):
            by_length.setdefault(len(s), []).append(i)
    for length, members in sorted(by_length.items()):
        size = max(1, SCORE_LOGITS // ((len(prompt) + length) * vocab))
        for lo in range(0, len(members), size):
            group = members[lo : lo + size]
            ids = torch.tensor(
                [list(prompt) + list(samples[i][:-1]) for i in group], dtype=torch.long
            )
            logits = target(input_ids=ids).logits[:, len(prompt) - 1 :, :].double().numpy()
            for i, rows in zip(group, logits):
                yield i, sampling.warp(rows)


def case_models(case: Any) -> tuple[Any, Any, list[tuple[int, ...]]]:
    """(target, draft, prompts) of a sequence-level case: the tiny pair (V = 6), the PIT pair (V = 64) or the
    embedded SmolLM2-135M with a 6-layer early-exit draft (its one prompt, tokenized)."""
    if case.models == "tiny":
        target, draft = tiny_pair(eos_token_id=case.eos)
        return target, draft, list(case.prompts)
    if case.models == "pit":
        target, draft = pit_pair(eos_token_id=case.eos)
        return target, draft, list(case.prompts)
    target, draft, tokenizer = real_pair(dtype=case.dtype)
    prompt = tokenizer(REAL_PROMPT_TEXT)["input_ids"]
    return target, draft, [tuple(int(t) for t in prompt)]
