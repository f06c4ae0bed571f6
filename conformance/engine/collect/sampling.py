"""Sampling an engine's endpoints into sample files: completions at both ends, and teacher forcing of the reference.

Every prompt is sampled with one seed list at both endpoints (drawn at random from the dialect's seed space by the
run's key, `design`; or seed_start, seed_start + 1, ... with ``seeds="consecutive"``), with one pinned sampler chain
(`client.SamplerChain`), into DIR/reference.jsonl and DIR/candidate.jsonl (schema: `..samples`). Each role may have
several URLs (replicas of one deployment): requests are spread over them in turn. Over HTTP both ends are sampled in
waves of their concurrency that reach the server together (`jobs.run_waves`), the candidate as its load design says
(`Settings.load_design`); every completion records when it was sent and answered (the load measured: `..load`). Where
the dialect shows speculation only engine-wide, the candidates' counters are read before and after each batch and
recorded as a ``counters`` record. Output is resumable: records already written are skipped, a half-written last line
is discarded. Teacher forcing asks the reference for its next-token top-N after every distinct prefix it has not
reported yet, concurrently, reusing the prompt cache when `cache_prompt` says so (`forcing`).
"""

from __future__ import annotations

import asyncio
import sys
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import httpx

from ...paths import portable_args, portable_path
from .. import samples
from ..load import Background, is_serial, load_segments
from ..sample_store import append_records, start_or_resume
from .client import RetryPolicy, SamplerChain
from .design import design_record, random_seeds, resolve_seed_key
from .dialects import get_dialect
from .pace import Pace
from .jobs import (
    BackgroundLoad,
    Budget,
    Job,
    Outcome,
    plan_jobs,
    run_bounded,
    run_waves,
    seed_list,
)

#: A request that raises one of these (after its retries) stops the run; the output stays resumable.
REQUEST_ERRORS = (httpx.HTTPError, ValueError)
#: /props fields that hold a path of the serving machine (llama.cpp: the GGUF; its alias defaults to it).
PROPS_PATHS = ("model_path", "model_alias")
SEED_KINDS = ("random", "consecutive")
DEFAULT_SERIAL_SHARE = 0.25
DEFAULT_BACKGROUND_SAMPLING = (("temperature", 1.3), ("top_k", 5))
BACKGROUND_KEYS = {"temperature": float, "top_k": int, "top_p": float, "min_p": float, "max_tokens": int}


@dataclass(frozen=True)
class Settings:
    """Everything a collection run is told, apart from the files and URLs."""

    chain: SamplerChain = SamplerChain()
    n_seeds: int = 200
    seeds: str = "random"  # "random": drawn from the dialect's seed space by `seed_key`; "consecutive": seed_start..
    seed_key: str | None = None  # None: the key of the files being resumed, else a fresh one
    seed_start: int = 1
    repeat_fraction: float = 0.0
    concurrency: int = 4  # candidate requests in flight
    reference_concurrency: int | None = None  # None: `concurrency`
    max_requests: int = 20_000
    time_limit_s: float = 3600.0
    request_timeout_s: float = 120.0
    retry: RetryPolicy | None = None
    endpoint: str = "/completion"
    engine_name: str | None = None  # None: the dialect's name
    engine_version: str | None = None
    engine_flags: tuple[str, ...] = ()
    candidate_flags: tuple[str, ...] = ()
    speculation: dict | None = None
    model_name: str | None = None
    model_sha256: str | None = None
    teacher_n_probs: int = 20
    teacher_positions: int | None = None
    reference_n_probs: int | None = None  # top-N on the reference's own completions (None: the chain's n_probs)
    cache_prompt: bool = False  # teacher forcing reuses the engine's prompt cache
    shared_seeds: int | None = None  # None: every seed at both ends; K: the first K only (`role_seeds`)
    dialect: str = "llama.cpp"
    adapter_options: tuple[tuple[str, str], ...] = ()  # the python dialect's `--adapter-option key=value` pairs
    tokenizer: str | None = None  # openai dialect: the model's tokenizer, to map token strings to ids
    reports: str = "raw"  # openai dialect: what its logprobs are ("raw" or "post_sampling"), the user's declaration
    draft_counters: tuple[str, str] | None = None  # openai dialect: /metrics counters (drafted, accepted)
    request_extra: str | None = None  # openai dialect: a JSON object merged into every request
    text_prompts: bool = False  # openai dialect: the server takes text prompts only (ids sent as their text)
    token_by_token: bool = False  # openai dialect: teacher forcing evaluates each forced token alone (`token_by_token`)
    serial_share: float | None = None  # candidate seeds asked alone (`load.is_serial`); None: 0.25, 0 in process
    background_load: int = 0  # candidate requests sent with every wave of loaded ones, with `background_sampling`
    background_sampling: tuple[tuple[str, Any], ...] = DEFAULT_BACKGROUND_SAMPLING  # BACKGROUND_KEYS' values

    def __post_init__(self) -> None:
        get_dialect(self.dialect)
        if self.seeds not in SEED_KINDS:
            raise ValueError(f"seeds: {self.seeds!r} must be one of {SEED_KINDS}")
        for name in ("concurrency", "reference_concurrency"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int) and value >= 1):
                raise ValueError(f"{name}: {value!r} must be an integer >= 1")
        self._check_load()

    def _check_load(self) -> None:
        """--serial-share in [0, 1], --background-load >= 0 with a valid chain; neither for an in-process adapter."""
        share, extra = self.serial_share, self.background_load
        if share is not None and (isinstance(share, bool) or not isinstance(share, (int, float))
                                  or not 0 <= share <= 1):
            raise ValueError(f"--serial-share: {share!r} must be a number in [0, 1]")
        if isinstance(extra, bool) or not isinstance(extra, int) or extra < 0:
            raise ValueError(f"--background-load: {extra!r} must be an integer >= 0")
        if self.dialect == "python" and (share or extra):
            raise ValueError(f"{'--serial-share' if share else '--background-load'}: an in-process engine adapter "
                             "(--engine-adapter) has no server whose load it could set; leave it out")
        if extra:
            self.background_chain()

    def serial_share_of(self) -> float:
        """The share of the candidate's seeds asked one request at a time (the default over HTTP; 0 in process)."""
        if self.serial_share is not None:
            return float(self.serial_share)
        return 0.0 if self.dialect == "python" else DEFAULT_SERIAL_SHARE

    def background_chain(self) -> SamplerChain:
        """The background requests' chain: the run's, with `background_sampling`'s values, no reports."""
        values = dict(self.background_sampling)
        unknown = sorted(set(values) - set(BACKGROUND_KEYS))
        if unknown:
            raise ValueError(f"--background-sampling: {unknown[0]!r} is not one of {', '.join(BACKGROUND_KEYS)}")
        try:
            return replace(self.chain, n_probs=0, **values)
        except (TypeError, ValueError) as error:
            raise ValueError(f"--background-sampling: {error}") from None

    def load_design(self) -> dict | None:
        """Both headers' ``design.load`` (None in process): the candidate's concurrency, serial share and background
        load, and the reference's concurrency."""
        if self.dialect == "python":
            return None
        background = ({"in_flight": self.background_load, "sampling": dict(self.background_sampling)}
                      if self.background_load else None)
        return {"concurrency": self.concurrency, "serial_share": self.serial_share_of(), "background": background,
                "reference_concurrency": self.reference_concurrency or self.concurrency}

    def request_defaults(self) -> dict:
        """The pinned sampler part of every request, in this dialect (a sample file's request defaults)."""
        return get_dialect(self.dialect).request_defaults(self.chain, self)

    def role_chain(self, role: str) -> SamplerChain:
        """The chain a role's completions are asked with: the reference reports its top-N when asked to."""
        if role == "reference" and self.reference_n_probs is not None:
            return replace(self.chain, n_probs=self.reference_n_probs)
        return self.chain


def _exactspec_version() -> str:
    try:
        return version("exactspec")
    except PackageNotFoundError:
        return "unknown"


def build_header(role: str, url: str, settings: Settings, props: dict | None, prompts: dict[str, list[int]],
                 seed_key: str | None = None) -> samples.Header:
    """The header of one role's file: engine identity and flags, model, the pinned chain, the prompts, the design.
    Paths of this machine in the flags and in /props are recorded portably (`paths.portable_path`): the same flags
    give the same header entries in both roles' files."""
    flags = portable_args(list(settings.engine_flags) + (list(settings.candidate_flags) if role == "candidate" else []))
    props = props or {}
    model_path = props.get("model_path") or props.get("model_alias") or ""
    props = {key: portable_path(value) if key in PROPS_PATHS and isinstance(value, str) else value
             for key, value in props.items()}
    engine = {"name": settings.engine_name or settings.dialect,
              "version": settings.engine_version or props.get("build_info"), "base_url": url,
              "flags": flags or None, "speculation": settings.speculation if role == "candidate" else None,
              "props": props or None}
    model = {"name": settings.model_name or Path(model_path).name or "unknown", "sha256": settings.model_sha256}
    key = seed_key or settings.seed_key
    if settings.seeds == "random" and not key:
        raise ValueError("seed_key: a run with random seeds needs its key (`resolve_seed_key`)")
    in_flight = 1 if props.get("calls") == "serialised" else settings.concurrency  # an adapter that is not thread-safe
    design = design_record(settings.seeds, get_dialect(settings.dialect).seed_space, key, in_flight)
    if settings.load_design() is not None:
        design["load"] = settings.load_design()
    return samples.Header(role=role, engine=engine, model=model, request_defaults=settings.request_defaults(),
                          prompts={pid: tuple(tokens) for pid, tokens in prompts.items()},
                          created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                          exactspec_version=_exactspec_version(), design=design)


def role_seeds(role: str, settings: Settings, key: str | None, count: int | None = None) -> list[int]:
    """The seeds one end is asked for (`count`: this many, default n_seeds). With `shared_seeds` K only the first K
    are asked of both ends; the candidate's others follow after the reference's, so the two are disjoint."""
    n = settings.n_seeds if count is None else count
    shared = settings.shared_seeds
    total = n if shared is None or role == "reference" else n + max(0, n - shared)

    def draw(m: int) -> list[int]:
        if settings.seeds == "random":
            return random_seeds(str(key), get_dialect(settings.dialect).seed_space, m)
        return seed_list(m, settings.seed_start)

    if shared is None or role == "reference":
        return draw(n)
    if isinstance(shared, bool) or not isinstance(shared, int) or not 0 <= shared <= n:
        raise ValueError(f"shared_seeds: {shared!r} must be an integer in [0, {n}]")
    seeds = draw(total)
    return seeds[:shared] + seeds[n:total]


async def resolve_prompts(entries: list[dict], client: Any) -> tuple[dict[str, list[int]], dict]:
    """Token ids of every prompt (text through the engine's tokenizer, chats through its chat template too) and the
    header note on how they were made."""
    prompts, texts, chats = {}, {}, {}
    for entry in entries:
        pid = entry["prompt_id"]
        if entry["prompt_tokens"] is not None:
            prompts[pid] = entry["prompt_tokens"]
        elif entry.get("messages") is not None:
            prompts[pid], chats[pid] = await client.chat_tokenize(entry["messages"]), entry["messages"]
        else:
            prompts[pid], texts[pid] = await client.tokenize(entry["text"]), entry["text"]
    note = {}
    if texts:
        note["prompt_texts"] = {"tokenized_by": f"{client.base_url}/tokenize", "add_special": True, "texts": texts}
    if chats:
        note["prompt_chats"] = {"templated_by": client.base_url, "messages": chats}
    return prompts, note


def record_of_request(body: dict) -> dict:
    """The request as recorded: the body sent without the prompt (the header's prompt, plus the prefix)."""
    return {key: value for key, value in body.items() if key != "prompt"}


async def sample_completion(client: Any, prompts: dict[str, list[int]], chain: SamplerChain, job: Job,
                            index: int | None = None, load: str | None = None) -> samples.Completion:
    """Request one completion for `job` and turn it into a samples.Completion record (`load`: its label)."""
    reply, body = await client.complete(prompts[job.prompt_id], job.seed, chain)
    top = None if reply.top_probs is None else tuple(tuple((int(i), float(p)) for i, p in row)
                                                     for row in reply.top_probs)
    return samples.Completion(prompt_id=job.prompt_id, seed=job.seed, tokens=tuple(reply.tokens),
                              repeat=job.repeat, request=record_of_request(body), text=reply.text, top_probs=top,
                              probs_kind=reply.probs_kind, finish_reason=reply.finish_reason,
                              timings=reply.timings, elapsed_s=round(reply.elapsed_s, 6), index=index,
                              sent_at=reply.sent_at, received_at=reply.received_at, load=load)


def report_outcome(name: str, outcome: Outcome, skipped: int, dropped: int = 0) -> None:
    print(f"{name}: {outcome.written} written, {skipped} already on disk, {outcome.left} left", file=sys.stderr)
    if dropped:
        print(f"{name}: warning: {dropped} completions recorded without top_probs (the engine did not report a "
              "distribution at every position, e.g. speculative rounds)", file=sys.stderr)


async def _counter_totals(clients: list[Any]) -> dict[str, float]:
    totals = {"draft_n": 0.0, "draft_n_accepted": 0.0}
    for client in clients:
        for key, value in (await client.draft_counters()).items():
            totals[key] += value
    return totals


async def _plan(clients: dict[str, list[Any]], prompts: dict[str, list[int]], note: dict, out_dir: Path,
                settings: Settings, key: str | None, counts: dict[str, int] | None) -> tuple[dict, int]:
    """Per role, the (job, index) pairs not on disk yet (each file started or resumed), and how many were."""
    plans, skipped = {}, 0
    for role, role_clients in clients.items():
        jobs = []
        for pid in prompts:
            seeds = role_seeds(role, settings, key, (counts or {}).get(pid, settings.n_seeds))
            place = {seed: index for index, seed in enumerate(seeds)}
            jobs += [(job, place[job.seed]) for job in plan_jobs([pid], seeds, settings.repeat_fraction)]
        header = build_header(role, role_clients[0].base_url, settings, await role_clients[0].props(), prompts, key)
        state = start_or_resume(out_dir / f"{role}.jsonl", header, note)
        skipped += len(state.completed)
        plans[role] = [(job, index) for job, index in jobs if (job.prompt_id, job.seed, job.repeat) not in state.completed]
    return plans, skipped


async def _counted(role_clients: list[Any], path: Path, batch, background: BackgroundLoad | None) -> Outcome:
    """Run `batch` (a coroutine giving an Outcome) between two reads of the engine-wide draft counters, and record
    their difference as a ``counters`` record (which counts the background requests' drafts too)."""
    before = await _counter_totals(role_clients)
    outcome = await batch
    await asyncio.sleep(0.2)  # counters are updated as the engine's output is processed
    after = await _counter_totals(role_clients)
    append_records(path, [samples.Counters(int(after["draft_n"] - before["draft_n"]),
                                           int(after["draft_n_accepted"] - before["draft_n_accepted"]),
                                           outcome.written, f"/metrics around a batch of {outcome.written} requests"
                                           + (f" and {background.sent} background requests" if background else ""))])
    return outcome


async def _run_role(role: str, role_clients: list[Any], prompts: dict[str, list[int]], plan: list, out_dir: Path,
                    settings: Settings, budget: Budget, key: str | None, forcer: Any, dropped: list[int],
                    pace: Pace | None = None) -> Outcome:
    """One role's completions: over HTTP in waves of its concurrency (`jobs.run_waves`), the candidate as its load
    design says (lone requests, a background load); in process `concurrency` in flight (`jobs.run_bounded`);
    engine-wide draft counters read around the candidate's where the dialect needs them."""
    chain, path, dialect = settings.role_chain(role), out_dir / f"{role}.jsonl", get_dialect(settings.dialect)
    concurrency = settings.concurrency if role == "candidate" else (settings.reference_concurrency
                                                                   or settings.concurrency)
    waved, labelled = settings.load_design() is not None, role == "candidate" and settings.load_design() is not None
    share = settings.serial_share_of() if labelled else 0.0

    async def send(item):
        i, (job, index) = item
        if pace is not None and role == "reference":
            await pace.wait(i)
        label = ("serial" if is_serial(index, share) else "loaded") if labelled else None
        return await sample_completion(role_clients[i % len(role_clients)], prompts, chain, job, index, label)

    def write(record: samples.Completion) -> None:
        append_records(path, [record])
        if pace is not None and role == "candidate":
            pace.advance()
        if forcer is not None:
            forcer.feed(role, record)
        if chain.n_probs and record.top_probs is None:
            dropped.append(record.seed)

    def write_background(intervals: list[tuple[float, float]], failed: int) -> None:
        append_records(path, [Background(tuple(intervals), failed, dict(settings.background_sampling))])

    items, description, background = list(enumerate(plan)), f"completions ({role})", None
    if labelled and settings.background_load:
        background = BackgroundLoad(role_clients, prompts, settings.background_chain(), settings.background_load,
                                    write_background, dialect.seed_space, key, REQUEST_ERRORS)
    if waved:
        segments = load_segments(items, lambda item: (item[1][0].repeat, item[1][1]), share, concurrency, len(prompts))
        batch = run_waves(segments, send, write, budget, description, REQUEST_ERRORS, background)
    else:
        batch = run_bounded(items, send, write, budget, concurrency, description, REQUEST_ERRORS)
    metrics = role == "candidate" and dialect.speculation_of(settings) == "metrics" and plan
    try:
        outcome = await (_counted(role_clients, path, batch, background) if metrics else batch)
    finally:
        if pace is not None and role == "candidate":
            pace.finish()
    if background is not None and background.failed:
        print(f"{description}: warning: {background.failed} of {background.sent} background requests failed "
              f"(first: {background.first_failure})", file=sys.stderr)
    return outcome


async def collect_completions(urls: dict[str, list[str]], entries: list[dict], out_dir: Path, settings: Settings,
                              budget: Budget, counts: dict[str, int] | None = None, quiet: bool = False,
                              forcer: Any = None) -> tuple[Outcome, dict[str, list[int]]]:
    """Sample every (prompt, seed, repeat) job at every role's URLs into out_dir/ROLE.jsonl; `counts`: seeds per
    prompt (default n_seeds each). The roles run at once, each with its own load (`_run_role`); a `forcer`
    (`forcing.PrefixForcer`) teacher-forces the candidate's new prefixes while they arrive."""
    dialect = get_dialect(settings.dialect)
    key = resolve_seed_key(out_dir, settings)
    dropped: list[int] = []
    async with AsyncExitStack() as stack:
        clients = {role: [await stack.enter_async_context(dialect.make_client(url, role, settings)) for url in role_urls]
                   for role, role_urls in urls.items()}
        prompts, note = await resolve_prompts(entries, next(iter(clients.values()))[0])
        plans, skipped = await _plan(clients, prompts, note, out_dir, settings, key, counts)
        forcing = asyncio.create_task(forcer.run(prompts)) if forcer is not None else None
        pace = Pace(2 * settings.concurrency) if {"reference", "candidate"} <= set(clients) else None
        try:
            outcomes = list(await asyncio.gather(*(_run_role(role, clients[role], prompts, plans[role], out_dir,
                                                             settings, budget, key, forcer, dropped, pace)
                                                   for role in clients)))
        finally:
            if forcer is not None:
                forcer.close()
        if forcing is not None:
            outcomes.append(await forcing)
    outcome = Outcome(written=sum(o.written for o in outcomes), left=sum(o.left for o in outcomes),
                      failure=next((o.failure for o in outcomes if o.failure), None))
    if not quiet:
        report_outcome("completions (" + ", ".join(urls) + ")", outcome, skipped, len(dropped))
    return outcome, prompts


__all__ = ["REQUEST_ERRORS", "Settings", "build_header", "collect_completions", "resolve_prompts",
           "resolve_seed_key", "role_seeds", "sample_completion"]
