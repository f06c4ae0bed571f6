"""The run of `exactspec train-heads` (`train_heads_cli`, which parses and checks its arguments without torch): load
the target, build the training text (`heads_corpus`), train the heads (`heads_training`) and save them where
`exactspec generate --draft heads` finds them (`drafts.heads.default_heads_path`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Callable

import torch

from .. import models
from ..drafts.heads import default_heads_path, save_heads
from ..models import ModelNotAvailableError
from . import heads_corpus as corpus
from .heads_corpus import windows
from .heads_training import TrainConfig, collect_states, split_rows, train_heads


def _load(args: argparse.Namespace) -> tuple[Any, Any]:
    if args.tiny:
        return models.tiny_llama(vocab_size=64, hidden_size=64, n_layers=4, seed=0), None
    if args.model:
        return models.load_model(args.model)
    return models.load_default_model()


def corpus_rows(
    args: argparse.Namespace, target: Any, tokenizer: Any
) -> tuple[list[list[int]], dict[str, int]]:
    """Token rows of the training text and the number of tokens from each source."""
    if tokenizer is None:  # --tiny: random token rows
        rng = torch.Generator().manual_seed(args.seed)
        rows = torch.randint(
            0, target.config.vocab_size, (12, 4 * args.window), generator=rng
        ).tolist()
        return rows, {"random": sum(map(len, rows))}
    sources = {
        "stdlib": corpus.encode_texts(
            tokenizer, corpus.stdlib_sources(6 * args.stdlib_tokens, args.seed), args.stdlib_tokens
        ),
        "package_docs": corpus.encode_texts(
            tokenizer, corpus.package_docs(6 * args.docs_tokens, args.seed), args.docs_tokens
        ),
        "self_generated": corpus.self_generated(
            target, tokenizer, args.generated_tokens, seed=args.seed
        )
        if args.generated_tokens > 0
        else [],
    }
    return [row for rows in sources.values() for row in rows], {
        name: sum(map(len, rows)) for name, rows in sources.items()
    }


def train(args: argparse.Namespace, fail: Callable[[str], int]) -> int:
    """Load the target, build the text, train the heads and save them (`args` checked by the command); a bad model or
    input is `fail(message)`, the command's exit status for it."""
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    try:
        target, tokenizer = _load(args)
        rows, token_counts = corpus_rows(args, target, tokenizer)
        # split long texts into pieces of 8 windows, so the held-out part has many
        piece = 8 * (args.window + args.heads)
        rows = [row[i : i + piece] for row in rows for i in range(0, len(row), piece)]
        train_rows, held_rows = split_rows(len(rows), args.held_out, args.seed)
        length = args.window + args.heads
        train_ids, held_ids = (
            windows([rows[i] for i in train_rows], length),
            windows([rows[i] for i in held_rows], length),
        )
    except (ModelNotAvailableError, ValueError, OSError) as error:
        return fail(str(error))
    text_s = time.perf_counter() - start
    print(
        f"# text: {token_counts} tokens -> {train_ids.shape[0]} training and {held_ids.shape[0]} held-out windows of "
        f"{length} ({text_s:.0f} s)",
        file=sys.stderr,
    )
    train = (train_ids, collect_states(target, train_ids, progress=True))
    held_out = (held_ids, collect_states(target, held_ids, progress=True))
    states_s = time.perf_counter() - start - text_s
    config = TrainConfig(
        n_heads=args.heads,
        steps=args.steps,
        batch=args.batch,
        learning_rate=args.lr,
        seed=args.seed,
        time_limit_s=60 * args.time_limit_min,
        text_vocabulary=not args.full_vocabulary,
    )
    heads, report = train_heads(target, train, held_out, config)
    report.update(
        {
            "tokens": token_counts,
            "text_seconds": text_s,
            "states_seconds": states_s,
            "total_seconds": time.perf_counter() - start,
            "threads": torch.get_num_threads(),
        }
    )
    path = save_heads(heads, args.out or default_heads_path(target), target, report)
    after = report["held_out_after"]
    print(json.dumps(report, indent=1), file=sys.stderr)
    print(
        f"# saved {path}\n# held-out top-1 agreement per head: {[round(a, 3) for a in after['top1_agreement']]}; "
        f"sum min(p, q): {[round(a, 3) for a in after['overlap_min_p_q']]}; total {report['total_seconds'] / 60:.1f} min"
    )
    return 0
