"""`exactspec engine certify`: collect, teacher-force and certify in rounds until a verdict; the one command.

    exactspec engine certify --reference-url URL --candidate-url URL --prompts FILE --out DIR
        [--dialect llama.cpp|vllm] [--temperature T --top-k K --top-p P --min-p M --max-tokens N]
        [--expect-seed-coupled] [--profile quick|standard|full] [--time-limit-s S] [--concurrency C]

An in-process engine replaces the two URLs with ``--engine-adapter MODULE:CLASS [--adapter-option KEY=VALUE]``
(`..adapter`). Each round asks both ends for the same seeds (drawn at random from the engine's seed space), the
candidate with C requests in flight, then asks the reference for its report after every new prefix of either end
(with --expect-seed-coupled only once a seed mismatches: the coupling route needs no report), then
certifies the files as `exactspec certify-samples` would and writes the certificate into DIR. Every check is
anytime-valid, so the run stops at the first verdict: CERTIFIED, NOT_EXACT, or INCONCLUSIVE when more samples cannot
help or the time limit is reached (the certificate then says how many completions would reach the target). Rerunning
the same command resumes from DIR (its files and run.json). A progress line per round shows each prompt's
completions, what each route rules out, and an estimate of the next round's time.

Exit status as `exactspec certify-samples`: 0 CERTIFIED, 1 NOT_EXACT, 2 usage or input error, 3 exactspec crashed,
4 INCONCLUSIVE (also when the engine fails its requests before anything can be certified: no certificate then).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ....crash import internal_crash
from ...core.profiles import PROFILE_NAMES
from ...paths import check_writable
from .. import samples
from ..certify_samples import EXIT, EXIT_CODES_HELP, EXIT_USAGE
from ..level import certify_samples
from ..report import write_engine_report
from ..result import EngineResult
from .command import adapter_urls, add_sampling_arguments, settings_from
from .jobs import Budget, check_prompts, read_prompts
from .prompt_sets import PROMPT_SETS, named_prompt_set
from .rounds import FINAL, forcing_can_wait, next_counts, progress_line
from .forcing import PrefixForcer, teacher_force
from .sampling import Settings, collect_completions, resolve_seed_key

RUN_FILE = "run.json"


@dataclass(frozen=True)
class Campaign:
    """What one `engine certify` run is told besides the sampling settings."""

    profile: str = "standard"
    time_limit_s: float = 3600.0
    first_round: int = 32  # completions per prompt in round 1 (a flagrant bug is rejected there; pooled: per set)
    max_per_prompt: int = 50_000
    pooled: bool = False  # the prompts certified together (many prompts, few completions each)


def _run_state(out: Path, settings: Settings, campaign: Campaign, prompts: list[dict]) -> dict:
    """run.json: the design a resumed run must share (chain, dialect, profile, prompts), the counts reached so far."""
    design = {"request_defaults": settings.request_defaults(), "dialect": settings.dialect, "profile": campaign.profile,
              "prompts": prompts, "concurrency": settings.concurrency, "load": settings.load_design(),
              "pooled": campaign.pooled}
    path = out / RUN_FILE
    if path.exists():
        state = json.loads(path.read_text())
        if json.loads(json.dumps(design)) != state["design"]:
            differing = [k for k in design if json.loads(json.dumps(design[k])) != state["design"].get(k)]
            raise ValueError(f"{path}: cannot resume: this run differs in {', '.join(differing)} (use another --out)")
        return state
    first = campaign.first_round if not campaign.pooled else max(2, math.ceil(2 * campaign.first_round / len(prompts)))
    return {"design": design, "counts": {p["prompt_id"]: first for p in prompts}, "rounds": [],
            "seconds": 0.0}


def _save(out: Path, state: dict) -> None:
    tmp = out / (RUN_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=1) + "\n")
    tmp.replace(out / RUN_FILE)


class EngineFailure(RuntimeError):
    """The engine failed a request (after its retries) before any prompt had completions at both ends."""


#: The share of the time left that a round keeps for teacher forcing: completions stop asking this much before the
#: time limit, so that every prefix of what was sampled still gets its report (a look reads both ends alike).
FORCING_RESERVE = 0.15


async def _collect_round(entries: list[dict], out: Path, settings: Settings, urls: dict[str, list[str]],
                         counts: dict[str, int], budgets: tuple[Budget, Budget], positions: int,
                         force: bool = True) -> str | None:
    """Completions at both ends up to `counts` (within `budgets[0]`); with `force`, the new prefixes of both ends
    teacher-forced as they arrive and a last pass catching any left over, earlier rounds' included (within
    `budgets[1]`, which lasts to the time limit: also when the completions stopped at theirs); None if complete,
    else why it stopped."""
    sampling, forcing = budgets
    path = out / "reference.jsonl"
    known = ({(r.prompt_id, r.prefix_tokens) for r in samples.read_samples(path).prefix_probs}
             if force and path.exists() and path.stat().st_size else set())
    forcer = PrefixForcer(urls["reference"], out, settings, forcing, positions, known) if force else None
    outcome, prompts = await collect_completions(urls, entries, out, settings, sampling, counts=counts, quiet=True,
                                                 forcer=forcer)
    stopped = (f"a request failed: {outcome.failure}" if outcome.failure else
               f"{sampling.stop_reason or 'stopped'} with {outcome.left} completions left" if outcome.left else None)
    if force and not outcome.failure:
        candidate = samples.read_samples(out / "candidate.jsonl")
        forced = replace(settings, teacher_positions=positions)
        outcome = await teacher_force(urls["reference"], candidate, prompts, out, forced, forcing, own=True,
                                      quiet=True)
        if outcome.left or outcome.failure:
            stopped = (f"a request failed: {outcome.failure}" if outcome.failure else
                       f"{forcing.stop_reason or 'stopped'} with {outcome.left} prefixes left unreported")
    if stopped:
        print(f"exactspec engine certify: collection stopped: {stopped}", file=sys.stderr)
    return stopped


def _certify(out: Path, campaign: Campaign, state: dict, minutes: float, stopped: str | None) -> EngineResult:
    """Certify what the files hold now and write the certificate; a collection that stopped on a failing request
    is a reason the run is INCONCLUSIVE (never a verdict on the candidate)."""
    try:
        result = certify_samples(samples.read_samples(out / "reference.jsonl"),
                                 samples.read_samples(out / "candidate.jsonl"), campaign.profile, campaign.pooled)
    except (ValueError, FileNotFoundError) as error:
        if stopped:
            raise EngineFailure(f"the collection stopped before the files could be certified ({stopped}): {error}")
        raise
    if stopped and stopped.startswith("a request failed") and result.verdict not in ("NOT_EXACT", "CONTRACT_VIOLATION"):
        result.input_reasons.append(f"the collection stopped: {stopped}")
        result.judge()
        result.extra["reasons"] = result.reasons
    result.extra["campaign"] = {"rounds": len(state["rounds"]), "minutes": round(minutes, 2),
                                "counts": dict(state["counts"]), "time_limit_s": campaign.time_limit_s,
                                "concurrency": state["design"]["concurrency"], "history": state["rounds"]}
    write_engine_report(result, out)
    return result


def run_campaign(prompts: str | Path | list[dict], out: str | Path, settings: Settings, reference_urls: list[str],
                 candidate_urls: list[str], campaign: Campaign = Campaign()) -> EngineResult:
    """Rounds of collection and certification until a verdict or the time limit; the last look's result."""
    entries = check_prompts(prompts, "prompts") if isinstance(prompts, list) else (
        named_prompt_set(str(prompts)) or read_prompts(prompts))
    if not reference_urls or not candidate_urls:
        raise ValueError("reference_url / candidate_url: give both (each may be given several times), or "
                         "--engine-adapter")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    settings = replace(settings, seed_key=resolve_seed_key(out, settings))
    state = _run_state(out, settings, campaign, entries)
    positions = settings.chain.max_tokens  # every position asked is read (and teacher-forced)
    started, spent_before = time.monotonic(), float(state["seconds"])
    urls = {"reference": list(reference_urls), "candidate": list(candidate_urls)}
    result: EngineResult | None = None
    declared = bool((settings.speculation or {}).get("expect_seed_coupled"))
    while True:
        defer = forcing_can_wait(result, declared)
        left = campaign.time_limit_s - spent_before - (time.monotonic() - started)
        requests = 4 * sum(state["counts"].values()) * (2 + 2 * positions)  # both ends, their prefixes, with room
        budgets = (Budget(requests, max(1.0, left * (1.0 - FORCING_RESERVE))), Budget(requests, max(1.0, left)))
        round_start = time.monotonic()
        stopped = asyncio.run(_collect_round(entries, out, settings, urls, state["counts"], budgets, positions,
                                             force=not defer)) if left > 0 else "time limit reached"
        state["seconds"] = spent_before + time.monotonic() - started
        state["rounds"].append({"counts": dict(state["counts"]), "complete": stopped is None,
                                "forced": not defer, "seconds": round(time.monotonic() - round_start, 1)})
        _save(out, state)
        result = _certify(out, campaign, state, state["seconds"] / 60.0, stopped)
        if defer and not stopped and result.verdict not in FINAL and not forcing_can_wait(result, declared):
            print("exactspec engine certify: the declared seed coupling is disproved: the next round teacher-forces "
                  "every prefix sampled so far", file=sys.stderr, flush=True)
            continue  # the same counts: the next round only forces
        step = min(state["counts"].values()) if campaign.pooled else campaign.first_round
        plan = next_counts(result, state["counts"], step, campaign.max_per_prompt)
        rate = 2 * sum(state["counts"].values()) / max(1e-9, state["seconds"])
        print(progress_line(len(state["rounds"]), state["seconds"], result, state["counts"],
                            result.profile.engine.target_tv, rate, plan), file=sys.stderr, flush=True)
        if plan.counts is None or stopped:
            break
        state["counts"] = plan.counts
        _save(out, state)
    return result


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description, parser.epilog = __doc__, EXIT_CODES_HELP
    add = parser.add_argument
    add("--prompts", required=True, help='JSON Lines of {"prompt_id", and one of "prompt_tokens": [ids], "text": str '
        'or "messages": [{"role", "content"}]}, or a prompt set by name: ' + "; ".join(
            f"{name}[:N] ({what})" for name, what in PROMPT_SETS.items()))
    add("--pooled", action="store_true", help="certify the prompts together (many prompts, few completions each): "
        "the bound is stated over the prompt set's tokens, not per prompt (default: per prompt)")
    add("--out", required=True, help="directory for the sample files, run.json and the certificate (resumed)")
    add("--reference-url", action="append", help="the engine with speculation off (repeatable)")
    add("--candidate-url", action="append", help="the same engine with speculation on (repeatable)")
    add("--profile", default="standard", choices=list(PROFILE_NAMES), help="default: standard")
    add("--time-limit-s", type=float, default=3600.0, help="stop with INCONCLUSIVE after this long (default 3600)")
    add("--first-round", type=int, default=32, help="completions per prompt in round 1 (default 32)")
    add("--max-per-prompt", type=int, default=50_000, help="completions per prompt at most (default 50000)")
    add_sampling_arguments(parser, certify=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Run the campaign; the exit status of its verdict."""
    try:
        check_writable(args.out)
        campaign = Campaign(args.profile, args.time_limit_s, args.first_round, args.max_per_prompt, args.pooled)
        settings = settings_from(args)
        reference_urls, candidate_urls = adapter_urls(args, args.reference_url, args.candidate_url)
        result = run_campaign(args.prompts, args.out, settings, reference_urls or [], candidate_urls or [], campaign)
    except ValueError as error:
        print(f"exactspec engine certify: {error}", file=sys.stderr)
        return EXIT_USAGE
    except EngineFailure as error:
        print(f"exactspec engine certify: INCONCLUSIVE: {error}", file=sys.stderr)
        return EXIT["INCONCLUSIVE"]
    except Exception:  # noqa: BLE001 -- input and engine errors are above; anything else is our bug
        return internal_crash(" ".join(sys.argv))
    print(f"exactspec engine certify: {result.impl}: {result.verdict}")
    for reason in result.reasons:
        print(f"  {reason}")
    print(f"  report: {Path(args.out) / 'CERTIFICATE.md'} (+ certificate.json, reference.jsonl, candidate.jsonl)")
    return EXIT[result.verdict]


__all__ = ["Campaign", "EngineFailure", "run_campaign"]
