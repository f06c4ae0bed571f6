"""The prompts of `exactspec generate`: positional, ``-`` (stdin), ``--prompts FILE`` (text or JSON Lines).

Each prompt becomes a `PromptRow` with its own seed and sampling options; rows that share sampling options
and ``max_new_tokens`` form one ragged batch (`group_rows`), since `SpeculativeGenerator.generate` takes
one `SamplingParams` per call. Torch-free: every input error is found before a model loads.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ...reference.warping import SamplingParams

#: The per-prompt options a JSON line may set (besides "prompt" and an "id" echoed back in --json).
ROW_OPTIONS = ("seed", "max_new_tokens", "temperature", "top_k", "top_p", "min_p")


@dataclass
class PromptRow:
    """One prompt and everything that may differ between the prompts of one command."""

    index: int
    text: str
    where: str  # for messages: "the prompt", "prompt 2", "line 3 of prompts.jsonl"
    seed: int
    max_new_tokens: int
    sampling: SamplingParams
    id: Any = None

    def group_key(self) -> tuple:
        s = self.sampling
        return (s.temperature, s.top_k, s.top_p, s.min_p, self.max_new_tokens)


@dataclass
class _Raw:
    text: str
    where: str
    options: dict = field(default_factory=dict)


def _stdin_once(stdin: TextIO, used: list[bool], what: str) -> str:
    if used[0]:
        raise ValueError(
            f"{what}: stdin can be read only once (give - either as a prompt or to --prompts)"
        )
    used[0] = True
    return stdin.read()


def _json_line(line: str, where: str) -> _Raw:
    try:
        item = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: not valid JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(item, dict) or not isinstance(item.get("prompt"), str):
        raise ValueError(f'{where}: a JSON line must be an object with a "prompt" string')
    unknown = sorted(set(item) - {"prompt", "id", *ROW_OPTIONS})
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {unknown}; a line may set prompt, id, {', '.join(ROW_OPTIONS)}"
        )
    return _Raw(item["prompt"], where, {k: v for k, v in item.items() if k != "prompt"})


def _prompt_list(text: str, name: str) -> list[_Raw]:
    """A prompt file's rows: JSON Lines when `name` ends in .jsonl or the first line starts with '{', else one per line."""
    lines = [(number, line.rstrip("\r")) for number, line in enumerate(text.split("\n"), 1)]
    lines = [(number, line) for number, line in lines if line.strip()]
    as_json = name.endswith(".jsonl") or bool(lines) and lines[0][1].lstrip().startswith("{")
    if as_json:
        return [_json_line(line, f"line {number} of {name}") for number, line in lines]
    return [_Raw(line, f"line {number} of {name}") for number, line in lines]


def _raw_prompts(args: argparse.Namespace, stdin: TextIO) -> list[_Raw]:
    used = [False]
    raws = []
    for position, text in enumerate(args.prompt, 1):
        if text == "-":
            text = _stdin_once(stdin, used, "prompt -")
        raws.append(_Raw(text, "the prompt" if len(args.prompt) == 1 else f"prompt {position}"))
    if args.prompts is not None:
        if args.prompts == "-":
            raws += _prompt_list(_stdin_once(stdin, used, "--prompts -"), "stdin")
        else:
            path = Path(args.prompts).expanduser()
            try:
                content = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as error:
                raise ValueError(f"--prompts {args.prompts}: cannot read it ({error})") from None
            raws += _prompt_list(content, args.prompts)
            if not raws:
                raise ValueError(
                    f"--prompts {args.prompts}: the file holds no prompt (blank lines are skipped)"
                )
    return raws


def _option(raw: _Raw, name: str, default: Any, kind: tuple[type, ...]) -> Any:
    value = raw.options.get(name, default)
    if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
        raise ValueError(
            f"{raw.where}: {name} must be {'a number' if float in kind else 'an integer'}, got {value!r}"
        )
    return value


def _row(index: int, raw: _Raw, args: argparse.Namespace) -> PromptRow:
    if not raw.text.strip():
        raise ValueError(
            f"{raw.where} is empty; give the text to continue (or - to read it from stdin)"
        )
    seed = _option(raw, "seed", args.seed + index, (int,))
    max_new = _option(raw, "max_new_tokens", args.max_new_tokens, (int,))
    if seed < 0 or max_new < 0:
        raise ValueError(f"{raw.where}: seed and max_new_tokens must be integers >= 0")
    try:
        sampling = SamplingParams(
            temperature=_option(raw, "temperature", args.temperature, (int, float)),
            top_k=_option(raw, "top_k", args.top_k, (int,)),
            top_p=_option(raw, "top_p", args.top_p, (int, float)),
            min_p=_option(raw, "min_p", args.min_p, (int, float)),
        )
    except ValueError as error:
        raise ValueError(f"{raw.where}: {error}") from None
    return PromptRow(index, raw.text, raw.where, seed, max_new, sampling, raw.options.get("id"))


def read_prompts(args: argparse.Namespace, stdin: TextIO | None = None) -> list[PromptRow]:
    """Every prompt of the command in input order; ValueError in the user's terms on a missing or bad one."""
    raws = _raw_prompts(args, sys.stdin if stdin is None else stdin)
    if not raws:
        raise ValueError(
            "no prompt given: pass the text, - to read it from stdin, or --prompts FILE"
        )
    return [_row(index, raw, args) for index, raw in enumerate(raws)]


def group_rows(rows: list[PromptRow]) -> list[list[PromptRow]]:
    """Rows sharing sampling options and max_new_tokens, in order of first appearance (each becomes one batch)."""
    groups: dict[tuple, list[PromptRow]] = {}
    for row in rows:
        groups.setdefault(row.group_key(), []).append(row)
    return list(groups.values())
