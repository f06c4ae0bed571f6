"""The one command's rounds (`exactspec engine certify`, whose command line is `engine_certify`): collect,
teacher-force and certify until a verdict.

After one probe of every URL (nothing answers: `EngineUnreachable` at once, before any sampling), each round asks
both ends for the same seeds (drawn at random from the engine's seed space), the candidate with its concurrency in
flight, then asks the reference for its report after every new prefix of either end (with a declared seed coupling
only once a seed mismatches: the coupling route needs no report), then certifies the files as `exactspec
certify-samples` would and writes the certificate into the output folder. Every check but one is anytime-valid, so
the run stops at the first verdict: CERTIFIED, NOT_EXACT, or INCONCLUSIVE (QUALIFIED) when more samples cannot help
or the budget (`plan.limits`: completions per prompt, seconds) is spent. Rerunning resumes (its files and run.json).

The plan flows one way: the rounds hand the collector the plan and the round's budgets, the teacher forcing its
chain and transport, the certification the files; nothing here is called back.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ...core.profiles import PROFILE_NAMES
from ....outcomes import Verdict
from .. import samples
from ..certificate import write_engine_report
from ..engine_level import EngineResult, certify_samples
from .design import resolve_seed_key
from .engine_errors import EngineFailure
from .forcing import PrefixForcer, forcing_request, teacher_force
from .jobs import Budget
from .prompt_files import check_prompts, read_prompts
from .plan import CollectionPlan
from .probe import probe_endpoints
from .prompt_sets import named_prompt_set
from .rounds import FINAL, forcing_can_wait, next_counts, progress_line
from .sampling import collect_completions

RUN_FILE = "run.json"
#: The share of the time left that a round keeps for teacher forcing: completions stop asking this much before the
#: time limit, so that every prefix of what was sampled still gets its report (a look reads both ends alike).
FORCING_RESERVE = 0.15


@dataclass(frozen=True)
class Certification:
    """How the files are certified after each round: the profile, and whether the prompts are pooled."""

    profile: str = "standard"
    pooled: bool = False  # the prompts certified together (many prompts, few completions each)

    def __post_init__(self) -> None:
        if self.profile not in PROFILE_NAMES:
            raise ValueError(
                f"--profile: {self.profile!r} must be one of {', '.join(PROFILE_NAMES)}"
            )


def _run_state(
    out: Path, plan: CollectionPlan, certification: Certification, prompts: list[dict]
) -> dict:
    """run.json: the design a resumed run must share (chain, dialect, profile, prompts), the counts reached so far."""
    design = {
        "request_defaults": plan.request_defaults(),
        "dialect": plan.transport.plugin.name,
        "profile": certification.profile,
        "prompts": prompts,
        "concurrency": plan.transport.concurrency,
        "load": plan.load_design(),
        "pooled": certification.pooled,
    }
    path = out / RUN_FILE
    if path.exists():
        state = json.loads(path.read_text())
        if json.loads(json.dumps(design)) != state["design"]:
            differing = [
                k for k in design if json.loads(json.dumps(design[k])) != state["design"].get(k)
            ]
            raise ValueError(
                f"{path}: cannot resume: this run differs in {', '.join(differing)} (use another --out)"
            )
        return state
    first = plan.limits.first_round
    if certification.pooled:
        first = max(2, math.ceil(2 * first / len(prompts)))
    return {
        "design": design,
        "counts": {p["prompt_id"]: first for p in prompts},
        "rounds": [],
        "seconds": 0.0,
    }


def _save(out: Path, state: dict) -> None:
    tmp = out / (RUN_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=1) + "\n")
    tmp.replace(out / RUN_FILE)


def _stopped_text(outcome, budget: Budget, what: str) -> str | None:
    """Why a collection step stopped early (None: it did all it was asked)."""
    if outcome.failure:
        return f"a request failed: {outcome.failure}"
    if outcome.left:
        return f"{budget.stop_reason or 'stopped'} with {outcome.left} {what} left"
    return None


async def _collect_round(
    entries: list[dict],
    out: Path,
    plan: CollectionPlan,
    counts: dict[str, int],
    budgets: tuple[Budget, Budget],
    positions: int,
    force: bool = True,
) -> str | None:
    """Completions at both ends up to `counts` (within `budgets[0]`); with `force`, the new prefixes of both ends
    teacher-forced as they arrive and a last pass catching any left over, earlier rounds' included (within
    `budgets[1]`, which lasts to the time limit: also when the completions stopped at theirs); None if complete,
    else why it stopped."""
    sampling, forcing = budgets
    path = out / "reference.jsonl"
    forcer = None
    if force:
        known = (
            {(r.prompt_id, r.prefix_tokens) for r in samples.read_samples(path).prefix_probs}
            if path.exists() and path.stat().st_size
            else set()
        )
        chain, extra = forcing_request(plan.law, plan.forcing, plan.transport)
        forcer = PrefixForcer(
            plan.transport, chain, extra, plan.seeds.start, out, forcing, positions, known
        )
    outcome, prompts = await collect_completions(
        entries, out, plan, sampling, counts=counts, quiet=True, forcer=forcer
    )
    stopped = _stopped_text(outcome, sampling, "completions")
    if force and not outcome.failure:
        candidate = samples.read_samples(out / "candidate.jsonl")
        forced = replace(plan, forcing=replace(plan.forcing, positions=positions))
        outcome = await teacher_force(
            candidate, prompts, out, forced, forcing, own=True, quiet=True
        )
        stopped = _stopped_text(outcome, forcing, "prefixes unreported") or stopped
    return stopped


def _certify(
    out: Path,
    certification: Certification,
    plan: CollectionPlan,
    state: dict,
    minutes: float,
    stopped: str | None,
) -> EngineResult:
    """Certify what the files hold now and write the certificate; a collection that stopped on a failing request
    is a reason the run is INCONCLUSIVE (never a verdict on the candidate)."""
    try:
        result = certify_samples(
            samples.read_samples(out / "reference.jsonl"),
            samples.read_samples(out / "candidate.jsonl"),
            certification.profile,
            certification.pooled,
        )
    except (ValueError, FileNotFoundError) as error:
        if stopped:
            raise EngineFailure(
                f"the engine failed before anything could be certified: {stopped}"
            ) from error
        raise
    if (
        stopped
        and stopped.startswith("a request failed")
        and result.verdict not in (Verdict.NOT_EXACT, Verdict.CONTRACT_VIOLATION)
    ):
        result.input_reasons.append(f"the collection stopped: {stopped}")
        result.judge()
        result.extra["reasons"] = result.reasons
    result.extra["campaign"] = {
        "rounds": len(state["rounds"]),
        "minutes": round(minutes, 2),
        "counts": dict(state["counts"]),
        "time_limit_s": plan.limits.time_limit_s,
        "concurrency": state["design"]["concurrency"],
        "history": state["rounds"],
    }
    write_engine_report(result, out)
    return result


def run_campaign(
    prompts: str | Path | list[dict],
    out: str | Path,
    plan: CollectionPlan,
    certification: Certification = Certification(),
) -> EngineResult:
    """Rounds of collection and certification until a verdict or the budget; the last look's result. Both ends'
    URLs are the plan's (`plan.transport`); `EngineUnreachable` before any sampling when one does not answer."""
    entries = (
        check_prompts(prompts, "prompts")
        if isinstance(prompts, list)
        else (named_prompt_set(str(prompts)) or read_prompts(prompts))
    )
    if set(plan.transport.endpoints()) != {"reference", "candidate"}:
        raise ValueError(
            "--reference-url / --candidate-url: give both (each may be given several times), or "
            "--engine-adapter"
        )
    asyncio.run(probe_endpoints(plan.transport))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plan = plan.with_seed_key(resolve_seed_key(out, plan.seeds))
    state = _run_state(out, plan, certification, entries)
    return _rounds(entries, out, plan, certification, state)


def _rounds(
    entries: list[dict], out: Path, plan: CollectionPlan, certification: Certification, state: dict
) -> EngineResult:
    """The rounds themselves (see `run_campaign`)."""
    positions = plan.law.max_tokens  # every position asked is read (and teacher-forced)
    started, spent_before = time.monotonic(), float(state["seconds"])
    result: EngineResult | None = None
    declared = bool((plan.identity.speculation or {}).get("expect_seed_coupled"))
    while True:
        defer = forcing_can_wait(result, declared)
        left = plan.limits.time_limit_s - spent_before - (time.monotonic() - started)
        # both ends, their prefixes, with room
        requests = 4 * sum(state["counts"].values()) * (2 + 2 * positions)
        budgets = (
            Budget(requests, max(1.0, left * (1.0 - FORCING_RESERVE))),
            Budget(requests, max(1.0, left)),
        )
        round_start = time.monotonic()
        stopped = (
            asyncio.run(
                _collect_round(
                    entries, out, plan, state["counts"], budgets, positions, force=not defer
                )
            )
            if left > 0
            else "time limit reached"
        )
        state["seconds"] = spent_before + time.monotonic() - started
        state["rounds"].append(
            {
                "counts": dict(state["counts"]),
                "complete": stopped is None,
                "forced": not defer,
                "seconds": round(time.monotonic() - round_start, 1),
            }
        )
        _save(out, state)
        result = _certify(out, certification, plan, state, state["seconds"] / 60.0, stopped)
        if stopped:  # after the certificate: a run that had nothing to certify ends with one line (EngineFailure)
            print(f"exactspec engine certify: collection stopped: {stopped}", file=sys.stderr)
        if (
            defer
            and not stopped
            and result.verdict not in FINAL
            and not forcing_can_wait(result, declared)
        ):
            print(
                "exactspec engine certify: the declared seed coupling is disproved: the next round teacher-forces "
                "every prefix sampled so far",
                file=sys.stderr,
                flush=True,
            )
            continue  # the same counts: the next round only forces
        step = min(state["counts"].values()) if certification.pooled else plan.limits.first_round
        round_plan = next_counts(result, state["counts"], step, plan.limits.max_per_prompt)
        rate = 2 * sum(state["counts"].values()) / max(1e-9, state["seconds"])
        print(
            progress_line(
                len(state["rounds"]),
                state["seconds"],
                result,
                state["counts"],
                result.profile.engine.target_tv,
                rate,
                round_plan,
            ),
            file=sys.stderr,
            flush=True,
        )
        if round_plan.counts is None or stopped:
            break
        state["counts"] = round_plan.counts
        _save(out, state)
    return result


__all__ = ["Certification", "FORCING_RESERVE", "RUN_FILE", "run_campaign"]
