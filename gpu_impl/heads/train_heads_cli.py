"""`exactspec train-heads`: train the prediction-heads draft (`--draft heads`) on the frozen target, offline.

Text: the standard library's sources, installed packages' READMEs and the target's own chat replies
(`heads_corpus`); loss: KL to the target's own next-token distributions (`heads_training`). The weights are
saved as safetensors under the cache root, keyed by the target (`drafts.heads.default_heads_path`), where
`exactspec generate --draft heads` finds them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None, metavar="PATH",
                        help="target: a local Hugging Face directory or .gguf file (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # tiny random Llama on random tokens (tests)
    parser.add_argument("--heads", type=int, default=3, help="number of heads = most tokens drafted per round (default 3)")
    parser.add_argument("--stdlib-tokens", type=int, default=12000, help="tokens of standard-library source (default 12000)")
    parser.add_argument("--docs-tokens", type=int, default=6000, help="tokens of installed packages' READMEs (default 6000)")
    parser.add_argument("--generated-tokens", type=int, default=1000,
                        help="reply tokens the target generates itself from seed prompts (default 1000)")
    parser.add_argument("--window", type=int, default=64, help="positions per training window (default 64)")
    parser.add_argument("--steps", type=int, default=400, help="optimiser steps (default 400)")
    parser.add_argument("--batch", type=int, default=4, help="windows per step (default 4)")
    parser.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (default 2e-3)")
    parser.add_argument("--held-out", type=float, default=0.1, help="fraction of text rows held out (default 0.1)")
    parser.add_argument("--time-limit-min", type=float, default=10.0, help="stop training after this many minutes (default 10)")
    parser.add_argument("--full-vocabulary", action="store_true",
                        help="KL over all tokens instead of the training text's own (exact, ~10x slower per step)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split, the sampling and the heads' init (default 0)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--out", default=None, metavar="PATH",
                        help="where to save the heads (default: <cache root>/heads/<target key>/heads.safetensors)")


def _fail(message: str) -> int:
    print(f"exactspec train-heads: error: {message}", file=sys.stderr)
    return 2


def _load(args: argparse.Namespace) -> tuple[Any, Any]:
    from .. import models

    if args.tiny:
        return models.tiny_llama(vocab_size=64, hidden_size=64, n_layers=4, seed=0), None
    if args.model:
        return models.load_model(args.model)
    return models.load_default_model()


def corpus_rows(args: argparse.Namespace, target: Any, tokenizer: Any) -> tuple[list[list[int]], dict[str, int]]:
    """Token rows of the training text and the number of tokens from each source."""
    import torch

    from . import heads_corpus as corpus

    if tokenizer is None:  # --tiny: random token rows
        rng = torch.Generator().manual_seed(args.seed)
        rows = torch.randint(0, target.config.vocab_size, (12, 4 * args.window), generator=rng).tolist()
        return rows, {"random": sum(map(len, rows))}
    sources = {
        "stdlib": corpus.encode_texts(tokenizer, corpus.stdlib_sources(6 * args.stdlib_tokens, args.seed), args.stdlib_tokens),
        "package_docs": corpus.encode_texts(tokenizer, corpus.package_docs(6 * args.docs_tokens, args.seed), args.docs_tokens),
        "self_generated": corpus.self_generated(target, tokenizer, args.generated_tokens, seed=args.seed)
        if args.generated_tokens > 0 else [],
    }
    return [row for rows in sources.values() for row in rows], {name: sum(map(len, rows)) for name, rows in sources.items()}


def _check(args: argparse.Namespace) -> None:
    for name in ("heads", "window", "steps", "batch"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be >= 1, got {getattr(args, name)}")
    for name in ("stdlib_tokens", "docs_tokens", "generated_tokens"):
        if getattr(args, name) < 0:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")


def run(args: argparse.Namespace) -> int:
    try:
        _check(args)
    except ValueError as error:
        return _fail(str(error))
    import torch

    from ..drafts.heads import default_heads_path, save_heads
    from .heads_corpus import windows
    from .heads_training import TrainConfig, collect_states, split_rows, train_heads
    from ..models import ModelNotAvailableError

    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    try:
        target, tokenizer = _load(args)
        rows, token_counts = corpus_rows(args, target, tokenizer)
        piece = 8 * (args.window + args.heads)  # split long texts into pieces of 8 windows, so the held-out part has many
        rows = [row[i: i + piece] for row in rows for i in range(0, len(row), piece)]
        train_rows, held_rows = split_rows(len(rows), args.held_out, args.seed)
        length = args.window + args.heads
        train_ids, held_ids = windows([rows[i] for i in train_rows], length), windows([rows[i] for i in held_rows], length)
    except (ModelNotAvailableError, ValueError, OSError) as error:
        return _fail(str(error))
    text_s = time.perf_counter() - start
    print(f"# text: {token_counts} tokens -> {train_ids.shape[0]} training and {held_ids.shape[0]} held-out windows of "
          f"{length} ({text_s:.0f} s)", file=sys.stderr)
    train = (train_ids, collect_states(target, train_ids, progress=True))
    held_out = (held_ids, collect_states(target, held_ids, progress=True))
    states_s = time.perf_counter() - start - text_s
    config = TrainConfig(n_heads=args.heads, steps=args.steps, batch=args.batch, learning_rate=args.lr, seed=args.seed,
                         time_limit_s=60 * args.time_limit_min, text_vocabulary=not args.full_vocabulary)
    heads, report = train_heads(target, train, held_out, config)
    report.update({"tokens": token_counts, "text_seconds": text_s, "states_seconds": states_s,
                   "total_seconds": time.perf_counter() - start, "threads": torch.get_num_threads()})
    path = save_heads(heads, args.out or default_heads_path(target), target, report)
    after = report["held_out_after"]
    print(json.dumps(report, indent=1), file=sys.stderr)
    print(f"# saved {path}\n# held-out top-1 agreement per head: {[round(a, 3) for a in after['top1_agreement']]}; "
          f"sum min(p, q): {[round(a, 3) for a in after['overlap_min_p_q']]}; total {report['total_seconds'] / 60:.1f} min")
    return 0
