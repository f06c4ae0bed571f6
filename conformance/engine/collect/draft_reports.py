"""`exactspec engine draft-reports CERT_DIR --draft-url URL`: the draft's reports, for a NOT_EXACT's diagnosis.

    exactspec engine draft-reports CERT_DIR --draft-url URL [--n-probs N] [--out FILE]

The draft's reports are its next-token top-N after the prefixes a candidate visited, asked of the draft model served
plain (speculation off) with the run's sampler chain, its post-sampling probabilities (``post_sampling`` reports: the
law drafts are drawn from) and its raw ones (``raw`` reports, ``post_sampling_probs`` false: the draft's softmax at
temperature 1, nothing truncated, which a rule reading q from the raw logits uses), into a sample file of role "draft" (prefix_probs records),
CERT_DIR/draft.jsonl by default, where `exactspec engine explain CERT_DIR` and `certify-samples --draft` read them.

They serve the diagnosis only (`diagnosis.draft_families`: the mechanisms of a rule that reads q, such as resampling
from p at a rejection), never a check or a rate. The draft endpoint speaks llama.cpp's `/completion` dialect (the
project's servers, the synthetic engine, llama-server with the draft model).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import httpx

from ....outcomes import ExitCode
from .. import samples
from ..sample_folder import sample_file_in
from ..checks import coverage_positions
from .client import LlamaCppClient, SamplerChain
from .forcing import candidate_prefixes, sample_prefix

#: Reports asked at once of the draft endpoint.
DRAFT_CONCURRENCY = 4


def run_chain(defaults: dict, n_probs: int) -> SamplerChain:
    """The run's sampler chain (the reference header's request_defaults) asking one token and its top `n_probs`;
    ValueError when the defaults are not a llama.cpp chain this collector can repeat."""
    try:
        chain = SamplerChain(
            temperature=float(defaults["temperature"]),
            top_k=int(defaults.get("top_k", 0)),
            top_p=float(defaults.get("top_p", 1.0)),
            min_p=float(defaults.get("min_p", 0.0)),
            max_tokens=int(defaults.get("max_tokens", defaults.get("n_predict", 16))),
            ignore_eos=bool(defaults.get("ignore_eos", False)),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(
            f"draft reports: the run's request_defaults are not a sampler chain ({error})"
        ) from None
    asked = {
        key: value
        for key, value in chain.request().items()
        if key not in ("n_probs", "post_sampling_probs")
    }
    differ = sorted(
        key for key, value in asked.items() if key in defaults and defaults[key] != value
    )
    if differ:
        raise ValueError(
            f"draft reports: the run's request_defaults differ from llama.cpp's chain in {differ}"
        )
    return replace(chain, max_tokens=1, n_probs=n_probs, post_sampling_probs=True)


def _prefixes(
    candidate: samples.SampleFile, positions: int, limit: int | None
) -> list[tuple[str, tuple[int, ...]]]:
    """The candidate's distinct prefixes shorter than `positions`; with `limit`, those of its first completions (in
    the file's order) until `limit` are taken."""
    if limit is None:
        return candidate_prefixes(candidate, positions=positions)
    seen: dict[tuple[str, tuple[int, ...]], None] = {}
    for completion in candidate.completions:
        for t in range(min(positions, len(completion.tokens))):
            seen.setdefault((completion.prompt_id, completion.tokens[:t]), None)
        if len(seen) >= limit:
            break
    return list(seen)[:limit]


async def _collect(
    url: str,
    candidate: samples.SampleFile,
    defaults: dict,
    positions: int,
    n_probs: int,
    out: Path,
    limit: int | None,
) -> int:
    chain = run_chain(defaults, n_probs)
    chains = {"post_sampling": chain, "raw": replace(chain, post_sampling_probs=False)}
    prompts = {pid: list(tokens) for pid, tokens in candidate.header.prompts.items()}
    jobs = [(job, kind) for job in _prefixes(candidate, positions, limit) for kind in chains]
    gate = asyncio.Semaphore(DRAFT_CONCURRENCY)
    async with LlamaCppClient(url) as client:
        props = await client.props()

        async def one(job: tuple[str, tuple[int, ...]], kind: str) -> samples.PrefixProbs | None:
            async with gate:
                record = await sample_prefix(client, prompts, chains[kind], 1, job)
            return None if record is None or record.probs_kind != kind else record

        records = [
            r
            for r in await asyncio.gather(*(one(job, kind) for job, kind in jobs))
            if r is not None
        ]
    header = samples.Header(
        role="draft",
        engine={"name": "draft", "base_url": url, "props": props or None},
        model={"name": (props or {}).get("model_alias") or "draft", "sha256": None},
        request_defaults=defaults,
        prompts=dict(candidate.header.prompts),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        exactspec_version=candidate.header.exactspec_version,
    )
    samples.write_samples(out, header, records)
    return len(records)


def collect_draft_reports(
    url: str,
    candidate: samples.SampleFile,
    defaults: dict,
    positions: int,
    out: str | Path,
    n_probs: int = 20,
    limit: int | None = None,
) -> int:
    """Ask the draft served plain at `url` for its top-`n_probs` after every prefix of `candidate`'s completions
    shorter than `positions` (at most `limit`, those of the first completions), with the chain of `defaults`, post-
    sampling and raw; write them to `out` (role "draft"); the reports written."""
    return asyncio.run(_collect(url, candidate, defaults, positions, n_probs, Path(out), limit))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "cert_dir",
        metavar="CERT_DIR",
        help="a certificate's folder: reference.jsonl[.gz] and candidate.jsonl[.gz]",
    )
    parser.add_argument(
        "--draft-url",
        required=True,
        metavar="URL",
        help="the draft model served plain (speculation "
        "off) in llama.cpp's /completion dialect, e.g. llama-server -m DRAFT.gguf",
    )
    parser.add_argument(
        "--n-probs", type=int, default=20, help="top-N asked per prefix (default: 20)"
    )
    parser.add_argument(
        "--out", metavar="FILE", help="where to write them (default: CERT_DIR/draft.jsonl)"
    )
    parser.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="at most N prefixes, those of the first completions (default: every prefix)",
    )


def run(args: argparse.Namespace) -> int:
    folder = Path(args.cert_dir)
    try:
        if args.n_probs < 1:
            raise ValueError(f"--n-probs: {args.n_probs} must be >= 1")
        if args.limit is not None and args.limit < 1:
            raise ValueError(f"--limit: {args.limit} must be >= 1")
        reference, candidate = (
            samples.read_samples(sample_file_in(folder, role))
            for role in ("reference", "candidate")
        )
        defaults = reference.header.request_defaults
        positions = max(
            (
                coverage_positions(defaults, completions)
                for completions in candidate.by_prompt().values()
            ),
            default=1,
        )
        written = collect_draft_reports(
            args.draft_url,
            candidate,
            defaults,
            positions,
            Path(args.out) if args.out else folder / "draft.jsonl",
            args.n_probs,
            args.limit,
        )
    except ValueError as error:
        print(f"exactspec engine draft-reports: {error}", file=sys.stderr)
        return ExitCode.USAGE
    except httpx.HTTPError as error:
        print(
            f"exactspec engine draft-reports: --draft-url {args.draft_url}: {type(error).__name__}: {error}",
            file=sys.stderr,
        )
        return ExitCode.UNAVAILABLE
    print(
        f"exactspec engine draft-reports: {written} reports of the draft -> {args.out or folder / 'draft.jsonl'}"
    )
    return ExitCode.OK


__all__ = ["add_arguments", "collect_draft_reports", "run", "run_chain"]
