"""The arguments of `exactspec generate`: definitions, value types and defaults, torch-free.

`exactspec generate --help` imports only this module, the draft registry and the model-config reader, so it
answers in a fraction of a second; the torch-backed code is imported when the command runs.
"""

from __future__ import annotations

import argparse
import textwrap

from ... import __version__
from ..drafts.registry import DRAFT_CHOICES, DraftSpec, draft_help, parse_draft
from ..cost.k_policy import POLICIES

#: The choices of `gpu_impl.cost.cpu_matmul.CPU_MATMUL_CHOICES`, repeated here because that module imports torch
#: (tests/test_cli_startup.py checks that the two agree).
CPU_MATMUL_CHOICES = ("auto", "stock")
DTYPES = ("float32", "float16", "bfloat16")

# Defaults chosen from benchmarks/results/smollm2_*.json (2-core CPU, SmolLM2-135M float32 target); see
# DEFAULTS_WHY, which the help text shows.
DEFAULT_DRAFT = "prompt-lookup"
DEFAULT_K = 4
DEFAULT_K_POLICY = "cost"
DEFAULTS_WHY = (
    "Defaults (--draft prompt-lookup -k 4 --k-policy cost --cpu-matmul auto) come from "
    "benchmarks/results/smollm2_*.json (2-core CPU, float32 SmolLM2-135M, 64 new tokens, median of 3 interleaved "
    "runs): prompt lookup costs nothing to draft (c~0) and gave the best speedups, x2.4-2.7 on code and "
    "summarisation at temperature 0 and x1.35-2.0 at 0.7 with the cost policy, which picks each round's k in 0..2k "
    "from the walltime model on measured costs and so drafts little where nothing is copied (open chat: x0.89-0.94 "
    "instead of x0.83-0.88 at fixed k). The CPU kernel plan makes a plain step ~1.6x faster, after which the int8 "
    "self-draft costs c~0.6 of a target step and gains at most x1.13 (code and summarisation at temperature 0), "
    "losing elsewhere at fixed k; early-exit drafts are rarely "
    "accepted by SmolLM2 (alpha<0.26)."
)
BATCH_HELP = (
    "Several prompts (positional, --prompts FILE, or both: positional first) run as ragged batches through one "
    "SpeculativeGenerator, one batch per distinct (temperature, top-k, top-p, min-p, max-new-tokens); outputs "
    "print in input order when all are done, each after a line '==> prompt i/n <==' (streaming is for one prompt). "
    "Row i uses seed --seed + i unless its JSON line gives one; every row's output has exactly the law of a lone "
    "run (greedy rows give a lone run's text). --json prints one JSON object: rows in input order (text, "
    "token_ids, finish_reason, ...), per-batch stats and overall stats; see gpu_impl/README.md."
)


def _draft_type(text: str) -> DraftSpec:
    try:
        return parse_draft(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _int_at_least(minimum: int):
    """argparse type: an integer >= `minimum`, with a message that says so."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer >= {minimum}, got {text!r}"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    return parse


positive_int = _int_at_least(1)
nonneg_int = _int_at_least(0)


def number(text: str) -> float:
    """argparse type: a float, with a message that says so."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _add_input_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "prompt",
        nargs="*",
        help="prompt text; several run as one batch; - reads one prompt from stdin",
    )
    parser.add_argument(
        "--prompts",
        metavar="FILE",
        default=None,
        help="more prompts: one per line, or JSON Lines (.jsonl, or lines starting with '{') with "
        '{"prompt": ..., optional "id", "seed", "max_new_tokens", "temperature", "top_k", "top_p", "min_p"}; '
        "- reads the list from stdin",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object (rows, stats) instead of text"
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        default=None,
        help="write the output (text or JSON) to PATH",
    )
    parser.add_argument("--no-stream", action="store_true", help="print the text only at the end")
    parser.add_argument("--version", action="version", version=f"exactspec {__version__}")


def _add_model_and_draft(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default=None,
        metavar="PATH",
        help="target model: a local Hugging Face directory or .gguf file (default: the embedded SmolLM2-135M-Instruct)",
    )
    # tiny random Llama, for tests
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--draft",
        type=_draft_type,
        default=parse_draft(DEFAULT_DRAFT),
        metavar="DRAFT",
        help=f"draft source: {DRAFT_CHOICES} (default: {DEFAULT_DRAFT}). {draft_help()}",
    )
    parser.add_argument(
        "-k",
        type=positive_int,
        default=DEFAULT_K,
        help=f"draft tokens per round with --k-policy fixed; the first k and half the largest otherwise (default {DEFAULT_K})",
    )
    parser.add_argument(
        "--k-policy",
        choices=POLICIES,
        default=DEFAULT_K_POLICY,
        help="cost: each round the k in 0..2k that the walltime model E[N]/(ck+v(k+1)) favours, from costs measured on "
        "this machine (first call) and the loop's timers; fixed: always k; grow-shrink: +1 after all accepted, -1 "
        f"after fewer than half (all stay exact; default {DEFAULT_K_POLICY})",
    )
    parser.add_argument(
        "--cpu-matmul",
        choices=CPU_MATMUL_CHOICES,
        default="auto",
        help="CPU Linear kernels: auto = the fastest of F.linear and (W x^T)^T per row count, measured once per "
        "machine and cached; stock = F.linear (default auto)",
    )
    parser.add_argument(
        "--device",
        default=None,
        help="torch device: cpu, cuda, cuda:N, mps (default: cuda if available, else cpu)",
    )
    parser.add_argument("--dtype", default="float32", choices=DTYPES, help="default float32")
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="CPU threads for torch (default: torch's choice, one per core). On a machine busy with "
        "other jobs, fewer threads than cores avoids OpenMP waiting on descheduled peers",
    )


def _add_sampling(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--temperature", type=number, default=0.7, help="0 = greedy (default 0.7)")
    parser.add_argument(
        "--top-k",
        type=positive_int,
        default=None,
        help="keep the k most likely tokens (default off)",
    )
    parser.add_argument(
        "--top-p", type=number, default=1.0, help="nucleus mass in (0, 1] (default 1 = off)"
    )
    parser.add_argument(
        "--min-p", type=number, default=0.0, help="min-p in [0, 1] (default 0 = off)"
    )
    parser.add_argument("--max-new-tokens", type=nonneg_int, default=64, help="default 64")
    parser.add_argument(
        "--seed",
        type=nonneg_int,
        default=0,
        help="random seed; prompt i of a batch uses seed + i (default 0)",
    )
    parser.add_argument(
        "--chat",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="apply the tokenizer's chat template (default: on when the model has one, as the instruct model does)",
    )
    parser.add_argument(
        "--compare-plain",
        action="store_true",
        help="also decode plainly and report the speedup: the median of 3 interleaved "
        "(speculative, plain) pairs, the first speculative run being the one shown; under an adaptive "
        "--k-policy each pair also runs fixed k = -k, and both speedups are printed",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every option of `exactspec generate` (no torch import)."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "\n\n".join(
        textwrap.fill(paragraph, 100) for paragraph in (BATCH_HELP, DEFAULTS_WHY)
    )
    _add_input_output(parser)
    _add_model_and_draft(parser)
    _add_sampling(parser)
