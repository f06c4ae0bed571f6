"""`exactspec train-heads`: train the prediction-heads draft (`--draft heads`) on the frozen target, offline.

Text: the standard library's sources, installed packages' READMEs and the target's own chat replies
(`heads_corpus`); loss: KL to the target's own next-token distributions (`heads_training`). The weights are
saved as safetensors under the cache root, keyed by the target (`drafts.heads.default_heads_path`), where
`exactspec generate --draft heads` finds them.
"""

from __future__ import annotations

import argparse
import sys

from ...outcomes import ExitCode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default=None,
        metavar="PATH",
        help="target: a local Hugging Face directory or .gguf file (default: the embedded SmolLM2-135M-Instruct)",
    )
    # tiny random Llama on random tokens (tests)
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--heads",
        type=int,
        default=3,
        help="number of heads = most tokens drafted per round (default 3)",
    )
    parser.add_argument(
        "--stdlib-tokens",
        type=int,
        default=12000,
        help="tokens of standard-library source (default 12000)",
    )
    parser.add_argument(
        "--docs-tokens",
        type=int,
        default=6000,
        help="tokens of installed packages' READMEs (default 6000)",
    )
    parser.add_argument(
        "--generated-tokens",
        type=int,
        default=1000,
        help="reply tokens the target generates itself from seed prompts (default 1000)",
    )
    parser.add_argument(
        "--window", type=int, default=64, help="positions per training window (default 64)"
    )
    parser.add_argument("--steps", type=int, default=400, help="optimiser steps (default 400)")
    parser.add_argument("--batch", type=int, default=4, help="windows per step (default 4)")
    parser.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (default 2e-3)")
    parser.add_argument(
        "--held-out", type=float, default=0.1, help="fraction of text rows held out (default 0.1)"
    )
    parser.add_argument(
        "--time-limit-min",
        type=float,
        default=10.0,
        help="stop training after this many minutes (default 10)",
    )
    parser.add_argument(
        "--full-vocabulary",
        action="store_true",
        help="KL over all tokens instead of the training text's own (exact, ~10x slower per step)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the split, the sampling and the heads' init (default 0)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)"
    )
    parser.add_argument(
        "--out",
        default=None,
        metavar="PATH",
        help="where to save the heads (default: <cache root>/heads/<target key>/heads.safetensors)",
    )


def _fail(message: str) -> int:
    print(f"exactspec train-heads: error: {message}", file=sys.stderr)
    return ExitCode.USAGE


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
    from .heads_run import train  # torch: `exactspec train-heads --help` answers without it

    return train(args, _fail)
