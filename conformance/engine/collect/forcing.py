"""Teacher forcing: the reference's reported next-token top-N after the prefixes the law checks need.

Each request asks the reference for one token after prompt + prefix, with its top-N post-sampling probabilities;
prefixes already reported are never asked again (the file is resumable, and the one command's rounds grow it).
`teacher_force` asks every distinct prefix of a candidate file (and, with `own`, of the reference's own
completions); `PrefixForcer` asks a collection's new
prefixes of both ends while the collection goes on, so the reference's idle time is used. The paired checks read
both ends' tokens against the teacher-forced reports, so every prefix either end visits needs one. What a forcing
request adds is the dialect's (`DialectPlugin.forcing_extra`: llama.cpp's prompt cache, reused when its options say
so): every certificate measures that decode-time and teacher-forced reports agree (`..law_stream.premise`). Each
function gets the parts of the plan it uses: the law and the forcing part make the request's chain, the transport
its clients.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import samples
from ..sample_store import append_records, start_or_resume
from .client import SamplerChain
from .design import resolve_seed_key
from .generic_openai import SHORT_REPORT, UNMAPPABLE, PrefixNotText
from .header import build_header
from .jobs import Budget, Outcome, failure_text, run_bounded
from .plan import CollectionPlan, Forcing, Transport
from .request_records import REQUEST_ERRORS, record_of_request, report_outcome

PREFIX_SEED_TRIES = 8


def forcing_request(
    law: SamplerChain, forcing: Forcing, transport: Transport
) -> tuple[SamplerChain, dict | None]:
    """The chain of a teacher-forcing request (one token, the top-N) and what the dialect adds to it."""
    chain = replace(law, max_tokens=1, n_probs=forcing.teacher_n_probs, post_sampling_probs=True)
    return chain, transport.plugin.forcing_extra(transport.options)


async def sample_prefix(
    client: Any,
    prompts: dict[str, list[int]],
    chain: SamplerChain,
    seed: int,
    job: tuple[str, tuple[int, ...]],
    extra: dict | None = None,
) -> samples.PrefixProbs | None:
    """The reference's reported next-token distribution after one prefix (one token requested). The distribution
    does not depend on the token sampled, but llama.cpp reports none when that token ends inside a UTF-8 character,
    and llama-cpp-python none when it is the end token: then up to PREFIX_SEED_TRIES seeds are tried. None (the prefix
    stays unreported, a choice made by the prefix and the reference's own draws, never by the candidate's tokens)
    when the report lists a token string the tokenizer cannot map or two alike (`generic_openai.UNMAPPABLE`,
    `SHORT_REPORT`), when a text-only
    server cannot be sent the prefix (`generic_openai.PrefixNotText`), or when every try stopped on an end token."""
    prompt_id, prefix = job
    # an in-process engine reports without sampling
    if callable(getattr(client, "report_after", None)):
        listed, body = await client.report_after([*prompts[prompt_id], *prefix], chain)
        return samples.PrefixProbs(
            prompt_id=prompt_id,
            prefix_tokens=tuple(prefix),
            top_probs=tuple((int(i), float(p)) for i, p in listed),
            probs_kind="post_sampling",
            request=record_of_request(body),
        )
    for attempt in range(PREFIX_SEED_TRIES):
        try:
            # a server that needs its prefixes primed
            if callable(getattr(client, "complete_forced", None)):
                reply, body = await client.complete_forced(
                    prompts[prompt_id], list(prefix), seed + attempt, chain, extra
                )
            else:
                reply, body = await client.complete(
                    [*prompts[prompt_id], *prefix], seed + attempt, chain, extra
                )
        except PrefixNotText:
            return None
        if reply.top_probs and reply.probs_kind is not None:
            break
        if (reply.probs_dropped or "").startswith((UNMAPPABLE, SHORT_REPORT)):
            return None
    else:
        if reply.finish_reason in ("stop", "eos") and len(reply.tokens) <= 1:
            return None
        raise ValueError(
            f"prefix {list(prefix)} of {prompt_id!r}: the engine reported no probabilities in "
            f"{PREFIX_SEED_TRIES} tries (n_probs ignored?)"
        )
    return samples.PrefixProbs(
        prompt_id=prompt_id,
        prefix_tokens=tuple(prefix),
        top_probs=tuple((int(i), float(p)) for i, p in reply.top_probs[0]),
        probs_kind=reply.probs_kind,
        request=record_of_request(body),
    )


class PrefixForcer:
    """Teacher forcing alongside a collection: each new completion's prefixes (positions 1..`positions`, both ends)
    not reported yet are asked of the reference while the collection goes on, so the reference's idle time is used.
    `seed`: the forcing requests' first seed (the reports do not depend on it)."""

    def __init__(
        self,
        transport: Transport,
        chain: SamplerChain,
        extra: dict | None,
        seed: int,
        out_dir: Path,
        budget: Budget,
        positions: int,
        known: set[tuple[str, tuple[int, ...]]],
    ) -> None:
        self.transport, self.chain, self.extra, self.seed = transport, chain, extra, seed
        self.path, self.budget, self.positions, self.known = (
            out_dir / "reference.jsonl",
            budget,
            positions,
            known,
        )
        self.queue: asyncio.Queue = asyncio.Queue()

    def feed(self, role: str, record: samples.Completion) -> None:
        """Queue the new prefixes of either end's completion (the paired checks read both ends' tokens against the
        teacher-forced reports; the reference's own reports while sampling serve the premise check)."""
        for t in range(min(self.positions, len(record.tokens))):
            key = (record.prompt_id, record.tokens[:t])
            if key not in self.known:
                self.known.add(key)
                self.queue.put_nowait(key)

    def close(self) -> None:
        self.queue.put_nowait(None)

    async def run(self, prompts: dict[str, list[int]]) -> Outcome:
        """Answer the queue until `close`, with the reference's concurrency; the first failing request stops it."""
        outcome, gate = Outcome(), asyncio.Semaphore(self.transport.in_flight("reference"))
        tasks: list[asyncio.Task] = []
        async with AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(self.transport.client(url, "reference"))
                for url in self.transport.endpoints()["reference"]
            ]

            async def one(i: int, key: tuple[str, tuple[int, ...]]) -> None:
                async with gate:
                    if outcome.failure or not self.budget.take():
                        return
                    try:
                        record = await sample_prefix(
                            clients[i % len(clients)],
                            prompts,
                            self.chain,
                            self.seed,
                            key,
                            self.extra,
                        )
                    except REQUEST_ERRORS as error:
                        where = f"teacher forcing of prompt {key[0]!r} after {len(key[1])} tokens"
                        outcome.failure = outcome.failure or failure_text(where, error)
                        return
                    if record is not None:
                        append_records(self.path, [record])
                    outcome.written += 1

            while (key := await self.queue.get()) is not None:
                tasks.append(asyncio.create_task(one(len(tasks), key)))
            await asyncio.gather(*tasks)
        return outcome


def candidate_prefixes(
    *files: samples.SampleFile, positions: int | None = None
) -> list[tuple[str, tuple[int, ...]]]:
    """Every distinct (prompt_id, generated-prefix) of the files' completions, shortest first; only prefixes
    shorter than `positions` (the law checks' positions 1..positions) when it is given."""
    distinct = {
        (c.prompt_id, c.tokens[:j])
        for f in files
        for c in f.completions
        for j in range(len(c.tokens))
        if positions is None or j < positions
    }
    return sorted(distinct, key=lambda key: (key[0], len(key[1]), key[1]))


def read_teacher_candidate(path: Path, plan: CollectionPlan) -> samples.SampleFile:
    """The candidate file to teacher-force, refused unless it was sampled with this run's chain."""
    candidate = samples.read_samples(path)
    if json.loads(json.dumps(plan.request_defaults())) != candidate.header.request_defaults:
        raise ValueError(
            f"--teacher-force: {path} was sampled with another chain than this run's "
            f"({candidate.header.request_defaults})"
        )
    return candidate


async def teacher_force(
    candidate: samples.SampleFile,
    prompts: dict[str, list[int]],
    out_dir: Path,
    plan: CollectionPlan,
    budget: Budget,
    own: bool = True,
    quiet: bool = False,
) -> Outcome:
    """Append to out_dir/reference.jsonl the reference's next-token top-N after each candidate prefix (and, with
    `own`, each of its own prefixes) shorter than the forcing's positions that it has not reported yet."""
    for pid, tokens in candidate.header.prompts.items():
        if list(tokens) != list(prompts.get(pid, [])):
            raise ValueError(
                f"--teacher-force: {candidate.path}: prompt {pid!r} is not this run's prompt"
            )
    chain, extra = forcing_request(plan.law, plan.forcing, plan.transport)
    path = out_dir / "reference.jsonl"
    key = resolve_seed_key(out_dir, plan.seeds)
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(plan.transport.client(url, "reference"))
            for url in plan.transport.endpoints()["reference"]
        ]
        header = build_header(
            "reference", clients[0].base_url, plan, await clients[0].props(), prompts, key
        )
        state = start_or_resume(path, header)
        files = (candidate, samples.read_samples(path)) if own else (candidate,)
        jobs = [
            job
            for job in candidate_prefixes(*files, positions=plan.forcing.positions)
            if job not in state.prefixes
        ]

        async def send(item):
            i, job = item
            return await sample_prefix(
                clients[i % len(clients)], prompts, chain, plan.seeds.start, job, extra
            )

        outcome = await run_bounded(
            list(enumerate(jobs)),
            send,
            lambda record: append_records(path, [record]) if record is not None else None,
            budget,
            plan.transport.in_flight("reference"),
            "teacher forcing",
            REQUEST_ERRORS,
        )
    if not quiet:
        report_outcome("prefix_probs (reference)", outcome, len(state.prefixes))
    return outcome


__all__ = [
    "PREFIX_SEED_TRIES",
    "PrefixForcer",
    "candidate_prefixes",
    "forcing_request",
    "read_teacher_candidate",
    "sample_prefix",
    "teacher_force",
]
