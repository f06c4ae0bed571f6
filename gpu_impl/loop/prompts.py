"""Checking generation arguments and collecting each row's new tokens (EOS / max_new_tokens cuts, streaming)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


def check_prompt(input_ids, attention_mask, device) -> tuple[torch.Tensor, torch.Tensor | None]:
    """-> (ids (B, T) long on `device`, valid (B, T) bool or None when every slot is real).

    Padding must be on the left (the last column is each row's latest real token).
    """
    if (
        not isinstance(input_ids, torch.Tensor)
        or input_ids.ndim != 2
        or input_ids.shape[1] < 1
        or input_ids.shape[0] < 1
    ):
        raise ValueError(
            f"input_ids must be a (B, T) tensor with B, T >= 1, got {getattr(input_ids, 'shape', input_ids)!r}"
        )
    if input_ids.dtype not in (torch.long, torch.int32, torch.int64):
        raise ValueError(f"input_ids must hold integer token ids, got {input_ids.dtype}")
    ids = input_ids.to(device=device, dtype=torch.long)
    if attention_mask is None:
        return ids, None
    if not isinstance(attention_mask, torch.Tensor) or attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"attention_mask must be a tensor shaped like input_ids {tuple(input_ids.shape)}"
        )
    valid = attention_mask.to(device) != 0
    if not bool(valid[:, -1].all()):
        raise ValueError(
            "attention_mask must be left-padded: the last position of every row must be a real token"
        )
    return ids, (None if bool(valid.all()) else valid)


def check_limits(max_new_tokens, eos_token_id) -> frozenset[int]:
    """Validate the stopping arguments; -> the set of EOS ids (empty: no EOS)."""
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, int)
        or max_new_tokens < 0
    ):
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    if eos_token_id is None:
        return frozenset()
    ids = (
        list(eos_token_id)
        if isinstance(eos_token_id, (list, tuple, set, frozenset))
        else [eos_token_id]
    )
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids):
        raise ValueError(
            f"eos_token_id must be None, a token id >= 0 or a list of them, got {eos_token_id!r}"
        )
    return frozenset(ids)


def row_seeds(seed: int | Sequence[int], batch: int) -> list[int]:
    """Row b uses seed + b (so row b of a batch equals a lone run with seed + b), or seed[b] if a list."""
    if isinstance(seed, (list, tuple)):
        if len(seed) != batch:
            raise ValueError(f"seed must be an int or one int per row ({batch}), got {len(seed)}")
        return [int(s) for s in seed]
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int or a list of ints, got {seed!r}")
    return [seed + b for b in range(batch)]


class TokenCollector:
    """Host-side new tokens per row, cut after EOS (inclusive) and at max_new_tokens, streamed as they come."""

    def __init__(
        self, batch: int, max_new_tokens: int, eos_ids: frozenset[int], on_tokens: Callable | None
    ):
        self.sequences: list[list[int]] = [[] for _ in range(batch)]
        self.done = [max_new_tokens == 0] * batch
        self.max_new_tokens = max_new_tokens
        self.eos_ids = eos_ids
        self.on_tokens = on_tokens

    @property
    def all_done(self) -> bool:
        return all(self.done)

    def add(self, row: int, tokens: list[int]) -> None:
        """Append `tokens` to an unfinished row, cutting where it ends."""
        if self.done[row] or not tokens:
            return
        room = self.max_new_tokens - len(self.sequences[row])
        tokens = tokens[:room]
        ends = [i for i, token in enumerate(tokens) if token in self.eos_ids]
        if ends:
            tokens = tokens[: ends[0] + 1]
            self.done[row] = True
        self.sequences[row].extend(tokens)
        if len(self.sequences[row]) >= self.max_new_tokens:
            self.done[row] = True
        if self.on_tokens is not None and tokens:
            self.on_tokens(row, tokens)


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask) (B, T) long of token-id rows, left-padded with `pad_id` to the longest."""
    if not rows or any(len(row) < 1 for row in rows):
        raise ValueError("left_pad needs at least one row and no empty row")
    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, width - len(row) :] = torch.as_tensor(list(row), dtype=torch.long)
        mask[i, width - len(row) :] = 1
    return ids, mask
