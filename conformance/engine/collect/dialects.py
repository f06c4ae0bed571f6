"""The dialects the collector speaks: one table, one entry per dialect.

A `Dialect` says how to reach an engine (its client class and the request's sampler part), which seeds it takes
(the seed space random seeds are drawn from), and where it shows speculation: per reply (``timings``, llama.cpp's
``draft_n`` / ``draft_n_accepted``) or only engine-wide (``metrics``: counters read around each batch of
candidate requests, recorded as ``counters`` records). Adding a dialect is one module (its client, with the
interface of `client.EngineClient`: ``complete``, ``tokenize``, ``props`` and, for ``metrics``, ``draft_counters``)
and one entry here. The ``python`` entry is not HTTP: an in-process adapter (`..adapter`) behind the same interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

from .client import EngineClient, SamplerChain
from .generic_openai import GenericOpenAIClient, openai_request, parse_request_extra
from .inprocess_client import InProcessClient, python_request
from .openai_client import OpenAIEngineClient, vllm_request
from .vocabulary import Vocabulary

#: llama.cpp's seeds are uint32, and 2**32 - 1 means "random": seeds are drawn from [0, 2**32 - 2]. vLLM takes any
#: integer; the same space is used (its law is then the law under a seed uniform on that space).
UINT32_SEED_SPACE = 2**32 - 1


@dataclass(frozen=True)
class Dialect:
    """How to sample one kind of engine."""

    name: str
    make_client: Callable[..., Any]  # (url, role, settings) -> a client
    request_defaults: Callable[[SamplerChain, Any], dict]  # (chain, settings) -> the sampler part of every request
    seed_space: int
    speculation: str  # "timings" (per reply), "metrics" (engine-wide counters around a batch) or "configured"
    describe: str

    def speculation_of(self, settings: Any) -> str:
        """Where this run reads speculation: the dialect's, or for "configured" the user's choice (counters named:
        "metrics"; else "declared")."""
        if self.speculation != "configured":
            return self.speculation
        return "metrics" if settings.draft_counters else "declared"


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


@lru_cache(maxsize=4)
def _vocabulary(path: str | None) -> Vocabulary | None:
    return Vocabulary.from_path(path) if path else None


def _generic_client(url: str, role: str, settings: Any) -> GenericOpenAIClient:
    """Any OpenAI-compatible server: ids or strings (through --tokenizer), the user's counters on the candidate."""
    return GenericOpenAIClient(url, vocabulary=_vocabulary(settings.tokenizer), probs_kind=settings.reports,
                               counters=settings.draft_counters if role == "candidate" else None,
                               request_extra=parse_request_extra(settings.request_extra),
                               text_prompts=settings.text_prompts,
                               token_by_token=settings.token_by_token and role == "reference",
                               request_timeout_s=settings.request_timeout_s, retry=settings.retry)


def _adapter_client(url: str, role: str, settings: Any) -> InProcessClient:
    """An in-process adapter: the "URL" is python:module:Class (`inprocess_client.ADAPTER_SCHEME`)."""
    return InProcessClient(url.removeprefix("python:"), role, dict(settings.adapter_options))


DIALECTS: dict[str, Dialect] = {
    "llama.cpp": Dialect("llama.cpp", _llama_client, lambda chain, settings: chain.request(), UINT32_SEED_SPACE,
                         "timings",
                         "llama.cpp's native /completion (token ids with return_tokens, post-sampling top-N, "
                         "draft counters in each reply's timings)"),
    "vllm": Dialect("vllm", _vllm_client, lambda chain, settings: vllm_request(chain), UINT32_SEED_SPACE, "metrics",
                    "vLLM's OpenAI server (/v1/completions with token-id prompts, return_token_ids, top-N logprobs "
                    "keyed by id; drafts from /metrics counters around each batch)"),
    "openai": Dialect("openai", _generic_client,
                      lambda chain, settings: openai_request(chain, parse_request_extra(settings.request_extra)),
                      UINT32_SEED_SPACE, "configured",
                      "any OpenAI-compatible /v1/completions server (token-id prompts, or their text with --text-prompts; ids from the reply or token "
                      "strings mapped through --tokenizer; top-N logprobs; drafts from named /metrics counters or "
                      "declared)"),
    "python": Dialect("python", _adapter_client, python_request, UINT32_SEED_SPACE, "timings",
                      "an in-process engine adapter (`--engine-adapter module:Class`: complete and report, no HTTP; "
                      "draft counters per completion)"),
}
DIALECT_NAMES = tuple(DIALECTS)
HTTP_DIALECTS = tuple(name for name in DIALECTS if name != "python")  # `--dialect`'s choices


def get_dialect(name: str) -> Dialect:
    """The dialect called `name` (ValueError naming the dialects otherwise)."""
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"dialect: {name!r} must be one of {DIALECT_NAMES}") from None


__all__ = ["DIALECTS", "DIALECT_NAMES", "HTTP_DIALECTS", "Dialect", "UINT32_SEED_SPACE", "get_dialect"]
