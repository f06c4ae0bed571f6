"""The dialects the collector speaks: one table, one entry per dialect.

A `Dialect` says how to reach an engine (its client class and the request's sampler part), which seeds it takes
(the seed space random seeds are drawn from), and where it shows speculation: per reply (``timings``, llama.cpp's
``draft_n`` / ``draft_n_accepted``) or only engine-wide (``metrics``: counters read around each batch of
candidate requests, recorded as ``counters`` records). Adding a dialect is one module (its client, with the
interface of `client.EngineClient`: ``complete``, ``tokenize``, ``props`` and, for ``metrics``, ``draft_counters``)
and one entry here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .client import EngineClient, SamplerChain
from .openai_client import OpenAIEngineClient, vllm_request

#: llama.cpp's seeds are uint32, and 2**32 - 1 means "random": seeds are drawn from [0, 2**32 - 2]. vLLM takes any
#: integer; the same space is used (its law is then the law under a seed uniform on that space).
UINT32_SEED_SPACE = 2**32 - 1


@dataclass(frozen=True)
class Dialect:
    """How to sample one kind of engine."""

    name: str
    make_client: Callable[..., Any]  # (url, role, settings) -> a client
    request_defaults: Callable[[SamplerChain], dict]  # the sampler part of every request (a file's request defaults)
    seed_space: int
    speculation: str  # "timings" (per reply) or "metrics" (engine-wide counters around a batch)
    describe: str


def _llama_client(url: str, role: str, settings: Any) -> EngineClient:
    return EngineClient(url, endpoint=settings.endpoint, request_timeout_s=settings.request_timeout_s,
                        retry=settings.retry)


def _vllm_client(url: str, role: str, settings: Any) -> OpenAIEngineClient:
    """vLLM's OpenAI server: post-sampling reports when the flags say processed logprobs; the candidate is asked for
    none (its placeholders at accepted drafts break the reply); drafts are counted around batches."""
    flags = " ".join((*settings.engine_flags, *settings.candidate_flags))
    kind = "post_sampling" if "processed_logprobs" in flags else "raw"
    return OpenAIEngineClient(url, probs_kind=kind, measure_drafts=False, report_probs=role != "candidate",
                              request_timeout_s=settings.request_timeout_s, retry=settings.retry)


DIALECTS: dict[str, Dialect] = {
    "llama.cpp": Dialect("llama.cpp", _llama_client, lambda chain: chain.request(), UINT32_SEED_SPACE, "timings",
                         "llama.cpp's native /completion (token ids with return_tokens, post-sampling top-N, "
                         "draft counters in each reply's timings)"),
    "vllm": Dialect("vllm", _vllm_client, vllm_request, UINT32_SEED_SPACE, "metrics",
                    "vLLM's OpenAI server (/v1/completions with token-id prompts, return_token_ids, top-N logprobs "
                    "keyed by id; drafts from /metrics counters around each batch)"),
}
DIALECT_NAMES = tuple(DIALECTS)


def get_dialect(name: str) -> Dialect:
    """The dialect called `name` (ValueError naming the dialects otherwise)."""
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"dialect: {name!r} must be one of {DIALECT_NAMES}") from None


__all__ = ["DIALECTS", "DIALECT_NAMES", "Dialect", "UINT32_SEED_SPACE", "get_dialect"]
