"""`exactspec engine certify`: collect, teacher-force and certify in rounds until a verdict; the one command.

    exactspec engine certify --reference-url URL --candidate-url URL --prompts FILE --out DIR --temperature T
        [--dialect llama.cpp|vllm|openai] [--top-k K --top-p P --min-p M --max-tokens N]
        [--expect-seed-coupled] [--profile quick|standard|full] [--max-per-prompt N] [--concurrency C]
    exactspec engine certify --engine-adapter MODULE:CLASS [--adapter-option KEY=VALUE] --prompts FILE --out DIR
        --temperature T [...]

FILE holds prompts as token ids, text or chat `messages` (or names a prompt set: `humaneval[:N]`). Every URL is
probed once before any sampling. Each round asks both ends for the same seeds (drawn at random from the engine's
seed space), the candidate with C requests in flight, then asks the reference for its report after every new prefix
of either end (with --expect-seed-coupled only once a seed mismatches: the coupling route needs no report), then
certifies the files as `exactspec certify-samples` would and writes the certificate into DIR. Every check but
greedy_spread is anytime-valid, so the run stops at the first verdict: CERTIFIED, NOT_EXACT, or INCONCLUSIVE /
QUALIFIED when more samples cannot help or the budget (--max-per-prompt, --time-limit-s) is spent (the certificate
then says how many completions would reach the target). Rerunning the same command resumes from DIR (its files and
run.json). A progress line per round shows each prompt's completions, what each route rules out, and an estimate of
the next round's time. `exactspec engine serve` starts llama.cpp, vLLM or llama-cpp-python and prints this command.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import httpx

from ...paths import check_writable
from ...core.profiles import PROFILE_NAMES
from ....outcomes import CERTIFICATION_EXIT_CODES, ExitCode, Verdict, exit_codes_help
from .arguments import (
    PROMPTS_HELP,
    EngineHelpFormatter,
    add_dialect_groups,
    add_endpoint_arguments,
    add_identity_group,
    add_load_group,
    add_sampling_group,
    identity_from,
    law_from,
    load_from,
    transport_from,
)
from .campaign import Certification, run_campaign
from .design import SeedDesign
from .engine_errors import EngineUnavailable, refusal
from .plan import CollectionPlan, Forcing, Limits
from .prompt_sets import PROMPT_SETS

COMMAND = "certify"
EXIT_CODES = (*CERTIFICATION_EXIT_CODES, ExitCode.UNAVAILABLE)
EXIT_NOTES = {
    ExitCode.INCONCLUSIVE: "the certificate's reasons say why and what would reach the target (every kind of "
    "reason: exactspec certify-samples --help)",
    ExitCode.UNAVAILABLE: "a URL where nothing answers (probed before any sampling), an engine that answers with "
    "errors before anything could be certified, an in-process engine that raised: the line "
    "names the endpoint and the engine's message; no certificate then",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `engine certify`, in groups: what to certify, sampling, load and budget, identity, then one
    group per dialect."""
    parser.formatter_class = EngineHelpFormatter
    parser.description, parser.epilog = __doc__, exit_codes_help(EXIT_CODES, EXIT_NOTES)
    what = parser.add_argument_group("what to certify")
    what.add_argument(
        "--prompts",
        required=True,
        help=PROMPTS_HELP
        + ", or a prompt set by name: "
        + "; ".join(f"{name}[:N] ({about})" for name, about in PROMPT_SETS.items()),
    )
    what.add_argument(
        "--out",
        required=True,
        help="folder for the sample files, run.json and the certificate (a rerun resumes it)",
    )
    add_endpoint_arguments(what)
    what.add_argument(
        "--profile",
        default="standard",
        choices=list(PROFILE_NAMES),
        help="the false-fail rate and the target (docs/profiles.md)",
    )
    what.add_argument(
        "--pooled",
        action="store_true",
        help="certify the prompts together (many prompts, few "
        "completions each): the bound is stated over the prompt set's tokens, not per prompt",
    )
    add_sampling_group(parser)
    budget = add_load_group(parser)
    budget.add_argument(
        "--max-per-prompt",
        type=int,
        default=50_000,
        help="completions per prompt at most: the "
        "budget that ends a run short of the target (INCONCLUSIVE or QUALIFIED)",
    )
    budget.add_argument(
        "--first-round", type=int, default=32, help="completions per prompt in round 1"
    )
    budget.add_argument(
        "--time-limit-s",
        type=float,
        default=3600.0,
        help="a safety net in seconds: the run stops with INCONCLUSIVE after this long",
    )
    add_identity_group(parser)
    add_dialect_groups(parser, COMMAND)


def plan_from(args: argparse.Namespace) -> CollectionPlan:
    """`engine certify`'s plan: random seeds, the reference reporting its own top-N while sampling, the
    candidate's speculation recorded, the budget of its rounds (ValueError naming the flag)."""
    transport = transport_from(args, COMMAND)
    return CollectionPlan(
        law=law_from(args),
        seeds=SeedDesign(kind="random", key=args.seed_key),
        limits=Limits(
            time_limit_s=args.time_limit_s,
            first_round=args.first_round,
            max_per_prompt=args.max_per_prompt,
        ),
        transport=transport,
        identity=identity_from(args, transport, record_speculation=True),
        forcing=Forcing(
            teacher_n_probs=args.teacher_n_probs, reference_n_probs=args.teacher_n_probs
        ),
        load=load_from(args),
    )


def _refused(code: ExitCode, message: object) -> int:
    """One line on stderr: what to fix; the exit code."""
    print(f"exactspec engine certify: {message}", file=sys.stderr)
    return int(code)


def run(args: argparse.Namespace) -> int:
    """Run the campaign; the exit code of its verdict, or of what kept it from one (one line)."""
    try:
        check_writable(args.out)
        result = run_campaign(
            args.prompts, args.out, plan_from(args), Certification(args.profile, args.pooled)
        )
    except (ValueError, EngineUnavailable, httpx.HTTPError) as error:
        return _refused(*refusal(error))
    print(f"exactspec engine certify: {result.impl}: {result.verdict}")
    for reason in result.reasons:
        print(f"  {reason}")
    print(
        f"  report: {Path(args.out) / 'CERTIFICATE.md'} (+ certificate.json, reference.jsonl, candidate.jsonl)"
    )
    return int(Verdict(result.verdict).exit_code)


__all__ = ["EXIT_CODES", "add_arguments", "plan_from", "run"]
