"""vLLM's OpenAI dialect for the collector: the same interface as `client.LlamaCppClient` (complete, tokenize, props,
probe),
spoken to ``/v1/completions`` with token-id prompts.

* The request pins the law: temperature, top-k (0 = off), top-p, min-p, no penalties, no stop strings, the seed,
  and asks for the token ids (``return_token_ids``) and top-N logprobs keyed by token id
  (``return_tokens_as_token_ids``). `vllm_request(chain)` is the body's sampler part (a sample file's
  request defaults).
* The reported top-N: vLLM's ``top_logprobs`` holds the N most probable tokens plus the sampled one when it is
  not among them; the extra entry is dropped, so the listed set never depends on the token sampled (a report
  that did would bias the PIT). Under ``--logprobs-mode processed_logprobs`` they are the log-probabilities
  after temperature, min-p and top-k/top-p, the law sampled from: ``post_sampling``; otherwise ``raw``.
* The candidate is asked for no logprobs (`report_probs` False): under speculation vLLM 0.32 reports placeholders
  at accepted draft positions (0.0 for the token drawn, -inf for the others), and a request for top logprobs
  then fails with HTTP 400 "Out of range float values are not JSON compliant". Nothing the engine level uses
  comes from the candidate's reports.
* Speculation evidence: vLLM reports drafts only in Prometheus counters (``/metrics``). With `measure_drafts`
  each request is sent alone (a lock) between two reads of the counters, and the difference is the reply's
  ``timings`` (``draft_n``, ``draft_n_accepted``: the fields `hard.speculation_evidence` sums). Counters are
  updated as the engine's output is processed, so a count may land on the next request of the same endpoint;
  the total over a run is exact once the last read follows the last request.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from typing import Any

import httpx

from .client import Reply, RetryPolicy, SamplerChain, http_client, probe_http, send_with_retries
from .engine_errors import status_error
from .jobs import WAVE

DRAFT_METRICS = {
    "draft_n": "vllm:spec_decode_num_draft_tokens_total",
    "draft_n_accepted": "vllm:spec_decode_num_accepted_tokens_total",
}
_TOKEN_KEY = re.compile(r"^token_id:(\d+)$")


def vllm_request(chain: SamplerChain) -> dict[str, Any]:
    """The sampler part of a /v1/completions body: every stage that can warp the law, pinned."""
    return {
        "temperature": chain.temperature,
        "top_k": chain.top_k,
        "top_p": chain.top_p,
        "min_p": chain.min_p,
        "max_tokens": chain.max_tokens,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "ignore_eos": chain.ignore_eos,
        "stop": [],
        "n": 1,
        "stream": False,
        "logprobs": chain.n_probs or None,
        "return_token_ids": True,
        "return_tokens_as_token_ids": True,
    }


async def send_keeping_reason(
    client: Any,
    method: str,
    path: str,
    body: dict | None,
    *,
    text: bool = False,
    times: list | None = None,
) -> Any:
    """`send_with_retries` for OpenAI-style servers, which say why a request failed in the body: the error keeps it;
    the decoded JSON, or the text with `text` (`times`: a completion's exchange, timed and waved)."""

    def read(response: httpx.Response) -> Any:
        if response.status_code >= 400:
            raise status_error(response)
        return response.text if text else response.json()

    return await send_with_retries(client, method, path, body, read, times)


def metric_totals(text: str, names: dict[str, str] = DRAFT_METRICS) -> dict[str, float]:
    """The named counters of a Prometheus text page, summed over their label sets (absent: 0)."""
    totals = dict.fromkeys(names, 0.0)
    wanted = {metric: key for key, metric in names.items()}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in wanted:
            totals[wanted[name]] += float(line.rsplit(" ", 1)[1])
    return totals


def _top_list(entry: dict[str, float], n_probs: int) -> list[list[float]]:
    """[[id, p], ...] of the n_probs most probable entries of one position's ``top_logprobs`` (keys token_id:N)."""
    pairs = []
    for key, logprob in entry.items():
        match = _TOKEN_KEY.match(key)
        if match is None:
            raise ValueError(
                f"response: top_logprobs key {key!r} is not 'token_id:N' (return_tokens_as_token_ids)"
            )
        p = math.exp(float(logprob)) if logprob is not None and float(logprob) > -math.inf else 0.0
        pairs.append([int(match.group(1)), p])
    pairs.sort(key=lambda pair: (-pair[1], pair[0]))
    return pairs[:n_probs]


def parse_openai_completion(body: dict, n_probs: int, probs_kind: str) -> Reply:
    """A `Reply` from a vLLM /v1/completions body (ValueError if it is malformed)."""
    try:
        choice = body["choices"][0]
        tokens = [int(t) for t in choice["token_ids"]]
        logprobs = choice.get("logprobs") or {}
        rows = logprobs.get("top_logprobs")
        top = [_top_list(entry or {}, n_probs) for entry in rows] if n_probs and rows else None
    except (KeyError, TypeError, IndexError, AttributeError) as error:
        raise ValueError(
            f"response: malformed /v1/completions body ({type(error).__name__}: {error})"
        ) from None
    if top is not None and len(top) != len(tokens):
        raise ValueError(f"response: {len(top)} top_logprobs rows for {len(tokens)} tokens")
    return Reply(
        tokens=tokens,
        text=choice.get("text", ""),
        top_probs=top,
        probs_kind=probs_kind if top else None,
        finish_reason=choice.get("finish_reason"),
        timings=None,
        raw=body,
    )


class OpenAIEndpoint:
    """What both OpenAI-style clients share: the URL, the HTTP client, retries, the served model's name (asked once);
    a subclass calls ``super().__init__`` and adds its dialect."""

    def __init__(
        self,
        base_url: str,
        request_timeout_s: float,
        retry: RetryPolicy | None,
        transport: httpx.AsyncBaseTransport | None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"URL: {base_url!r} is not an http(s) URL")
        self.base_url, self.retry, self.requests_sent = (
            base_url.rstrip("/"),
            retry or RetryPolicy(),
            0,
        )
        self.model: str | None = None
        self._model_lock = asyncio.Lock()
        self._http = http_client(self.base_url, request_timeout_s, transport)

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._http.aclose()

    async def _send(
        self,
        method: str,
        path: str,
        body: dict | None,
        *,
        text: bool = False,
        times: list | None = None,
    ) -> Any:
        return await send_keeping_reason(self, method, path, body, text=text, times=times)

    async def probe(self) -> None:
        """Whether anything answers at the URL (`client.probe_http`, at /v1/models)."""
        await probe_http(self._http, self.base_url, "/v1/models")

    async def _model(self) -> str:
        async with self._model_lock:
            if self.model is None:
                self.model = str((await self._send("GET", "/v1/models", None))["data"][0]["id"])
        return self.model


class OpenAIEngineClient(OpenAIEndpoint):
    """One vLLM endpoint (`client.EngineClient`'s interface); use as ``async with OpenAIEngineClient(...)``."""

    def __init__(
        self,
        base_url: str,
        *,
        probs_kind: str = "post_sampling",
        measure_drafts: bool = True,
        report_probs: bool = True,
        request_timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, request_timeout_s, retry, transport)
        if probs_kind not in ("post_sampling", "raw"):
            raise ValueError(f"probs_kind must be 'post_sampling' or 'raw', got {probs_kind!r}")
        self.probs_kind, self.measure_drafts, self.report_probs = (
            probs_kind,
            measure_drafts,
            report_probs,
        )
        self._lock = asyncio.Lock()

    async def draft_counters(self) -> dict[str, float]:
        """The engine-wide draft counters now (`DRAFT_METRICS`, summed over label sets)."""
        return metric_totals(await self._send("GET", "/metrics", None, text=True))

    async def complete(
        self, prompt_tokens: list[int], seed: int, chain: SamplerChain, extra: dict | None = None
    ) -> tuple[Reply, dict]:
        """Sample one completion of `prompt_tokens` with `seed`; the parsed result and the body sent."""
        body = {
            "model": await self._model(),
            **vllm_request(chain),
            **(extra or {}),
            "seed": int(seed),
            "prompt": [int(t) for t in prompt_tokens],
        }
        if not self.report_probs:
            body["logprobs"] = None
        # a request behind a lock waits for no wave
        unwaved = WAVE.set(None) if self.measure_drafts else None
        try:
            async with self._lock if self.measure_drafts else _NoLock():
                before = await self.draft_counters() if self.measure_drafts else None
                times: list[float] = []
                started = time.perf_counter()
                reply = parse_openai_completion(
                    await self._send("POST", "/v1/completions", body, times=times),
                    chain.n_probs if self.report_probs else 0,
                    self.probs_kind,
                )
                reply.elapsed_s = time.perf_counter() - started
                reply.sent_at, reply.received_at = times
                if before is not None:
                    after = await self.draft_counters()
                    reply.timings = {key: int(after[key] - before[key]) for key in DRAFT_METRICS}
        finally:
            if unwaved is not None:
                WAVE.reset(unwaved)
        return reply, body

    async def tokenize(self, text: str) -> list[int]:
        """vLLM's own tokenisation of `text`, with its special tokens."""
        body = await self._send(
            "POST",
            "/tokenize",
            {"model": await self._model(), "prompt": text, "add_special_tokens": True},
        )
        return [int(t) for t in body["tokens"]]

    async def chat_tokenize(self, messages: list[dict]) -> list[int]:
        """A chat through vLLM's chat template (its /tokenize with messages and the generation prompt)."""
        body = await self._send(
            "POST",
            "/tokenize",
            {"model": await self._model(), "messages": messages, "add_generation_prompt": True},
        )
        return [int(t) for t in body["tokens"]]

    async def props(self) -> dict | None:
        """vLLM's version and served model (the header's engine props), or None if it does not answer."""
        try:
            version = (await self._send("GET", "/version", None)).get("version")
            models = (await self._send("GET", "/v1/models", None))["data"]
        except (httpx.HTTPError, ValueError, KeyError, IndexError):
            return None
        return {
            "build_info": f"vllm {version}",
            "model_alias": models[0].get("id"),
            "max_model_len": models[0].get("max_model_len"),
        }


class _NoLock:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None
