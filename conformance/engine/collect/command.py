"""`exactspec engine collect`: sample completions from a reference and a candidate endpoint of one engine.

    exactspec engine collect --prompts PROMPTS.jsonl --reference-url URL --candidate-url URL --out-dir DIR
    exactspec engine collect --prompts PROMPTS.jsonl --reference-url URL --out-dir DIR --teacher-force CAND.jsonl

Every prompt is sampled with the same seed list at both endpoints (drawn at random from the engine's seed space,
the key recorded in both headers; `--consecutive-seeds` counts from --seed-start instead; with --shared-seeds K
only the first K are asked of both ends), with one pinned sampler chain (`client.SamplerChain`), into
DIR/reference.jsonl and DIR/candidate.jsonl (schema: ..samples). `--dialect` picks the protocol (`dialects`).
`--reference-url` and `--candidate-url` may be given several times (replicas; requests are spread over them). The
output is resumable: rerunning the same command skips the records already written and discards a half-written last
line. `--teacher-force` asks the reference for its next-token top-N after every distinct prefix of the candidate's
completions (and its own) and appends prefix_probs records to DIR/reference.jsonl. Every run is bounded by
--max-requests and --time-limit-s. `exactspec engine certify` does all of it in rounds, and certifies.

Exit status: 0 all requested records are on disk; 1 a limit or a failing request stopped the run early
(rerun to resume); 2 bad arguments or input files.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from pathlib import Path
from typing import Any

import httpx

from ..adapter import parse_options
from .client import RetryPolicy, SamplerChain
from .dialects import HTTP_DIALECTS
from .generic_openai import parse_request_extra
from .inprocess_client import ADAPTER_SCHEME
from .jobs import Budget, check_prompts, read_prompts
from .forcing import read_teacher_candidate, teacher_force
from .sampling import BACKGROUND_KEYS, DEFAULT_BACKGROUND_SAMPLING, DEFAULT_SERIAL_SHARE
from .sampling import Settings, build_header, collect_completions  # noqa: F401 (Settings, build_header: public here)

EXIT_DONE, EXIT_INCOMPLETE, EXIT_USAGE = 0, 1, 2


def _urls(value: str | list[str] | None) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


async def collect_async(prompts: list[dict], out_dir: Path, settings: Settings, reference_url: str | list[str] | None,
                        candidate_url: str | list[str] | None, teacher_force_path: Path | None) -> int:
    """The whole run: completions at every given URL, then teacher forcing if asked; the exit status."""
    urls = {role: _urls(url) for role, url in (("reference", reference_url), ("candidate", candidate_url)) if url}
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
        outcome = await teacher_force(_urls(reference_url), candidate, token_prompts, out_dir, settings, budget)
    if outcome.failure:
        print(f"exactspec engine collect: stopped by a failing request: {outcome.failure}", file=sys.stderr)
    if outcome.left or outcome.failure:
        print(f"exactspec engine collect: incomplete ({budget.stop_reason or 'see above'}); rerun the same command "
              "to resume", file=sys.stderr)
        return EXIT_INCOMPLETE
    return EXIT_DONE


def collect_samples(prompts: str | Path | list[dict], out_dir: str | Path, settings: Settings | None = None, *,
                    reference_url: str | list[str] | None = None, candidate_url: str | list[str] | None = None,
                    teacher_force: str | Path | None = None) -> int:
    """Collect (or resume) out_dir/reference.jsonl and out_dir/candidate.jsonl; the programmatic form of
    `exactspec engine collect`. `prompts`: a prompts file or a list of prompt dicts. Returns the exit
    status (0 done, 1 incomplete: call again to resume); bad input raises ValueError."""
    entries = (check_prompts(prompts, "prompts") if isinstance(prompts, list) else read_prompts(prompts))
    return asyncio.run(collect_async(entries, Path(out_dir), settings or Settings(), reference_url, candidate_url,
                                     Path(teacher_force) if teacher_force else None))


def adapter_urls(args: argparse.Namespace, reference: list[str] | None,
                 candidate: list[str] | None) -> tuple[list[str] | None, list[str] | None]:
    """Both ends' "URLs": the given ones, or with --engine-adapter its two roles (python:MODULE:CLASS); ValueError
    when both are given."""
    spec = getattr(args, "engine_adapter", None)
    if not spec:
        return reference, candidate
    if reference or candidate:
        raise ValueError("--engine-adapter: give either the adapter or --reference-url/--candidate-url, not both")
    return [ADAPTER_SCHEME + spec], [ADAPTER_SCHEME + spec]


def _check_openai_options(args: argparse.Namespace, dialect: str) -> None:
    """The openai dialect's options: only with it, and well-formed (ValueError naming the argument)."""
    given = [name for name, value in (("--tokenizer", args.tokenizer), ("--draft-counter", args.draft_counter),
                                      ("--accepted-counter", args.accepted_counter),
                                      ("--request-extra", args.request_extra),
                                      ("--text-prompts", args.text_prompts),
                                      ("--force-token-by-token", args.force_token_by_token),
                                      ("--reports", args.reports != "raw")) if value]
    if given and dialect != "openai":
        raise ValueError(f"{given[0]}: only with --dialect openai (this run's dialect is {dialect})")
    parse_request_extra(args.request_extra)
    if args.tokenizer and not Path(args.tokenizer).expanduser().exists():
        raise ValueError(f"--tokenizer: {args.tokenizer} does not exist")
    if args.text_prompts and not args.tokenizer:
        raise ValueError("--text-prompts: needs --tokenizer (the ids are sent as the text they decode to)")


def _counters(args: argparse.Namespace) -> tuple[str, str] | None:
    """--draft-counter and --accepted-counter: both or neither (ValueError naming them otherwise)."""
    named = (args.draft_counter, args.accepted_counter)
    if any(named) and not all(named):
        raise ValueError("--draft-counter / --accepted-counter: give both Prometheus counter names, or neither")
    if all(named) and args.declare_speculation:
        raise ValueError("--declare-speculation: the counters named show speculation; give one or the other")
    return (str(named[0]), str(named[1])) if all(named) else None


BACKGROUND_SAMPLING_TEXT = ",".join(f"{key}={value}" for key, value in DEFAULT_BACKGROUND_SAMPLING)


def parse_background_sampling(text: str) -> tuple[tuple[str, Any], ...]:
    """--background-sampling KEY=VALUE,...: keys of `sampling.BACKGROUND_KEYS`, values of their kind (ValueError
    naming the argument otherwise)."""
    pairs = []
    for part in (part.strip() for part in text.split(",") if part.strip()):
        key, equals, value = (piece.strip() for piece in part.partition("="))
        kind = BACKGROUND_KEYS.get(key)
        if not equals or kind is None:
            raise ValueError(f"--background-sampling: {part!r} is not KEY=VALUE with KEY one of "
                             f"{', '.join(BACKGROUND_KEYS)}")
        try:
            pairs.append((key, kind(value)))
        except ValueError:
            kind_name = "an integer" if kind is int else "a number"
            raise ValueError(f"--background-sampling: {key}={value!r} is not {kind_name}") from None
    return tuple(pairs)


def _load_options(args: argparse.Namespace) -> dict[str, Any]:
    """--serial-share, --background-load, --background-sampling as Settings fields (ValueError naming the argument)."""
    sampling = getattr(args, "background_sampling", BACKGROUND_SAMPLING_TEXT)
    if sampling != BACKGROUND_SAMPLING_TEXT and not getattr(args, "background_load", 0):
        raise ValueError("--background-sampling: only with --background-load N (the background requests it sets)")
    return {"serial_share": getattr(args, "serial_share", None), "background_load": getattr(args, "background_load", 0),
            "background_sampling": parse_background_sampling(sampling)}


def settings_from(args: argparse.Namespace) -> Settings:
    """Settings from the parsed command line of `engine collect` or `engine certify` (ValueError naming the argument
    when one is out of range)."""
    certify = not hasattr(args, "out_dir")  # `engine certify`: the reference reports its own top-N while sampling
    chain = SamplerChain(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
                         max_tokens=args.max_tokens, n_probs=getattr(args, "n_probs", 0), ignore_eos=args.ignore_eos)
    speculation = None
    if args.speculation_type or certify:
        speculation = {"type": args.speculation_type or "unspecified", "draft_sampling": args.draft_sampling,
                       "expect_seed_coupled": bool(args.expect_seed_coupled)}
        if args.declare_speculation:
            speculation["evidence"] = "declared"
    dialect, adapter = args.dialect, getattr(args, "engine_adapter", None)
    if adapter:
        if dialect not in (None, "python"):
            raise ValueError(f"--engine-adapter: an in-process adapter speaks no HTTP dialect (--dialect {dialect})")
        dialect = "python"
    _check_openai_options(args, dialect or "llama.cpp")
    if args.teacher_n_probs < 1:
        raise ValueError(f"--teacher-n-probs: {args.teacher_n_probs} must be >= 1")
    return Settings(chain=chain, n_seeds=getattr(args, "seeds", 200),
                    seeds="consecutive" if getattr(args, "consecutive_seeds", False) else "random",
                    seed_key=args.seed_key, seed_start=getattr(args, "seed_start", 1),
                    repeat_fraction=getattr(args, "repeat_fraction", 0.0), concurrency=args.concurrency,
                    reference_concurrency=args.reference_concurrency,
                    max_requests=getattr(args, "max_requests", 10**9),
                    time_limit_s=getattr(args, "time_limit_s", 3600.0), request_timeout_s=args.request_timeout_s,
                    retry=RetryPolicy(attempts=args.retries, initial_wait_s=args.retry_wait_s),
                    endpoint=args.endpoint, engine_name=args.engine_name or adapter or dialect or "llama.cpp",
                    engine_version=args.engine_version,
                    engine_flags=tuple(shlex.split(args.engine_flags or "")),
                    candidate_flags=tuple(shlex.split(args.candidate_flags or "")), speculation=speculation,
                    model_name=args.model_name, model_sha256=args.model_sha256,
                    teacher_n_probs=args.teacher_n_probs, teacher_positions=getattr(args, "teacher_positions", None),
                    reference_n_probs=args.teacher_n_probs if certify else None,
                    shared_seeds=getattr(args, "shared_seeds", None), dialect=dialect or "llama.cpp",
                    adapter_options=tuple(parse_options(getattr(args, "adapter_option", None) or []).items()),
                    tokenizer=args.tokenizer, reports=args.reports, draft_counters=_counters(args),
                    request_extra=args.request_extra, text_prompts=args.text_prompts,
                    token_by_token=args.force_token_by_token,
                    cache_prompt=not args.no_cache_prompt if certify else args.cache_prompt, **_load_options(args))


def _add_openai_arguments(add: Any) -> None:
    """The generic OpenAI dialect's options (`generic_openai`)."""
    add("--tokenizer", metavar="PATH", help="openai dialect: the model's tokenizer.json, its directory or its GGUF, to "
        "map token strings to ids where the server returns no ids (ambiguous strings are refused)")
    add("--reports", choices=("raw", "post_sampling"), default="raw", help="openai dialect: the server's logprobs are "
        "the model's raw law (default) or the law sampled from after the whole chain")
    add("--text-prompts", action="store_true", help="openai dialect: the server takes text prompts only "
        "(llama-cpp-python, TGI): ids are sent as the text they decode to (--tokenizer), each checked to tokenise back "
        "to the same ids at the server's /tokenize or /extras/tokenize; prefixes that do not stay unreported")
    add("--force-token-by-token", action="store_true", help="openai dialect: teacher forcing evaluates each forced "
        "token alone, as decoding does, for servers that keep one KV cache across requests and whose kernels are not "
        "batch-invariant (llama-cpp-python): requests to each reference server are serialised and shorter prefixes "
        "asked first")
    add("--draft-counter", metavar="NAME", help="openai dialect: the Prometheus counter of drafted tokens at /metrics")
    add("--accepted-counter", metavar="NAME", help="openai dialect: the counter of accepted draft tokens")
    add("--declare-speculation", action="store_true", help="the candidate speculates, declared (the server shows no "
        "counters); the certificate says so")
    add("--request-extra", metavar="JSON", help="openai dialect: a JSON object merged into every request, for the "
        "server's own knobs (e.g. '{\"repeat_penalty\": 1.0}'); recorded as part of the law")


def _add_load_arguments(add: Any) -> None:
    """The candidate's load design (`sampling.Settings.load_design`): lone requests and a background load."""
    add("--serial-share", type=float, default=None, metavar="F", help="candidate: this share of each prompt's seeds "
        "is asked one request at a time, the others at --concurrency (seed index i when floor((i + 1) F) > floor(i F): "
        "every 4th at 0.25, chosen before any sampling); each record says which, 'serial' or 'loaded' (default "
        f"{DEFAULT_SERIAL_SHARE}; 0 with --engine-adapter, which refuses it)")
    add("--background-load", type=int, default=0, metavar="N", help="candidate: N more requests sent with every wave "
        "of loaded ones, with --background-sampling, so that bugs that mix a batch's sampling show; not samples, "
        "their number and load are recorded (default 0: off; refused with --engine-adapter)")
    add("--background-sampling", default=BACKGROUND_SAMPLING_TEXT, metavar="KEY=VALUE,...", help="the background "
        f"requests' sampling, over the run's: {', '.join(BACKGROUND_KEYS)} (default {BACKGROUND_SAMPLING_TEXT})")


def add_sampling_arguments(parser: argparse.ArgumentParser, certify: bool = False) -> None:
    """The options `engine collect` and `engine certify` share: the dialect, the law, the load, the engine's identity."""
    add = parser.add_argument
    add("--dialect", choices=HTTP_DIALECTS, default=None, help="llama.cpp's native /completion (default), vLLM's "
        "OpenAI server (vllm: /v1/completions with its token-id extensions; drafts from /metrics) or any "
        "OpenAI-compatible server (openai: see --tokenizer, --reports, --draft-counter, --declare-speculation)")
    _add_openai_arguments(add)
    add("--engine-adapter", metavar="MODULE:CLASS", help="certify an in-process Python engine instead of two URLs: "
        "MODULE:CLASS is built as CLASS(role='reference'|'candidate', **options) and asked complete/report "
        "(exactspec.conformance.engine.adapter)")
    add("--adapter-option", action="append", metavar="KEY=VALUE", help="a keyword argument of the adapter's class "
        "(repeatable; values are strings)")
    add("--temperature", type=float, default=1.0)
    add("--top-k", type=int, default=0, help="0 = off (default)")
    add("--top-p", type=float, default=1.0)
    add("--min-p", type=float, default=0.0)
    add("--max-tokens", type=int, default=16, help="tokens per completion (default 16)")
    add("--ignore-eos", action="store_true", help="ask the engine to ignore EOS (it changes the law: both ends)")
    add("--seed-key", default=None, help="hex key of the random seeds (default: the resumed files', else fresh)")
    add("--teacher-n-probs", type=int, default=20, help="N of the reference's reported top-N (default 20)")
    if certify:
        add("--no-cache-prompt", action="store_true", help="teacher forcing re-evaluates every prompt (default: it "
            "reuses llama.cpp's prompt cache; every certificate measures that decode-time and teacher-forced "
            "reports agree within the tolerance)")
    else:
        add("--cache-prompt", action="store_true", help="teacher forcing reuses llama.cpp's prompt cache")
    add("--concurrency", type=int, default=4, help="candidate requests in flight at once, sent in waves that reach the "
        "server together; the certificate states the load measured (default 4)")
    add("--reference-concurrency", type=int, default=None, help="reference requests in flight (default: "
        "--concurrency)")
    _add_load_arguments(add)
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
    add("--expect-seed-coupled", action="store_true", help="the engine is expected to give the same tokens for the "
        "same seed at both ends (sampler-match drafting); `engine certify` then teacher-forces nothing until a seed "
        "mismatches; a mismatch disproves only the coupling, never exactness")
    add("--model-name", help="default: the file name of /props model_path")
    add("--model-sha256")


def _add_collect_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `exactspec engine collect` (defaults: plain softmax at T=1, bounded run)."""
    add = parser.add_argument
    add("--prompts", required=True, help='JSON Lines: {"prompt_id", "prompt_tokens": [ids]} or {"prompt_id", "text"}')
    add("--out-dir", required=True, help="writes/resumes OUT_DIR/reference.jsonl and OUT_DIR/candidate.jsonl")
    add("--reference-url", action="append", help="the engine with speculation off, e.g. http://127.0.0.1:8080 "
        "(several times: replicas, requests spread over them)")
    add("--candidate-url", action="append", help="the same engine and model with speculation on (several times: "
        "replicas)")
    add("--seeds", type=int, default=200, help="seeds per prompt, the same list at both endpoints (default 200)")
    add("--consecutive-seeds", action="store_true", help="seeds --seed-start, +1, ... instead of drawn at random "
        "from the engine's seed space (the coupling certificate then does not apply)")
    add("--seed-start", type=int, default=1, help="first seed with --consecutive-seeds (default 1)")
    add("--shared-seeds", type=int, default=None, metavar="K", help="ask only the first K seeds of both ends; the "
        "candidate's other seeds are disjoint from the reference's (default: all shared)")
    add("--n-probs", type=int, default=0, help="also record the engine's top-N per generated position")
    add("--repeat-fraction", type=float, default=0.0, help="re-request this fraction of seeds (determinism check)")
    add("--teacher-force", metavar="CAND.jsonl", help="append the reference's next-token top-N for every "
        "distinct prefix of these candidate completions to OUT_DIR/reference.jsonl")
    add("--teacher-positions", type=int, default=None, help="only prefixes shorter than this (default: all)")
    add("--max-requests", type=int, default=20_000, help="the run stops after this many completion requests, "
        "each retried at most --retries times (default 20000)")
    add("--time-limit-s", type=float, default=3600.0, help="the run stops after this many seconds (default 3600)")
    add_sampling_arguments(parser)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `exactspec engine collect`."""
    parser.description, parser.formatter_class = __doc__, argparse.RawDescriptionHelpFormatter
    _add_collect_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Run `exactspec engine collect`; exit 0 done, 1 incomplete (rerun resumes), 2 bad input."""
    try:
        reference_url, candidate_url = adapter_urls(args, args.reference_url, args.candidate_url)
        return collect_samples(args.prompts, args.out_dir, settings_from(args), reference_url=reference_url,
                               candidate_url=candidate_url, teacher_force=args.teacher_force)
    except ValueError as error:
        print(f"exactspec engine collect: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except httpx.HTTPError as error:
        print(f"exactspec engine collect: the engine did not answer: {type(error).__name__}: {error}", file=sys.stderr)
        return EXIT_INCOMPLETE
