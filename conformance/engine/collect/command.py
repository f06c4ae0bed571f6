"""`exactspec engine collect`: sample completions from a reference and a candidate endpoint of one engine.

    exactspec engine collect --prompts PROMPTS.jsonl --reference-url URL --candidate-url URL --out-dir DIR
    exactspec engine collect --prompts PROMPTS.jsonl --reference-url URL --out-dir DIR --teacher-force CAND.jsonl

Every prompt is sampled with the same seed list at both endpoints (seeds seed_start, seed_start + 1, ...;
with --shared-seeds K only the first K are asked of both ends, the candidate's others are disjoint from the
reference's), with one pinned sampler chain (`client.SamplerChain`), into DIR/reference.jsonl and
DIR/candidate.jsonl (schema: samples.py). `--dialect vllm` speaks vLLM's OpenAI server (`openai_client`) instead
of llama.cpp's native /completion. The output is resumable: rerunning the same command skips the (prompt_id, seed,
repeat) records already written and discards a half-written last line. `--teacher-force` asks the
reference for its next-token top-N after every distinct prefix of the candidate's completions and appends
prefix_probs records to DIR/reference.jsonl. Every run is bounded by --max-requests and --time-limit-s.

Exit status: 0 all requested records are on disk; 1 a limit or a failing request stopped the run early
(rerun to resume); 2 bad arguments or input files.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx

from ...paths import portable_args, portable_path
from .. import samples
from .client import EngineClient, RetryPolicy, SamplerChain
from .jobs import Budget, Job, Outcome, check_prompts, plan_jobs, read_prompts, role_seeds, run_bounded
from .openai_client import OpenAIEngineClient, vllm_request

EXIT_DONE, EXIT_INCOMPLETE, EXIT_USAGE = 0, 1, 2
#: A request that raises one of these (after its retries) stops the run; the output stays resumable.
REQUEST_ERRORS = (httpx.HTTPError, ValueError)
PREFIX_SEED_TRIES = 8
#: /props fields that hold a path of the serving machine (llama.cpp: the GGUF; its alias defaults to it).
PROPS_PATHS = ("model_path", "model_alias")
DIALECTS = ("llama.cpp", "vllm")


@dataclass(frozen=True)
class Settings:
    """Everything a collection run is told, apart from the files and URLs."""

    chain: SamplerChain = SamplerChain()
    n_seeds: int = 200
    seed_start: int = 1
    repeat_fraction: float = 0.0
    concurrency: int = 4
    max_requests: int = 20_000
    time_limit_s: float = 3600.0
    request_timeout_s: float = 120.0
    retry: RetryPolicy | None = None
    endpoint: str = "/completion"
    engine_name: str | None = None  # None: the dialect's engine ("llama.cpp" or "vllm")
    engine_version: str | None = None
    engine_flags: tuple[str, ...] = ()
    candidate_flags: tuple[str, ...] = ()
    speculation: dict | None = None
    model_name: str | None = None
    model_sha256: str | None = None
    teacher_n_probs: int = 20
    teacher_positions: int | None = None
    shared_seeds: int | None = None  # None: every seed at both ends; K: the first K only (`jobs.role_seeds`)
    dialect: str = "llama.cpp"

    def __post_init__(self) -> None:
        if self.dialect not in DIALECTS:
            raise ValueError(f"dialect: {self.dialect!r} must be one of {DIALECTS}")

    def request_defaults(self) -> dict:
        """The pinned sampler part of every request, in this dialect (a sample file's request defaults)."""
        return vllm_request(self.chain) if self.dialect == "vllm" else self.chain.request()


def _exactspec_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("exactspec")
    except PackageNotFoundError:
        return "unknown"


def build_header(role: str, url: str, settings: Settings, props: dict | None,
                 prompts: dict[str, list[int]]) -> samples.Header:
    """The header of one role's file: engine identity and flags, model, the pinned chain, the prompts.
    Paths of this machine in the flags and in /props are recorded portably (`paths.portable_path`): the
    same flags give the same header entries in both roles' files."""
    flags = portable_args(list(settings.engine_flags) + (list(settings.candidate_flags) if role == "candidate" else []))
    props = props or {}
    model_path = props.get("model_path") or props.get("model_alias") or ""
    props = {key: portable_path(value) if key in PROPS_PATHS and isinstance(value, str) else value
             for key, value in props.items()}
    engine = {"name": settings.engine_name or settings.dialect, "version": settings.engine_version or props.get("build_info"),
              "base_url": url,
              "flags": flags or None, "speculation": settings.speculation if role == "candidate" else None,
              "props": props or None}
    model = {"name": settings.model_name or Path(model_path).name or "unknown", "sha256": settings.model_sha256}
    return samples.Header(role=role, engine=engine, model=model, request_defaults=settings.request_defaults(),
                          prompts={pid: tuple(tokens) for pid, tokens in prompts.items()},
                          created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                          exactspec_version=_exactspec_version())


async def resolve_prompts(entries: list[dict], client) -> tuple[dict[str, list[int]], dict]:
    """Token ids of every prompt (text prompts through the engine's /tokenize) and the header note on it."""
    prompts, texts = {}, {}
    for entry in entries:
        if entry["prompt_tokens"] is not None:
            prompts[entry["prompt_id"]] = entry["prompt_tokens"]
        else:
            prompts[entry["prompt_id"]] = await client.tokenize(entry["text"])
            texts[entry["prompt_id"]] = entry["text"]
    note = {"prompt_texts": {"tokenized_by": f"{client.base_url}/tokenize", "add_special": True,
                             "texts": texts}} if texts else {}
    return prompts, note


def _sent(body: dict) -> dict:
    """The request as recorded: the body sent without the prompt (the header's prompt, plus the prefix)."""
    return {key: value for key, value in body.items() if key != "prompt"}


async def sample_completion(client, prompts: dict[str, list[int]], chain, job: Job) -> samples.Completion:
    """Request one completion for `job` and turn it into a samples.Completion record."""
    reply, body = await client.complete(prompts[job.prompt_id], job.seed, chain)
    top = None if reply.top_probs is None else tuple(tuple((int(i), float(p)) for i, p in row)
                                                     for row in reply.top_probs)
    return samples.Completion(prompt_id=job.prompt_id, seed=job.seed, tokens=tuple(reply.tokens),
                              repeat=job.repeat, request=_sent(body), text=reply.text, top_probs=top,
                              probs_kind=reply.probs_kind, finish_reason=reply.finish_reason,
                              timings=reply.timings, elapsed_s=round(reply.elapsed_s, 6))


async def sample_prefix(client, prompts: dict[str, list[int]], chain, seed: int,
                        job: tuple[str, tuple[int, ...]]) -> samples.PrefixProbs:
    """The reference's reported next-token distribution after one candidate prefix (one token requested).
    The distribution does not depend on the token sampled, but llama.cpp reports none when that token
    ends inside a UTF-8 character: then up to PREFIX_SEED_TRIES seeds are tried."""
    prompt_id, prefix = job
    for attempt in range(PREFIX_SEED_TRIES):
        reply, body = await client.complete([*prompts[prompt_id], *prefix], seed + attempt, chain)
        if reply.top_probs and reply.probs_kind is not None:
            break
    else:
        raise ValueError(f"prefix {list(prefix)} of {prompt_id!r}: the engine reported no probabilities in "
                         f"{PREFIX_SEED_TRIES} tries (n_probs ignored?)")
    return samples.PrefixProbs(prompt_id=prompt_id, prefix_tokens=tuple(prefix),
                               top_probs=tuple((int(i), float(p)) for i, p in reply.top_probs[0]),
                               probs_kind=reply.probs_kind, request=_sent(body))


def _client(url: str, settings: Settings, role: str = "reference") -> EngineClient | OpenAIEngineClient:
    """The endpoint's client in the run's dialect; vLLM's candidate reads its draft counters around each request."""
    if settings.dialect == "vllm":
        flags = " ".join((*settings.engine_flags, *settings.candidate_flags))
        kind = "post_sampling" if "processed_logprobs" in flags else "raw"
        return OpenAIEngineClient(url, probs_kind=kind, measure_drafts=role == "candidate",
                                  report_probs=role != "candidate", request_timeout_s=settings.request_timeout_s,
                                  retry=settings.retry)
    return EngineClient(url, endpoint=settings.endpoint, request_timeout_s=settings.request_timeout_s,
                        retry=settings.retry)


def _report(name: str, outcome: Outcome, skipped: int, dropped: int = 0) -> None:
    print(f"{name}: {outcome.written} written, {skipped} already on disk, {outcome.left} left", file=sys.stderr)
    if dropped:
        print(f"{name}: warning: {dropped} completions recorded without top_probs (the engine did not report a "
              "distribution at every position, e.g. speculative rounds)", file=sys.stderr)


async def collect_completions(urls: dict[str, str], entries: list[dict], out_dir: Path, settings: Settings,
                              budget: Budget) -> tuple[Outcome, dict[str, list[int]]]:
    """Sample every (prompt, seed, repeat) job at every role's URL, interleaved, into out_dir/ROLE.jsonl."""
    async with AsyncExitStack() as stack:
        clients: dict[str, Any] = {role: await stack.enter_async_context(_client(url, settings, role))
                                   for role, url in urls.items()}
        prompts, note = await resolve_prompts(entries, next(iter(clients.values())))
        jobs, skipped = [], 0
        for role, client in clients.items():
            plan = plan_jobs(list(prompts), role_seeds(role, settings.n_seeds, settings.seed_start,
                                                       settings.shared_seeds), settings.repeat_fraction)
            header = build_header(role, client.base_url, settings, await client.props(), prompts)
            state = samples.start_or_resume(out_dir / f"{role}.jsonl", header, note)
            skipped += len(state.completed)
            jobs.append([(role, job) for job in plan if (job.prompt_id, job.seed, job.repeat) not in state.completed])
        interleaved = [group[i] for i in range(max(map(len, jobs))) for group in jobs if i < len(group)]

        async def send(tagged):
            role, job = tagged
            return role, await sample_completion(clients[role], prompts, settings.chain, job)

        dropped = []

        def write(result) -> None:
            role, record = result
            samples.append_records(out_dir / f"{role}.jsonl", [record])
            if (record.request.get("n_probs") or record.request.get("logprobs")) and record.top_probs is None:
                dropped.append(record.seed)

        outcome = await run_bounded(interleaved, send, write, budget, settings.concurrency, "completions",
                                    REQUEST_ERRORS)
    _report("completions (" + ", ".join(urls) + ")", outcome, skipped, len(dropped))
    return outcome, prompts


def candidate_prefixes(*files: samples.SampleFile, positions: int | None = None) -> list[tuple[str, tuple[int, ...]]]:
    """Every distinct (prompt_id, generated-prefix) of the files' completions, shortest first; only prefixes
    shorter than `positions` (the PIT's positions 1..positions) when it is given. Teacher forcing asks the
    reference for the candidate's prefixes (the PIT) and for its own (its self-check at every depth)."""
    distinct = {(c.prompt_id, c.tokens[:j]) for f in files for c in f.completions for j in range(len(c.tokens))
                if positions is None or j < positions}
    return sorted(distinct, key=lambda key: (key[0], len(key[1]), key[1]))


def read_teacher_candidate(path: Path, settings: Settings) -> samples.SampleFile:
    """The candidate file to teacher-force, refused unless it was sampled with this run's chain."""
    candidate = samples.read_samples(path)
    if json.loads(json.dumps(settings.request_defaults())) != candidate.header.request_defaults:
        raise ValueError(f"teacher_force: {path} was sampled with another chain than this run's "
                         f"({candidate.header.request_defaults})")
    return candidate


async def teacher_force(url: str, candidate: samples.SampleFile, prompts: dict[str, list[int]], out_dir: Path,
                        settings: Settings, budget: Budget) -> Outcome:
    """Append to out_dir/reference.jsonl the reference's next-token top-N after each candidate prefix."""
    for pid, tokens in candidate.header.prompts.items():
        if list(tokens) != list(prompts.get(pid, [])):
            raise ValueError(f"teacher_force: {candidate.path}: prompt {pid!r} is not this run's prompt")
    chain = replace(settings.chain, max_tokens=1, n_probs=settings.teacher_n_probs, post_sampling_probs=True)
    path = out_dir / "reference.jsonl"
    async with _client(url, settings) as client:
        state = samples.start_or_resume(path, build_header("reference", url, settings, await client.props(), prompts))
        own = samples.read_samples(path)
        jobs = [key for key in candidate_prefixes(candidate, own, positions=settings.teacher_positions)
                if key not in state.prefixes]

        async def send(job):
            return await sample_prefix(client, prompts, chain, settings.seed_start, job)

        outcome = await run_bounded(jobs, send, lambda record: samples.append_records(path, [record]), budget,
                                    settings.concurrency, "teacher forcing", REQUEST_ERRORS)
    _report("prefix_probs (reference)", outcome, len(state.prefixes))
    return outcome


async def collect_async(prompts: list[dict], out_dir: Path, settings: Settings, reference_url: str | None,
                        candidate_url: str | None, teacher_force_path: Path | None) -> int:
    """The whole run: completions at every given URL, then teacher forcing if asked; the exit status."""
    urls = {role: url for role, url in (("reference", reference_url), ("candidate", candidate_url)) if url}
    if not urls:
        raise ValueError("reference_url / candidate_url: give one or both")
    if teacher_force_path and not reference_url:
        raise ValueError("teacher_force: needs the reference URL (the reference reports the probabilities)")
    if teacher_force_path and teacher_force_path.exists():  # refuse a mismatched file before any request
        read_teacher_candidate(teacher_force_path, settings)
    budget = Budget(settings.max_requests, settings.time_limit_s)
    outcome, token_prompts = await collect_completions(urls, prompts, out_dir, settings, budget)
    if teacher_force_path and reference_url and not (outcome.left or outcome.failure):  # it may be this run's output
        candidate = read_teacher_candidate(teacher_force_path, settings)
        outcome = await teacher_force(reference_url, candidate, token_prompts, out_dir, settings, budget)
    if outcome.failure:
        print(f"exactspec engine collect: stopped by a failing request: {outcome.failure}", file=sys.stderr)
    if outcome.left or outcome.failure:
        print(f"exactspec engine collect: incomplete ({budget.stop_reason or 'see above'}); rerun the same command "
              "to resume", file=sys.stderr)
        return EXIT_INCOMPLETE
    return EXIT_DONE


def collect_samples(prompts: str | Path | list[dict], out_dir: str | Path, settings: Settings | None = None, *,
                    reference_url: str | None = None, candidate_url: str | None = None,
                    teacher_force: str | Path | None = None) -> int:
    """Collect (or resume) out_dir/reference.jsonl and out_dir/candidate.jsonl; the programmatic form of
    `exactspec engine collect`. `prompts`: a prompts file or a list of prompt dicts. Returns the exit
    status (0 done, 1 incomplete: call again to resume); bad input raises ValueError."""
    entries = (check_prompts(prompts, "prompts") if isinstance(prompts, list) else read_prompts(prompts))
    return asyncio.run(collect_async(entries, Path(out_dir), settings or Settings(), reference_url, candidate_url,
                                     Path(teacher_force) if teacher_force else None))


def settings_from(args: argparse.Namespace) -> Settings:
    """Settings from the parsed command line (ValueError naming the argument when one is out of range)."""
    chain = SamplerChain(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
                         max_tokens=args.max_tokens, n_probs=args.n_probs, ignore_eos=args.ignore_eos)
    speculation = None
    if args.speculation_type:
        speculation = {"type": args.speculation_type, "draft_sampling": args.draft_sampling,
                       "expect_seed_coupled": bool(args.expect_seed_coupled)}
    if args.teacher_n_probs < 1:
        raise ValueError(f"--teacher-n-probs: {args.teacher_n_probs} must be >= 1")
    return Settings(chain=chain, n_seeds=args.seeds, seed_start=args.seed_start, repeat_fraction=args.repeat_fraction,
                    concurrency=args.concurrency, max_requests=args.max_requests, time_limit_s=args.time_limit_s,
                    request_timeout_s=args.request_timeout_s,
                    retry=RetryPolicy(attempts=args.retries, initial_wait_s=args.retry_wait_s),
                    endpoint=args.endpoint, engine_name=args.engine_name or args.dialect,
                    engine_version=args.engine_version,
                    engine_flags=tuple(shlex.split(args.engine_flags or "")),
                    candidate_flags=tuple(shlex.split(args.candidate_flags or "")), speculation=speculation,
                    model_name=args.model_name, model_sha256=args.model_sha256,
                    teacher_n_probs=args.teacher_n_probs, teacher_positions=args.teacher_positions,
                    shared_seeds=args.shared_seeds, dialect=args.dialect)


def _add_collect_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `exactspec engine collect` (defaults: plain softmax at T=1, bounded run)."""
    add = parser.add_argument
    add("--prompts", required=True, help='JSON Lines: {"prompt_id", "prompt_tokens": [ids]} or {"prompt_id", "text"}')
    add("--out-dir", required=True, help="writes/resumes OUT_DIR/reference.jsonl and OUT_DIR/candidate.jsonl")
    add("--reference-url", help="the engine with speculation off, e.g. http://127.0.0.1:8080")
    add("--candidate-url", help="the same engine and model with speculation on")
    add("--seeds", type=int, default=200, help="seeds per prompt, the same list at both endpoints (default 200)")
    add("--seed-start", type=int, default=1, help="first seed (default 1)")
    add("--shared-seeds", type=int, default=None, metavar="K", help="ask only the first K seeds of both ends (the "
        "seed-coupling check); the candidate's other seeds are disjoint from the reference's (default: all shared)")
    add("--dialect", choices=DIALECTS, default="llama.cpp", help="llama.cpp's native /completion (default) or "
        "vLLM's OpenAI server (/v1/completions with token ids; drafts read from /metrics)")
    add("--temperature", type=float, default=1.0)
    add("--top-k", type=int, default=0, help="0 = off (default)")
    add("--top-p", type=float, default=1.0)
    add("--min-p", type=float, default=0.0)
    add("--max-tokens", type=int, default=16, help="tokens per completion (default 16)")
    add("--n-probs", type=int, default=0, help="also record the engine's top-N per generated position")
    add("--ignore-eos", action="store_true", help="ask the engine to ignore EOS (it changes the law: both ends)")
    add("--repeat-fraction", type=float, default=0.0, help="re-request this fraction of seeds (determinism check)")
    add("--teacher-force", metavar="CAND.jsonl", help="append the reference's next-token top-N for every "
        "distinct prefix of these candidate completions to OUT_DIR/reference.jsonl")
    add("--teacher-n-probs", type=int, default=20, help="N of the teacher-forced top-N (default 20)")
    add("--teacher-positions", type=int, default=None, help="only prefixes shorter than this (default: all)")
    add("--concurrency", type=int, default=4, help="requests in flight at once (default 4; llama.cpp batches "
        "concurrent requests, which may perturb its logits: use 1 for bitwise determinism checks)")
    add("--max-requests", type=int, default=20_000, help="the run stops after this many completion requests, "
        "each retried at most --retries times (default 20000)")
    add("--time-limit-s", type=float, default=3600.0, help="the run stops after this many seconds (default 3600)")
    add("--request-timeout-s", type=float, default=120.0, help="per HTTP request (default 120)")
    add("--retries", type=int, default=5, help="attempts per request on connection errors, 5xx, 429 (default 5)")
    add("--retry-wait-s", type=float, default=0.5, help="first wait between attempts, doubling (default 0.5)")
    add("--endpoint", default="/completion", help="/completion (llama.cpp native, default) or /v1/completions "
        "(only for engines whose OpenAI reply carries token ids: llama.cpp's does not)")
    add("--engine-name", default=None, help="default: the dialect's engine (llama.cpp or vllm)")
    add("--engine-version", help="default: /props build_info (an sdist build of llama.cpp says b0-unknown)")
    add("--engine-flags", default="", help="the engine's command-line flags, recorded in both headers")
    add("--candidate-flags", default="", help="the candidate's extra flags (its speculation), recorded in its header")
    add("--speculation-type", help="draft-model, ngram, ... (recorded in the candidate's header)")
    add("--draft-sampling", choices=("greedy", "probabilistic"), default=None)
    add("--expect-seed-coupled", action="store_true", help="same seed must give the same tokens at both ends")
    add("--model-name", help="default: the file name of /props model_path")
    add("--model-sha256")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`exactspec engine SUBCOMMAND`: only `collect` so far."""
    sub = parser.add_subparsers(dest="engine_command", metavar="SUBCOMMAND", required=True)
    _add_collect_arguments(sub.add_parser("collect", help="sample completions from a reference and a candidate "
                                          "endpoint", description=__doc__,
                                          formatter_class=argparse.RawDescriptionHelpFormatter))


def run(args: argparse.Namespace) -> int:
    """Run `exactspec engine collect`; exit 0 done, 1 incomplete (rerun resumes), 2 bad input."""
    try:
        return collect_samples(args.prompts, args.out_dir, settings_from(args), reference_url=args.reference_url,
                               candidate_url=args.candidate_url, teacher_force=args.teacher_force)
    except ValueError as error:
        print(f"exactspec engine collect: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except httpx.HTTPError as error:
        print(f"exactspec engine collect: the engine did not answer: {type(error).__name__}: {error}", file=sys.stderr)
        return EXIT_INCOMPLETE
