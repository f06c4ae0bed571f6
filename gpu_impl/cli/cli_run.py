"""`exactspec generate` once its arguments are checked: load the target, build the draft, encode the prompts,
decode each batch (rows sharing sampling options) through one `SpeculativeGenerator`, print in input order.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, TextIO

import torch
from transformers.utils import logging as transformers_logging

from .. import SpecStats, SpeculativeGenerator, generate_plain, models
from ..drafts.registry import build_draft
from ..loop.prompts import left_pad
from . import cli_output as output
from .cli_checks import Plan
from .cli_inputs import PromptRow, group_rows

COMPARE_PAIRS = 3  # --compare-plain: (speculative, plain[, fixed k]) runs one after the other, the speedup their median ratio


class CharTokenizer:
    """A stand-in tokenizer for the hidden --tiny model: one token per character of a fixed alphabet."""

    ALPHABET = " abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'\n-"

    def __init__(self, vocab_size: int):
        self.symbols = (self.ALPHABET * (vocab_size // len(self.ALPHABET) + 1))[:vocab_size]
        self.eos_token_id = None
        self.pad_token_id = None
        self.chat_template = None

    def encode(self, text: str) -> list[int]:
        first = {}
        for i, ch in enumerate(self.symbols):
            first.setdefault(ch, i)
        return [first.get(ch, 0) for ch in text] or [0]

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(self.symbols[i] for i in ids)

    def get_vocab(self) -> dict[str, int]:
        return {f"{ch}#{i}": i for i, ch in enumerate(self.symbols)}


@dataclass
class Target:
    model: Any
    tokenizer: Any
    load_s: float
    source: str  # "", or how the weights came: "cache", "gguf", "hf-dir"


def load_target(args: argparse.Namespace, device: str, dtype: Any) -> Target:
    """The target model and tokenizer the (checked) arguments name."""
    transformers_logging.disable_progress_bar()  # the weight-loading bar would sit among the '#' figure lines
    start = time.perf_counter()
    if args.tiny:
        model = models.tiny_llama(vocab_size=64, hidden_size=64, n_layers=4, seed=0).to(device)
        return Target(model, CharTokenizer(64), time.perf_counter() - start, "")
    if args.model:
        model, tokenizer = models.load_model(args.model, device=device, dtype=dtype)
        if tokenizer is None:
            raise ValueError(
                f"{args.model} has no tokenizer next to it; exactspec generate needs one to encode the prompt"
            )
    else:
        model, tokenizer = models.load_default_model(device=device, dtype=dtype)
    return Target(
        model, tokenizer, time.perf_counter() - start, str(models.LAST_LOAD_INFO.get("source", ""))
    )


def encode(tokenizer: Any, prompt: str, chat: bool) -> list[int]:
    """The prompt's token ids (through the chat template when `chat`)."""
    if isinstance(tokenizer, CharTokenizer):
        return tokenizer.encode(prompt)
    if chat:
        encoded = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, return_dict=True
        )
        return list(encoded["input_ids"])
    return list(tokenizer(prompt)["input_ids"])


class BatchRunner:
    """Decodes batches of rows with one draft and one generator (its measured costs serve every batch)."""

    def __init__(
        self, args: argparse.Namespace, target: Target, draft: Any, encoded: list[list[int]]
    ):
        self.args, self.target, self.draft, self.encoded = args, target, draft, encoded
        tokenizer = target.tokenizer
        self.eos = getattr(tokenizer, "eos_token_id", None)
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad = pad if pad is not None else (self.eos if isinstance(self.eos, int) else 0)
        self.generator = self.fixed_generator = None
        if draft is not None:
            self.generator = SpeculativeGenerator(
                target.model,
                draft,
                k=args.k,
                adaptive_k=args.k_policy,
                cpu_matmul=args.cpu_matmul,
                on_progress=lambda line: print(f"# {line}", file=sys.stderr, flush=True),
            )
            # the policy's speedup beside fixed k's
            if args.compare_plain and args.k_policy != "fixed":
                self.fixed_generator = SpeculativeGenerator(
                    target.model, draft, k=args.k, cpu_matmul=args.cpu_matmul
                )

    def _inputs(self, rows: list[PromptRow]) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        ids, mask = left_pad([self.encoded[row.index] for row in rows], self.pad)
        device = self.target.model.device
        return ids.to(device), mask.to(device), [row.seed for row in rows]

    def speculative(self, rows: list[PromptRow], on_tokens: Any = None) -> Any:
        """One ragged batch; plain decoding when the draft is `none`."""
        ids, mask, seeds = self._inputs(rows)
        if self.generator is None:
            return self.plain(rows, on_tokens)
        self.generator.sampling = rows[
            0
        ].sampling  # the batch's options; the measured costs carry over
        return self.generator.generate(
            ids,
            rows[0].max_new_tokens,
            seed=seeds,
            eos_token_id=self.eos,
            attention_mask=mask,
            on_tokens=on_tokens,
        )

    def fixed(self, rows: list[PromptRow]) -> Any:
        """The batch again with fixed k = --k (None when the policy is already fixed or no comparison was asked)."""
        if self.fixed_generator is None:
            return None
        ids, mask, seeds = self._inputs(rows)
        self.fixed_generator.sampling = rows[0].sampling
        return self.fixed_generator.generate(
            ids, rows[0].max_new_tokens, seed=seeds, eos_token_id=self.eos, attention_mask=mask
        )

    def plain(self, rows: list[PromptRow], on_tokens: Any = None) -> Any:
        ids, mask, seeds = self._inputs(rows)
        return generate_plain(
            self.target.model,
            ids,
            rows[0].max_new_tokens,
            sampling=rows[0].sampling,
            seed=seeds,
            eos_token_id=self.eos,
            attention_mask=mask,
            on_tokens=on_tokens,
            cpu_matmul=self.args.cpu_matmul,
        )


def _eos_set(eos: Any) -> frozenset[int]:
    if eos is None:
        return frozenset()
    return frozenset(eos) if isinstance(eos, (list, tuple, set, frozenset)) else frozenset([eos])


def _batch_figures(
    runner: BatchRunner, group: list[PromptRow], result: Any, label: str
) -> tuple[list[str], dict]:
    """Closing lines and the --json record of one batch (with plain decoding beside it when asked)."""
    lines = [label] if label else []
    if runner.draft is not None:
        lines += output.speculation_lines(result.stats)
    lines.append(output.speed_line(result.stats, len(group)))
    record = {"rows": [row.index for row in group], "stats": output.stats_record(result.stats)}
    if runner.args.compare_plain and runner.draft is not None:
        triples = [(result, runner.plain(group), runner.fixed(group))]
        triples += [
            (runner.speculative(group), runner.plain(group), runner.fixed(group))
            for _ in range(COMPARE_PAIRS - 1)
        ]
        pairs = [(s, p) for s, p, _ in triples]
        lines += output.plain_lines(pairs)
        # greedy, or a deterministic draft on plain's stream
        if runner.generator.same_tokens_as_plain:
            record["identical_to_plain"] = all(p.sequences == s.sequences for s, p in pairs)
            lines.append(
                output.identical_line(
                    runner.generator.sampling.greedy, record["identical_to_plain"]
                )
            )
        record["plain"] = output.stats_record(pairs[0][1].stats)
        record["speedups"] = [round(output.speedup(s, p), 4) for s, p in pairs]
        if runner.fixed_generator is not None:
            lines += output.fixed_lines(triples, runner.args.k, runner.args.k_policy)
            record["fixed_k_speedups"] = [round(output.speedup(f, p), 4) for _, p, f in triples]
        if group[0].sampling.greedy:
            record["greedy_identical_to_plain"] = record["identical_to_plain"]
    return lines, record


def _header(
    args: argparse.Namespace,
    plan: Plan,
    target: Target,
    draft_desc: str,
    rows: list[PromptRow],
    groups: list[list[PromptRow]],
) -> tuple[str, dict]:
    """The opening progress line (stderr) and the --json header."""
    cached = f", {target.source}" if target.source else ""
    batches = f"; {len(rows)} prompts in {len(groups)} batch(es)" if len(rows) > 1 else ""
    line = (
        f"# target: {plan.name} (loaded in {target.load_s:.1f} s{cached}); draft: {draft_desc}; k={args.k}; "
        f"temperature={rows[0].sampling.temperature}{batches}"
    )
    header = {
        "model": plan.name,
        "draft": draft_desc,
        "k": args.k,
        "k_policy": args.k_policy,
        "device": plan.device,
        "dtype": args.dtype,
        "chat": plan.chat,
    }
    return line, header


def decode_all(
    args: argparse.Namespace,
    plan: Plan,
    target: Target,
    draft: Any,
    draft_desc: str,
    rows: list[PromptRow],
    out: TextIO,
) -> int:
    """Run every batch, print the texts (or the JSON document) to `out` and the figures to stderr."""
    encoded = [encode(target.tokenizer, row.text, plan.chat) for row in rows]
    empty = [row.where for row, ids in zip(rows, encoded) if not ids]
    if empty:
        raise ValueError(f"{empty[0]} encodes to no tokens; give some text to continue")
    runner = BatchRunner(args, target, draft, encoded)
    groups = group_rows(rows)
    line, header = _header(args, plan, target, draft_desc, rows, groups)
    print(line + f"; prompt {len(encoded[0])} tokens" * (len(rows) == 1), file=sys.stderr)
    stream = (
        output.Streamer(target.tokenizer, out)
        if len(rows) == 1 and not (args.no_stream or args.json)
        else None
    )
    sequences: dict[int, list[int]] = {}
    records, batch_records, results = [None] * len(rows), [], []
    for number, group in enumerate(groups):
        result = runner.speculative(group, on_tokens=stream)
        # end the streamed line before the figures (and a plain comparison) print
        if stream is not None:
            stream.finish(target.tokenizer.decode(result.sequences[0], skip_special_tokens=True))
        label = (
            f"batch {number + 1}/{len(groups)}: {len(group)} prompt(s)" if len(groups) > 1 else ""
        )
        lines, record = _batch_figures(runner, group, result, label)
        output.print_figures(sys.stderr, lines)
        batch_records.append(record)
        results.append(result)
        for b, (row, tokens) in enumerate(zip(group, result.sequences)):
            sequences[row.index] = tokens
            text = target.tokenizer.decode(tokens, skip_special_tokens=True)
            acceptance = result.stats.row_acceptance(b) if runner.draft is not None else None
            records[row.index] = output.row_record(
                row, text, tokens, len(encoded[row.index]), _eos_set(runner.eos), number, acceptance
            )
    overall = SpecStats.pooled(result.stats for result in results)
    if len(groups) > 1:
        output.print_figures(sys.stderr, ["overall " + output.speed_line(overall, len(rows))])
    if args.json:
        out.write(
            output.json_document(header, records, batch_records, output.stats_record(overall))
            + "\n"
        )
    elif stream is None:
        output.write_texts(out, [record["text"] for record in records])
    return 0


def execute(args: argparse.Namespace, rows: list[PromptRow], plan: Plan) -> int:
    """Load, build the draft, decode; ValueError / ModelNotAvailableError / OSError for the caller to report."""
    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    target = load_target(args, plan.device, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao's deprecation notice for quantised tensors
        draft, draft_desc = build_draft(
            args.draft, target.model, target.tokenizer, plan.device, dtype, args.cpu_matmul
        )
    sink = (
        open(args.output, "w", encoding="utf-8")
        if args.output not in (None, "-")
        else nullcontext(sys.stdout)
    )
    with sink as out:
        return decode_all(args, plan, target, draft, draft_desc, rows, out)
