"""The prompts file of `engine collect` and `engine certify`: JSON Lines, one prompt a line, as token ids, text or a
chat; every bad line is refused naming the file, the line and the field."""

from __future__ import annotations

import json
from pathlib import Path


def _check_messages(messages: object, where: str) -> None:
    ok = (
        isinstance(messages, list)
        and messages
        and all(
            isinstance(m, dict)
            and isinstance(m.get("role"), str)
            and isinstance(m.get("content"), str)
            for m in messages
        )
    )
    if not ok:
        raise ValueError(
            f'{where}: \'messages\' must be a non-empty list of {{"role": str, "content": str}}'
        )


def check_prompt(entry: object, where: str) -> dict:
    """One prompt entry, validated: {"prompt_id", and exactly one of "prompt_tokens": [ids], "text": str,
    "messages": [{"role", "content"}] (a chat, through the engine's own chat template)}."""
    if not isinstance(entry, dict) or not isinstance(entry.get("prompt_id"), str):
        raise ValueError(f"{where}: expected an object with a string 'prompt_id'")
    tokens, text, messages = entry.get("prompt_tokens"), entry.get("text"), entry.get("messages")
    if tokens is not None and not (
        isinstance(tokens, list)
        and tokens
        and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in tokens)
    ):
        raise ValueError(f"{where}: 'prompt_tokens' must be a non-empty list of token ids >= 0")
    if sum(x is not None for x in (tokens, text, messages)) != 1 or (
        text is not None and not isinstance(text, str)
    ):
        raise ValueError(
            f"{where}: give exactly one of 'prompt_tokens' (ids), 'text' (a string) and 'messages' "
            "(a chat)"
        )
    if messages is not None:
        _check_messages(messages, where)
    return {
        "prompt_id": entry["prompt_id"],
        "prompt_tokens": tokens,
        "text": text,
        "messages": messages,
    }


def check_prompts(entries: list, source: str) -> list[dict]:
    """A validated prompt list: at least one, prompt ids distinct."""
    prompts = [
        check_prompt(entry, f"{source}: entry {number}")
        for number, entry in enumerate(entries, start=1)
    ]
    ids = [p["prompt_id"] for p in prompts]
    if not prompts:
        raise ValueError(f"{source}: no prompts")
    if len(set(ids)) != len(ids):
        raise ValueError(
            f"{source}: prompt_id {next(i for i in ids if ids.count(i) > 1)!r} listed twice"
        )
    return prompts


def read_prompts(path: str | Path) -> list[dict]:
    """Prompts from JSON Lines: {"prompt_id", "prompt_tokens": [int]}, {"prompt_id", "text": str} or {"prompt_id",
    "messages": [...]}. Token ids are sent as they are (llama.cpp adds no BOS to a token prompt: include it if the
    model wants one); text is tokenised by the engine itself, special tokens included, as a string prompt would be;
    messages go through the engine's chat template (with the generation prompt), then its tokenizer."""
    if not Path(path).is_file():
        raise ValueError(f"prompts: no such file {path}")
    entries = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(
                    f"prompts file {path}: line {number}: not valid JSON: {error}"
                ) from None
            entries.append(check_prompt(entry, f"prompts file {path}: line {number}"))
    return check_prompts(entries, f"prompts file {path}")


__all__ = ["check_prompt", "check_prompts", "read_prompts"]
