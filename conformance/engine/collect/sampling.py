"""Sampling an engine's endpoints into sample files: completions at both ends, and teacher forcing of the reference.

Every prompt is sampled with one seed list at both endpoints (`plan.seeds`: drawn at random from the dialect's seed
space by the run's key, or start, start + 1, ...), with one pinned sampler chain (`plan.law`), into
DIR/reference.jsonl and DIR/candidate.jsonl (schema: `..samples`). Each role may have several URLs (replicas of one
deployment): requests are spread over them in turn. Over HTTP both ends are sampled in waves of their concurrency
that reach the server together (`jobs.run_waves`), the candidate as its load design says
(`plan.CollectionPlan.load_design`); every completion records when it was sent and answered (the load measured:
`..load`). Where the dialect shows speculation only engine-wide, the candidates' counters are read before and after
each batch and recorded as a ``counters`` record. Output is resumable: records already written are skipped, a
half-written last line is discarded. Teacher forcing asks the reference for its next-token top-N after every
distinct prefix it has not reported yet, concurrently, reusing the prompt cache where the dialect's options say so
(`forcing`).

The plan comes in whole and each part goes where it is needed: the transport makes the clients, the seed design
the seeds, the load design the waves; nothing here calls back into the campaign.
"""

from __future__ import annotations

import asyncio
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from .. import samples
from ..load import Background, is_serial, load_segments
from ..sample_store import append_records, start_or_resume
from .client import SamplerChain
from .design import resolve_seed_key, role_seeds
from .header import build_header
from .jobs import BackgroundLoad, Budget, Job, Outcome, plan_jobs, run_bounded, run_waves
from .pace import Pace
from .plan import CollectionPlan
from .request_records import REQUEST_ERRORS, record_of_request, report_outcome


async def resolve_prompts(entries: list[dict], client: Any) -> tuple[dict[str, list[int]], dict]:
    """Token ids of every prompt (text through the engine's tokenizer, chats through its chat template too) and the
    header note on how they were made."""
    prompts, texts, chats = {}, {}, {}
    for entry in entries:
        pid = entry["prompt_id"]
        if entry["prompt_tokens"] is not None:
            prompts[pid] = entry["prompt_tokens"]
        elif entry.get("messages") is not None:
            prompts[pid], chats[pid] = (
                await client.chat_tokenize(entry["messages"]),
                entry["messages"],
            )
        else:
            prompts[pid], texts[pid] = await client.tokenize(entry["text"]), entry["text"]
    note = {}
    if texts:
        note["prompt_texts"] = {
            "tokenized_by": f"{client.base_url}/tokenize",
            "add_special": True,
            "texts": texts,
        }
    if chats:
        note["prompt_chats"] = {"templated_by": client.base_url, "messages": chats}
    return prompts, note


async def sample_completion(
    client: Any,
    prompts: dict[str, list[int]],
    chain: SamplerChain,
    job: Job,
    index: int | None = None,
    load: str | None = None,
) -> samples.Completion:
    """Request one completion for `job` and turn it into a samples.Completion record (`load`: its label)."""
    reply, body = await client.complete(prompts[job.prompt_id], job.seed, chain)
    top = (
        None
        if reply.top_probs is None
        else tuple(tuple((int(i), float(p)) for i, p in row) for row in reply.top_probs)
    )
    return samples.Completion(
        prompt_id=job.prompt_id,
        seed=job.seed,
        tokens=tuple(reply.tokens),
        repeat=job.repeat,
        request=record_of_request(body),
        text=reply.text,
        top_probs=top,
        probs_kind=reply.probs_kind,
        finish_reason=reply.finish_reason,
        timings=reply.timings,
        elapsed_s=round(reply.elapsed_s, 6),
        index=index,
        sent_at=reply.sent_at,
        received_at=reply.received_at,
        load=load,
    )


async def _counter_totals(clients: list[Any]) -> dict[str, float]:
    totals = {"draft_n": 0.0, "draft_n_accepted": 0.0}
    for client in clients:
        for key, value in (await client.draft_counters()).items():
            totals[key] += value
    return totals


async def _plan(
    clients: dict[str, list[Any]],
    prompts: dict[str, list[int]],
    note: dict,
    out_dir: Path,
    plan: CollectionPlan,
    key: str | None,
    counts: dict[str, int] | None,
) -> tuple[dict, int]:
    """Per role, the (job, index) pairs not on disk yet (each file started or resumed), and how many were."""
    plans, skipped = {}, 0
    space = plan.transport.plugin.capabilities.seed_space
    for role, role_clients in clients.items():
        jobs = []
        for pid in prompts:
            seeds = role_seeds(
                role, plan.seeds, space, key, (counts or {}).get(pid, plan.seeds.count)
            )
            place = {seed: index for index, seed in enumerate(seeds)}
            jobs += [
                (job, place[job.seed])
                for job in plan_jobs([pid], seeds, plan.seeds.repeat_fraction)
            ]
        header = build_header(
            role, role_clients[0].base_url, plan, await role_clients[0].props(), prompts, key
        )
        state = start_or_resume(out_dir / f"{role}.jsonl", header, note)
        skipped += len(state.completed)
        plans[role] = [
            (job, index)
            for job, index in jobs
            if (job.prompt_id, job.seed, job.repeat) not in state.completed
        ]
    return plans, skipped


async def _counted(
    role_clients: list[Any], path: Path, batch, background: BackgroundLoad | None
) -> Outcome:
    """Run `batch` (a coroutine giving an Outcome) between two reads of the engine-wide draft counters, and record
    their difference as a ``counters`` record (which counts the background requests' drafts too)."""
    try:
        before = await _counter_totals(role_clients)
    except BaseException:
        batch.close()  # never started: closed, not left unawaited
        raise
    outcome = await batch
    await asyncio.sleep(0.2)  # counters are updated as the engine's output is processed
    after = await _counter_totals(role_clients)
    append_records(
        path,
        [
            samples.Counters(
                int(after["draft_n"] - before["draft_n"]),
                int(after["draft_n_accepted"] - before["draft_n_accepted"]),
                outcome.written,
                f"/metrics around a batch of {outcome.written} requests"
                + (f" and {background.sent} background requests" if background else ""),
            )
        ],
    )
    return outcome


async def _run_role(
    role: str,
    role_clients: list[Any],
    prompts: dict[str, list[int]],
    jobs: list,
    out_dir: Path,
    plan: CollectionPlan,
    budget: Budget,
    key: str | None,
    forcer: Any,
    dropped: list[int],
    pace: Pace | None = None,
) -> Outcome:
    """One role's completions: over HTTP in waves of its concurrency (`jobs.run_waves`), the candidate as its load
    design says (lone requests, a background load); in process `concurrency` in flight (`jobs.run_bounded`);
    engine-wide draft counters read around the candidate's where the dialect needs them."""
    chain, path, transport = plan.role_chain(role), out_dir / f"{role}.jsonl", plan.transport
    waved = plan.load_design() is not None
    labelled = role == "candidate" and waved
    share = plan.serial_share() if labelled else 0.0

    async def send(item):
        i, (job, index) = item
        if pace is not None and role == "reference":
            await pace.wait(i)
        label = ("serial" if is_serial(index, share) else "loaded") if labelled else None
        return await sample_completion(
            role_clients[i % len(role_clients)], prompts, chain, job, index, label
        )

    def write(record: samples.Completion) -> None:
        append_records(path, [record])
        if pace is not None and role == "candidate":
            pace.advance()
        if forcer is not None:
            forcer.feed(role, record)
        if chain.n_probs and record.top_probs is None:
            dropped.append(record.seed)

    def write_background(intervals: list[tuple[float, float]], failed: int) -> None:
        append_records(
            path, [Background(tuple(intervals), failed, dict(plan.load.background_sampling))]
        )

    items, description, background = list(enumerate(jobs)), f"completions ({role})", None
    if labelled and plan.load.background_load:
        background = BackgroundLoad(
            role_clients,
            prompts,
            plan.background_chain(),
            plan.load.background_load,
            write_background,
            transport.plugin.capabilities.seed_space,
            key,
            REQUEST_ERRORS,
        )
    if waved:
        segments = load_segments(
            items,
            lambda item: (item[1][0].repeat, item[1][1]),
            share,
            transport.in_flight(role),
            len(prompts),
        )
        batch = run_waves(segments, send, write, budget, description, REQUEST_ERRORS, background)
    else:
        batch = run_bounded(
            items, send, write, budget, transport.in_flight(role), description, REQUEST_ERRORS
        )
    metrics = role == "candidate" and transport.speculation() == "metrics" and jobs
    try:
        outcome = await (_counted(role_clients, path, batch, background) if metrics else batch)
    finally:
        if pace is not None and role == "candidate":
            pace.finish()
    if outcome.failure:  # which end failed: a candidate's failing request is not the reference's
        outcome.failure = f"the {role}'s {outcome.failure}"
    if background is not None and background.failed:
        print(
            f"{description}: warning: {background.failed} of {background.sent} background requests failed "
            f"(first: {background.first_failure})",
            file=sys.stderr,
        )
    return outcome


async def collect_completions(
    entries: list[dict],
    out_dir: Path,
    plan: CollectionPlan,
    budget: Budget,
    counts: dict[str, int] | None = None,
    quiet: bool = False,
    forcer: Any = None,
) -> tuple[Outcome, dict[str, list[int]]]:
    """Sample every (prompt, seed, repeat) job at every role's URLs (`plan.transport`) into out_dir/ROLE.jsonl;
    `counts`: seeds per prompt (default the seed design's count each). The roles run at once, each with its own
    load (`_run_role`); a `forcer` (`forcing.PrefixForcer`) teacher-forces the new prefixes while they arrive."""
    endpoints = plan.transport.endpoints()
    key = resolve_seed_key(out_dir, plan.seeds)
    dropped: list[int] = []
    async with AsyncExitStack() as stack:
        clients = {
            role: [
                await stack.enter_async_context(plan.transport.client(url, role)) for url in urls
            ]
            for role, urls in endpoints.items()
        }
        prompts, note = await resolve_prompts(entries, next(iter(clients.values()))[0])
        jobs, skipped = await _plan(clients, prompts, note, out_dir, plan, key, counts)
        forcing = asyncio.create_task(forcer.run(prompts)) if forcer is not None else None
        pace = (
            Pace(2 * plan.transport.concurrency)
            if {"reference", "candidate"} <= set(clients)
            else None
        )
        try:
            outcomes = list(
                await asyncio.gather(
                    *(
                        _run_role(
                            role,
                            clients[role],
                            prompts,
                            jobs[role],
                            out_dir,
                            plan,
                            budget,
                            key,
                            forcer,
                            dropped,
                            pace,
                        )
                        for role in clients
                    )
                )
            )
        finally:
            if forcer is not None:
                forcer.close()
        if forcing is not None:
            outcomes.append(await forcing)
    outcome = Outcome(
        written=sum(o.written for o in outcomes),
        left=sum(o.left for o in outcomes),
        failure=next((o.failure for o in outcomes if o.failure), None),
    )
    if not quiet:
        report_outcome("completions (" + ", ".join(endpoints) + ")", outcome, skipped, len(dropped))
    return outcome, prompts


__all__ = ["collect_completions", "resolve_prompts", "sample_completion"]
