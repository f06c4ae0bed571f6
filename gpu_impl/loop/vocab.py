"""Refuse a target/draft pair that does not share one vocabulary: the rule compares p and q token by token."""

from __future__ import annotations

import torch


def logit_width(model: torch.nn.Module) -> int:
    """Number of logits the model emits per position (the lm_head width, else config.vocab_size)."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    width = getattr(head, "out_features", None)
    return int(width) if width is not None else int(model.config.vocab_size)


def check_same_vocabulary(target, draft, target_tokenizer=None, draft_tokenizer=None) -> None:
    """ValueError unless config.vocab_size, logit widths and (when both given) tokenizer vocabularies agree."""
    t_size, d_size = (
        getattr(target.config, "vocab_size", None),
        getattr(draft.config, "vocab_size", None),
    )
    if t_size != d_size:
        raise ValueError(
            f"draft and target have different vocab_size: draft {d_size} vs target {t_size}"
        )
    if logit_width(target) != logit_width(draft):
        raise ValueError(
            f"draft and target emit different logit widths: {logit_width(draft)} vs {logit_width(target)}"
        )
    if target_tokenizer is not None and draft_tokenizer is not None:
        if target_tokenizer.get_vocab() != draft_tokenizer.get_vocab():
            raise ValueError(
                "draft_tokenizer and target_tokenizer have different vocabularies (token -> id maps differ)"
            )
