"""`exactspec engine collect`: sample completions from a reference and a candidate endpoint of one engine.

    exactspec engine collect --prompts PROMPTS.jsonl --reference-url URL --candidate-url URL --out-dir DIR \\
        --temperature T
    exactspec engine collect --prompts PROMPTS.jsonl --reference-url URL --out-dir DIR --temperature T \\
        --teacher-force CAND.jsonl

Every prompt is sampled with the same seed list at both endpoints (drawn at random from the engine's seed space,
the key recorded in both headers; `--consecutive-seeds` counts from --seed-start instead; with --shared-seeds K
only the first K are asked of both ends), with one pinned sampler chain, into DIR/reference.jsonl and
DIR/candidate.jsonl (schema: ..samples). `--dialect` picks the protocol (llama.cpp, vllm, openai; `--engine-adapter`
an in-process engine). `--reference-url` and `--candidate-url` may be given several times (replicas; requests are
spread over them); every URL is probed once before any sampling. The output is resumable: rerunning the same command
skips the records already written and discards a half-written last line. `--teacher-force` asks the reference for
its next-token top-N after every distinct prefix of the candidate's completions (and its own) and appends
prefix_probs records to DIR/reference.jsonl. Every run is bounded by --max-requests and --time-limit-s. `exactspec
engine certify` does all of it in rounds, and certifies; `exactspec certify-samples` certifies these files.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import httpx

from ....outcomes import ExitCode, exit_codes_help
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
from .design import SeedDesign
from .engine_errors import EngineUnavailable, refusal
from .forcing import read_teacher_candidate, teacher_force
from .jobs import Budget
from .prompt_files import check_prompts, read_prompts
from .plan import CollectionPlan, Forcing, Limits
from .probe import probe_endpoints
from .sampling import collect_completions

COMMAND = "collect"
EXIT_CODES = (
    ExitCode.OK,
    ExitCode.USAGE,
    ExitCode.INTERNAL,
    ExitCode.UNAVAILABLE,
    ExitCode.INCOMPLETE,
)
EXIT_NOTES = {
    ExitCode.OK: "every record asked for is on disk",
    ExitCode.UNAVAILABLE: "a URL where nothing answers (probed before any sampling), or a request the "
    "engine failed (after its retries): the line names the endpoint and the engine's "
    "message; the files stay resumable",
}


async def collect_async(
    entries: list[dict], out_dir: Path, plan: CollectionPlan, teacher_force_path: Path | None
) -> ExitCode:
    """The whole run: one probe of every URL, completions at every given end, then teacher forcing if asked."""
    endpoints = plan.transport.endpoints()
    if not endpoints:
        raise ValueError(
            "--reference-url / --candidate-url: give one or both (or --engine-adapter)"
        )
    if teacher_force_path and "reference" not in endpoints:
        raise ValueError(
            "--teacher-force: needs --reference-url (the reference reports the probabilities)"
        )
    # refuse a mismatched file before any request
    if teacher_force_path and teacher_force_path.exists():
        read_teacher_candidate(teacher_force_path, plan)
    await probe_endpoints(plan.transport)
    budget = Budget(plan.limits.max_requests, plan.limits.time_limit_s)
    outcome, token_prompts = await collect_completions(entries, out_dir, plan, budget)
    if teacher_force_path and not (outcome.left or outcome.failure):  # it may be this run's output
        candidate = read_teacher_candidate(teacher_force_path, plan)
        outcome = await teacher_force(candidate, token_prompts, out_dir, plan, budget)
    if outcome.failure:
        print(
            f"exactspec engine collect: the engine failed a request: {outcome.failure}; rerun the same command "
            "to resume once it answers",
            file=sys.stderr,
        )
        return ExitCode.UNAVAILABLE
    if outcome.left:
        print(
            f"exactspec engine collect: incomplete ({budget.stop_reason or 'stopped'}); rerun the same command "
            "to resume",
            file=sys.stderr,
        )
        return ExitCode.INCOMPLETE
    return ExitCode.OK


def collect_samples(
    prompts: str | Path | list[dict],
    out_dir: str | Path,
    plan: CollectionPlan | None = None,
    *,
    teacher_force: str | Path | None = None,
) -> ExitCode:
    """Collect (or resume) out_dir/reference.jsonl and out_dir/candidate.jsonl at the plan's URLs; the
    programmatic form of `exactspec engine collect`. `prompts`: a prompts file or a list of prompt dicts. Returns
    the exit code (OK, UNAVAILABLE, INCOMPLETE: call again to resume); bad input raises ValueError, an unreachable
    URL `engine_errors.EngineUnreachable`."""
    entries = (
        check_prompts(prompts, "prompts") if isinstance(prompts, list) else read_prompts(prompts)
    )
    return asyncio.run(
        collect_async(
            entries,
            Path(out_dir),
            plan or CollectionPlan(),
            Path(teacher_force) if teacher_force else None,
        )
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `engine collect`, in groups (what to collect, sampling and seeds, load and budget, identity,
    one group per dialect)."""
    parser.formatter_class = EngineHelpFormatter
    parser.description, parser.epilog = __doc__, exit_codes_help(EXIT_CODES, EXIT_NOTES)
    what = parser.add_argument_group("what to collect")
    what.add_argument("--prompts", required=True, help=PROMPTS_HELP)
    what.add_argument(
        "--out-dir",
        required=True,
        help="writes/resumes OUT_DIR/reference.jsonl and OUT_DIR/candidate.jsonl",
    )
    add_endpoint_arguments(what)
    what.add_argument(
        "--teacher-force",
        metavar="CAND.jsonl",
        help="append the reference's next-token top-N for "
        "every distinct prefix of these candidate completions to OUT_DIR/reference.jsonl (default: "
        "none)",
    )
    what.add_argument(
        "--teacher-positions",
        type=int,
        default=None,
        help="only prefixes shorter than this (default: all)",
    )
    sampling = add_sampling_group(parser)
    sampling.add_argument(
        "--n-probs",
        type=int,
        default=0,
        help="also record the engine's top-N per generated position (0: none)",
    )
    sampling.add_argument(
        "--seeds", type=int, default=200, help="seeds per prompt, the same list at both endpoints"
    )
    sampling.add_argument(
        "--consecutive-seeds",
        action="store_true",
        help="seeds --seed-start, +1, ... instead of "
        "drawn at random from the engine's seed space (the coupling certificate then does not apply)",
    )
    sampling.add_argument(
        "--seed-start", type=int, default=1, help="first seed with --consecutive-seeds"
    )
    sampling.add_argument(
        "--shared-seeds",
        type=int,
        default=None,
        metavar="K",
        help="ask only the first K seeds "
        "of both ends; the candidate's other seeds are disjoint from the reference's (default: all "
        "shared)",
    )
    sampling.add_argument(
        "--repeat-fraction",
        type=float,
        default=0.0,
        help="re-request this fraction of seeds (a determinism check)",
    )
    budget = add_load_group(parser)
    budget.add_argument(
        "--max-requests",
        type=int,
        default=20_000,
        help="the run stops after this many completion "
        "requests, each retried at most --retries times (exit 7: rerun to resume)",
    )
    budget.add_argument(
        "--time-limit-s",
        type=float,
        default=3600.0,
        help="the run stops after this many seconds (exit 7: rerun to resume)",
    )
    add_identity_group(parser)
    add_dialect_groups(parser, COMMAND)


def plan_from(args: argparse.Namespace) -> CollectionPlan:
    """`engine collect`'s plan: its seed design, its request and time limits, the reference's reports only when
    teacher-forced, the speculation recorded only when --speculation-type says it (ValueError naming the flag)."""
    transport = transport_from(args, COMMAND)
    seeds = SeedDesign(
        kind="consecutive" if args.consecutive_seeds else "random",
        key=args.seed_key,
        count=args.seeds,
        start=args.seed_start,
        shared=args.shared_seeds,
        repeat_fraction=args.repeat_fraction,
    )
    return CollectionPlan(
        law=law_from(args, n_probs=args.n_probs),
        seeds=seeds,
        limits=Limits(max_requests=args.max_requests, time_limit_s=args.time_limit_s),
        transport=transport,
        identity=identity_from(args, transport, record_speculation=False),
        forcing=Forcing(teacher_n_probs=args.teacher_n_probs, positions=args.teacher_positions),
        load=load_from(args),
    )


def run(args: argparse.Namespace) -> int:
    """Run `exactspec engine collect`; its exit code (one line on stderr for what kept it from finishing)."""
    try:
        return int(
            collect_samples(
                args.prompts, args.out_dir, plan_from(args), teacher_force=args.teacher_force
            )
        )
    except (ValueError, EngineUnavailable, httpx.HTTPError) as error:
        code, message = refusal(error)
    print(f"exactspec engine collect: {message}", file=sys.stderr)
    return int(code)


__all__ = ["EXIT_CODES", "add_arguments", "collect_async", "collect_samples", "plan_from", "run"]
