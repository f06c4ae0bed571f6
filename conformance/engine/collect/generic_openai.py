"""The generic OpenAI-compatible dialect (``--dialect openai``): any server with ``/v1/completions`` (SGLang, TGI,
TensorRT-LLM's trtllm-serve, llama-cpp-python, LM Studio, Ollama, vLLM without its extensions).

* The request: the prompt as token ids, the law pinned as far as the OpenAI API names it (temperature, top-p, no
  penalties, no stop strings, one choice) plus ``top_k`` and ``min_p``, which most of these servers accept, plus the
  user's ``--request-extra`` JSON for the server's own knobs (llama-cpp-python's ``repeat_penalty`` defaults to
  1.1, say). All of it is the sample files' request defaults.
* Token ids: read from the reply where the server returns them, under the names servers use (``token_ids``,
  ``output_token_ids``, ``logprobs.token_ids``, integer ``tokens``); otherwise the ``logprobs.tokens`` strings are
  mapped to ids through the model's tokenizer (`vocabulary.Vocabulary`, ``--tokenizer``), which refuses what is
  ambiguous.
* Reports: ``logprobs.top_logprobs``, keyed by ``token_id:N`` or by token strings (mapped the same way), the N most
  probable kept (an extra entry for the sampled token is dropped, so the list never depends on the token drawn). A
  list with fewer entries than asked is dropped whole (two tokens shown alike collide in a JSON object), and so is
  one listing a string the tokenizer cannot map: the prefix is left unreported, its tokens skipped by the law checks
  (a choice made by the prefix alone). Whether
  they are the law sampled from (``post_sampling``) or the model's raw law (``raw``) is the user's declaration
  (``--reports``); raw reports serve the law checks only at T = 1 without truncation.
* Speculation evidence: Prometheus counters named by the user (``--draft-counter``, ``--accepted-counter``, read at
  ``/metrics`` around each batch), or declared by the user (``--declare-speculation``); the certificate says which.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from typing import Any

import httpx

from .client import Reply, RetryPolicy, SamplerChain
from .openai_client import metric_totals, send_keeping_reason
from .vocabulary import Vocabulary

_TOKEN_KEY = re.compile(r"^token_id:(\d+)$")
REPORT_KINDS = ("raw", "post_sampling")
#: How a reply's `probs_dropped` starts when a report lists a token string the tokenizer cannot map: the report is a
#: function of the prefix alone, so asking again cannot help; the prefix is left unreported (its tokens skipped).
UNMAPPABLE = "unmappable report"


class UnmappableReport(ValueError):
    """A report lists a token string that names no token, or several."""


def openai_request(chain: SamplerChain, extra: dict | None = None) -> dict[str, Any]:
    """The sampler part of a /v1/completions body, the user's extra fields last."""
    body = {"temperature": chain.temperature, "top_p": chain.top_p, "top_k": chain.top_k, "min_p": chain.min_p,
            "max_tokens": chain.max_tokens, "presence_penalty": 0.0, "frequency_penalty": 0.0, "n": 1,
            "stream": False, "stop": None, "logprobs": chain.n_probs or None}
    if chain.ignore_eos:
        body["ignore_eos"] = True
    return {**body, **(extra or {})}


def parse_request_extra(text: str | None) -> dict:
    """--request-extra: a JSON object (ValueError naming the argument otherwise)."""
    if not text:
        return {}
    try:
        extra = json.loads(text)
    except ValueError as error:
        raise ValueError(f"--request-extra: not JSON ({error})") from None
    if not isinstance(extra, dict):
        raise ValueError(f"--request-extra: expected a JSON object, got {type(extra).__name__}")
    return extra


def _ids(choice: dict, vocabulary: Vocabulary | None) -> list[int]:
    logprobs = choice.get("logprobs") or {}
    for found in (choice.get("token_ids"), choice.get("output_token_ids"), logprobs.get("token_ids"),
                  choice.get("tokens")):
        if isinstance(found, list) and all(isinstance(t, int) for t in found):
            return [int(t) for t in found]
    strings = logprobs.get("tokens")
    if strings is None:
        raise ValueError("response: no token ids (token_ids, output_token_ids, tokens) and no logprobs.tokens")
    if vocabulary is None:
        raise ValueError("response: the server returns token strings, not ids: give --tokenizer (the model's "
                         "tokenizer.json, its directory, or its GGUF) to map them")
    return [vocabulary.id_of(s, f"response position {i + 1}") for i, s in enumerate(strings)]


def _top(entry: dict, n_probs: int, vocabulary: Vocabulary | None, where: str) -> list[list[float]] | None:
    """[[id, p], ...] of the n_probs most probable entries (the sampled token's extra entry, less probable than all of
    them, is left out before any string is mapped); None when the list is short."""
    def probability(logprob: Any) -> float:
        return math.exp(float(logprob)) if logprob is not None and float(logprob) > -math.inf else 0.0

    kept = sorted((entry or {}).items(), key=lambda item: -probability(item[1]))[:n_probs]
    if len(kept) < n_probs:
        return None
    pairs = []
    for key, logprob in kept:
        match = _TOKEN_KEY.match(key)
        if match is None and vocabulary is None:
            raise ValueError(f"{where}: top_logprobs are keyed by token strings: give --tokenizer to map them")
        try:
            token = int(match.group(1)) if match else vocabulary.id_of(key, where)  # type: ignore[union-attr]
        except ValueError as error:
            raise UnmappableReport(str(error)) from None
        pairs.append([token, probability(logprob)])
    pairs.sort(key=lambda pair: (-pair[1], pair[0]))
    return pairs


def parse_generic_completion(body: dict, n_probs: int, probs_kind: str, vocabulary: Vocabulary | None) -> Reply:
    """A `Reply` from any OpenAI-compatible /v1/completions body (ValueError when malformed or unmappable)."""
    dropped, kept = None, None
    try:
        choice = body["choices"][0]
        tokens = _ids(choice, vocabulary)
        rows = (choice.get("logprobs") or {}).get("top_logprobs")
        top = [_top(entry, n_probs, vocabulary, f"top_logprobs at position {i + 1}") for i, entry in enumerate(rows)] \
            if n_probs and rows else None
    except UnmappableReport as error:
        top, dropped = None, f"{UNMAPPABLE}: {error}"
    except (KeyError, TypeError, IndexError, AttributeError) as error:
        raise ValueError(f"response: malformed /v1/completions body ({type(error).__name__}: {error})") from None
    complete = top is not None and len(top) == len(tokens) and all(row is not None for row in top)
    if top is not None and not complete:
        dropped = "a position's top_logprobs list is short or missing (token strings colliding?)"
    elif complete:
        kept = [row for row in top if row is not None]  # type: ignore[union-attr]
    return Reply(tokens=tokens, text=choice.get("text", ""), top_probs=kept, probs_kind=probs_kind if kept else None,
                 finish_reason=choice.get("finish_reason"), timings=None, probs_dropped=dropped, raw=body)


class GenericOpenAIClient:
    """One OpenAI-compatible endpoint (`client.EngineClient`'s interface); ``async with GenericOpenAIClient(...)``."""

    def __init__(self, base_url: str, *, vocabulary: Vocabulary | None = None, probs_kind: str = "raw",
                 counters: tuple[str, str] | None = None, request_extra: dict | None = None,
                 request_timeout_s: float = 120.0, retry: RetryPolicy | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url: {base_url!r} is not an http(s) URL")
        if probs_kind not in REPORT_KINDS:
            raise ValueError(f"--reports: {probs_kind!r} must be one of {REPORT_KINDS}")
        self.base_url, self.vocabulary, self.probs_kind = base_url.rstrip("/"), vocabulary, probs_kind
        self.counters = {"draft_n": counters[0], "draft_n_accepted": counters[1]} if counters else None
        self.request_extra, self.retry, self.requests_sent = dict(request_extra or {}), retry or RetryPolicy(), 0
        self.model: str | None = None
        self._model_lock = asyncio.Lock()
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=request_timeout_s, transport=transport)

    async def __aenter__(self) -> "GenericOpenAIClient":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._http.aclose()

    async def _send(self, method: str, path: str, body: dict | None, *, text: bool = False) -> Any:
        return await send_keeping_reason(self, method, path, body, text=text)

    async def _model(self) -> str:
        async with self._model_lock:
            if self.model is None:
                self.model = str((await self._send("GET", "/v1/models", None))["data"][0]["id"])
        return self.model

    async def draft_counters(self) -> dict[str, float]:
        """The user-named engine-wide draft counters now (ValueError when none were named)."""
        if self.counters is None:
            raise ValueError("--draft-counter / --accepted-counter: not given, so no counters can be read")
        return metric_totals(await self._send("GET", "/metrics", None, text=True), self.counters)

    async def complete(self, prompt_tokens: list[int], seed: int, chain: SamplerChain,
                       extra: dict | None = None) -> tuple[Reply, dict]:
        """Sample one completion of `prompt_tokens` with `seed`; the parsed result and the body sent."""
        body = {"model": await self._model(), **openai_request(chain, self.request_extra), **(extra or {}),
                "seed": int(seed), "prompt": [int(t) for t in prompt_tokens]}
        if self.vocabulary is not None and not chain.n_probs:
            body["logprobs"] = 0  # the token strings come with the logprobs object only
        started = time.perf_counter()
        reply = parse_generic_completion(await self._send("POST", "/v1/completions", body), chain.n_probs,
                                         self.probs_kind, self.vocabulary)
        reply.elapsed_s = time.perf_counter() - started
        return reply, body

    async def tokenize(self, text: str) -> list[int]:
        """The server's /tokenize (vLLM's and SGLang's shape), else ValueError: give prompt_tokens."""
        try:
            body = await self._send("POST", "/tokenize", {"model": await self._model(), "prompt": text})
            return [int(t) for t in body["tokens"]]
        except (httpx.HTTPStatusError, KeyError, TypeError) as error:
            raise ValueError(f"prompts: {self.base_url} has no usable /tokenize ({error}): give prompt_tokens") \
                from None

    async def chat_tokenize(self, messages: list[dict]) -> list[int]:
        raise ValueError("prompts: chat messages need the engine's own template; with --dialect openai give "
                         "prompt_tokens (ids) or text")

    async def props(self) -> dict | None:
        """The served model's name (the header's engine props), or None if /v1/models does not answer."""
        try:
            return {"model_alias": await self._model()}
        except (httpx.HTTPError, ValueError, KeyError, IndexError):
            return None


__all__ = ["GenericOpenAIClient", "REPORT_KINDS", "UNMAPPABLE", "UnmappableReport", "openai_request",
           "parse_generic_completion",
           "parse_request_extra"]
