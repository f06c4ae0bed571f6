"""Offline training text for the prediction heads: what ships with this Python, and what the model writes itself.

Three sources, nothing downloaded, every choice deterministic (sorted file lists, a seeded shuffle):
* the standard library's source files (code, docstrings, comments), under ``sysconfig``'s stdlib path;
* the documentation that installed packages ship (``*.dist-info/METADATA``: their README, in Markdown or
  reST), under site-packages;
* chat replies the target generates itself at temperature 0.7 from a few seed prompts (the distribution
  a chat model drafts on); the seed prompts share nothing with the benchmark's prompt families.
"""

from __future__ import annotations

import random
import sysconfig
from pathlib import Path
from typing import Any

import torch

from ...reference.warping import SamplingParams
from ..loop.plain import generate_plain

SEED_PROMPTS = [
    "Write a Python function that checks whether a string is a palindrome, with a docstring and tests.",
    "Explain how a hash table works and when it is slower than a list.",
    "Give me a recipe for a simple vegetable soup, step by step.",
    "What is the difference between a process and a thread?",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "List five tips for learning a new language and explain each one.",
    "Write a JavaScript function that debounces another function, and explain it.",
    "Explain photosynthesis to a ten-year-old.",
    "Write an email to a colleague asking to move a meeting to Thursday.",
    "How do I read a CSV file in Python and compute the average of one column?",
    "Describe the water cycle in a few paragraphs.",
    "Write a SQL query that finds the three customers with the largest total orders, and explain it.",
    "What are the pros and cons of electric cars?",
    "Rewrite this sentence more formally: we gotta ship the thing by friday or the boss will be mad.",
    "Write a Python class for a bank account with deposit, withdraw and a balance check.",
    "Explain what a binary search is and write it in Python.",
]


def _read_files(paths: list[Path], max_chars: int, seed: int) -> list[str]:
    """Texts of `paths` in a seeded order until `max_chars` characters are read (unreadable files skipped)."""
    order = sorted(paths)
    random.Random(seed).shuffle(order)
    texts, total = [], 0
    for path in order:
        if total >= max_chars:
            break
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        text = text[: max_chars - total]
        if len(text) > 200:
            texts.append(text)
            total += len(text)
    return texts


def stdlib_sources(max_chars: int, seed: int = 0) -> list[str]:
    """Standard-library .py files (tests and idlelib left out) up to `max_chars` characters."""
    root = Path(sysconfig.get_paths()["stdlib"])
    skip = ("test", "tests", "idlelib", "site-packages", "lib2to3")
    paths = [p for p in root.rglob("*.py") if not set(p.relative_to(root).parts) & set(skip)]
    return _read_files(paths, max_chars, seed)


def package_docs(max_chars: int, seed: int = 0) -> list[str]:
    """The long descriptions (READMEs) of installed packages' METADATA files, up to `max_chars` characters."""
    root = Path(sysconfig.get_paths()["purelib"])
    texts = []
    for text in _read_files(list(root.glob("*.dist-info/METADATA")), 4 * max_chars, seed):
        body = text.split("\n\n", 1)[1] if "\n\n" in text else ""  # drop the RFC 822 header block
        if len(body) > 500:
            texts.append(body)
    out, total = [], 0
    for body in texts:
        if total >= max_chars:
            break
        out.append(body[: max_chars - total])
        total += len(out[-1])
    return out


def encode_texts(tokenizer: Any, texts: list[str], max_tokens: int) -> list[list[int]]:
    """Token ids of each text (no special tokens), stopping at `max_tokens` in all."""
    rows, total = [], 0
    for text in texts:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"][: max_tokens - total]
        if ids:
            rows.append(list(ids))
            total += len(ids)
        if total >= max_tokens:
            break
    return rows


@torch.inference_mode()
def self_generated(
    target: Any,
    tokenizer: Any,
    max_tokens: int,
    reply_tokens: int = 128,
    seed: int = 0,
    batch: int = 8,
) -> list[list[int]]:
    """Chat-formatted prompt + the target's own reply (T = 0.7) for the seed prompts, until `max_tokens` reply tokens."""
    rows: list[list[int]] = []
    total, round_index = 0, 0
    while total < max_tokens:
        prompts = [
            SEED_PROMPTS[(round_index * batch + i) % len(SEED_PROMPTS)] for i in range(batch)
        ]
        encoded = [
            tokenizer.apply_chat_template(
                [{"role": "user", "content": p}], add_generation_prompt=True
            )
            for p in prompts
        ]
        encoded = [
            list(e["input_ids"]) if isinstance(e, dict) or hasattr(e, "keys") else list(e)
            for e in encoded
        ]
        width = max(map(len, encoded))
        ids = torch.tensor([[0] * (width - len(e)) + e for e in encoded])
        mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded])
        # training text: speed over bits
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=ids.device.type == "cpu"):
            result = generate_plain(
                target,
                ids,
                reply_tokens,
                SamplingParams(0.7),
                seed=seed + 1000 * round_index,
                eos_token_id=tokenizer.eos_token_id,
                attention_mask=mask,
                cpu_matmul="stock",
            )
        for prompt, reply in zip(encoded, result.sequences):
            rows.append(prompt + list(reply))
            total += len(reply)
        round_index += 1
    return rows


def windows(rows: list[list[int]], length: int) -> torch.Tensor:
    """Non-overlapping windows of `length` tokens cut from every row (the tail shorter than `length` dropped)."""
    cut = [row[i : i + length] for row in rows for i in range(0, len(row) - length + 1, length)]
    if not cut:
        raise ValueError(f"no text row is at least {length} tokens long")
    return torch.tensor(cut, dtype=torch.long)
