"""The generic OpenAI-compatible dialect (``--dialect openai``): any server with ``/v1/completions`` (SGLang, TGI,
TensorRT-LLM's trtllm-serve, llama-cpp-python, LM Studio, Ollama, vLLM without its extensions).

* The request: the prompt as token ids, or with ``--text-prompts`` as the text they decode to, checked once to
  tokenise back to the same ids at the server (`GenericOpenAIClient.text_of`); the law pinned as far as the OpenAI
  API names it (temperature, top-p, no penalties, no stop strings, one choice) plus ``top_k`` and ``min_p``, plus
  the user's ``--request-extra`` JSON for the server's own knobs (llama-cpp-python's ``repeat_penalty`` defaults to
  1.1, say). All of it is the sample files' request defaults.
* Token ids: read from the reply where the server returns them, under the names servers use (``token_ids``,
  ``output_token_ids``, ``logprobs.token_ids``, integer ``tokens``); otherwise the ``logprobs.tokens`` strings are
  mapped to ids through the model's tokenizer (`vocabulary.Vocabulary`, ``--tokenizer``): a string naming no token is
  refused, one naming several cuts the completion there (`AMBIGUOUS_END`); an end token the server left out is put
  back (`_with_end`).
* Reports: ``logprobs.top_logprobs``, keyed by ``token_id:N`` or by token strings (mapped the same way), the N most
  probable kept (an extra entry for the sampled token is dropped, so the list never depends on the token drawn). A
  list with fewer entries than asked (two tokens shown alike collide in a JSON object) or listing a string the
  tokenizer cannot map is dropped whole: the prefix is left unreported (a choice made by the prefix alone). Whether
  they are the law sampled from (``post_sampling``) or the model's raw law (``raw``) is the user's declaration
  (``--reports``); raw reports become the sampled law where they determine it (`sampled_from_raw`).
* Teacher forcing one token at a time for servers that keep one KV cache (``--force-token-by-token``:
  `token_by_token`).
* Speculation evidence: Prometheus counters named by the user (``--draft-counter``, ``--accepted-counter``, read at
  ``/metrics`` around each batch), or declared by the user (``--declare-speculation``); the certificate says which.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import replace
from typing import Any

import httpx

from .client import Reply, RetryPolicy, SamplerChain
from .jobs import WAVE
from .openai_client import OpenAIEndpoint, metric_totals
from .token_by_token import held_after, priming_prefixes, session_of
from .vocabulary import Vocabulary

_TOKEN_KEY = re.compile(r"^token_id:(\d+)$")
REPORT_KINDS = ("raw", "post_sampling")
#: How a reply's `probs_dropped` starts when a report lists a token string the tokenizer cannot map: the report is a
#: function of the prefix alone, so asking again cannot help; the prefix is left unreported (its tokens skipped).
UNMAPPABLE = "unmappable report"
#: ... and when the list is short: two of its top-N tokens are shown alike and collide in the JSON object, which the
#: prefix decides, not the token sampled (the sampled token's own entry is never counted among the N).
SHORT_REPORT = "short report"


#: A completion's finish reason where it was cut at a token string several tokens are shown as: that position keeps
#: the smallest of their ids (any usable report lists none of them, so its top-N "other" bin counts it rightly), and
#: the later positions, whose prefix is unknown, are not kept.
AMBIGUOUS_END = "ambiguous token"


class UnmappableReport(ValueError):
    """A report lists a token string that names no token, or several."""


class PrefixNotText(ValueError):
    """Ids a text-only server cannot be asked about: their text does not tokenise back to them there."""


def openai_request(chain: SamplerChain, extra: dict | None = None) -> dict[str, Any]:
    """The sampler part of a /v1/completions body, the user's extra fields last."""
    body = {
        "temperature": chain.temperature,
        "top_p": chain.top_p,
        "top_k": chain.top_k,
        "min_p": chain.min_p,
        "max_tokens": chain.max_tokens,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "n": 1,
        "stream": False,
        "stop": None,
        "logprobs": chain.n_probs or None,
    }
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


def _ids(choice: dict, vocabulary: Vocabulary | None) -> tuple[list[int], str | None]:
    """The completion's token ids, and the finish reason when they were cut short here (`AMBIGUOUS_END`)."""
    logprobs = choice.get("logprobs") or {}
    for found in (
        choice.get("token_ids"),
        choice.get("output_token_ids"),
        logprobs.get("token_ids"),
        choice.get("tokens"),
    ):
        if isinstance(found, list) and all(isinstance(t, int) for t in found):
            return [int(t) for t in found], None
    strings = logprobs.get("tokens")
    if strings is None:
        raise ValueError(
            "response: no token ids (token_ids, output_token_ids, tokens) and no logprobs.tokens"
        )
    if vocabulary is None:
        raise ValueError(
            "response: the server returns token strings, not ids: give --tokenizer (the model's "
            "tokenizer.json, its directory, or its GGUF) to map them"
        )
    ids: list[int] = []
    for i, shown in enumerate(strings):
        found = vocabulary.candidates(shown)
        if not found:
            raise ValueError(
                f"response position {i + 1}: the token string {shown!r} is no token of "
                f"{vocabulary.source}"
            )
        ids.append(found[0])
        if len(found) > 1:
            return ids, AMBIGUOUS_END
    return ids, None


def _with_end(
    ids: list[int], finish: str | None, vocabulary: Vocabulary | None, max_tokens: int
) -> list[int]:
    """Servers that leave the end-of-generation token out of a completion that stopped on it (llama-cpp-python) get
    it back: the model's EOS id, where the completion stopped short of max_tokens on a token not an end id."""
    if (
        vocabulary is None
        or not vocabulary.end_ids
        or finish not in ("stop", "eos")
        or len(ids) >= max_tokens
    ):
        return ids
    return ids if ids and ids[-1] in vocabulary.end_ids else [*ids, vocabulary.end_ids[0]]


def _top(
    entry: dict, n_probs: int, vocabulary: Vocabulary | None, where: str
) -> list[list[float]] | None:
    """[[id, p], ...] of the n_probs most probable entries (the sampled token's extra entry, less probable than all of
    them, is left out before any string is mapped); None when the list is short."""

    def probability(logprob: Any) -> float:
        return (
            math.exp(float(logprob)) if logprob is not None and float(logprob) > -math.inf else 0.0
        )

    kept = sorted((entry or {}).items(), key=lambda item: -probability(item[1]))[:n_probs]
    if len(kept) < n_probs:
        return None
    pairs = []
    for key, logprob in kept:
        match = _TOKEN_KEY.match(key)
        if match is None and vocabulary is None:
            raise ValueError(
                f"{where}: top_logprobs are keyed by token strings: give --tokenizer to map them"
            )
        try:
            token = int(match.group(1)) if match else vocabulary.id_of(key, where)  # type: ignore[union-attr]
        except ValueError as error:
            raise UnmappableReport(str(error)) from None
        pairs.append([token, probability(logprob)])
    pairs.sort(key=lambda pair: (-pair[1], pair[0]))
    return pairs


def sampled_from_raw(
    rows: list[list[list[float]]], chain: SamplerChain
) -> list[list[list[float]]] | None:
    """The law sampled from, from raw top-N rows, where they determine it: T = 0 (the argmax), or top-k with k <= N
    and neither top-p nor min-p (top-k keeps the k most probable whatever the temperature; the law is then their
    probabilities to the power 1/T, normalised). None otherwise."""
    if chain.temperature == 0:
        return [[[row[0][0], 1.0]] for row in rows]
    if (
        not rows
        or not 0 < chain.top_k <= min(len(row) for row in rows)
        or chain.top_p < 1
        or chain.min_p > 0
    ):
        return None
    out = []
    for row in rows:
        kept = row[: chain.top_k]
        weights = [p ** (1.0 / chain.temperature) for _, p in kept]
        total = sum(weights)
        out.append([[token, w / total] for (token, _), w in zip(kept, weights)])
    return out


def _reports(
    choice: dict, n_tokens: int, chain: SamplerChain, probs_kind: str, vocabulary: Vocabulary | None
) -> tuple[list | None, str | None, str | None]:
    """(top-N rows, their kind, why they were dropped) of one choice: raw rows become the sampled law where they
    determine it (`sampled_from_raw`)."""
    rows = (choice.get("logprobs") or {}).get("top_logprobs")
    if not chain.n_probs or not rows:
        return None, None, None
    try:
        top = [
            _top(entry, chain.n_probs, vocabulary, f"top_logprobs at position {i + 1}")
            for i, entry in enumerate(rows)
        ]
    except UnmappableReport as error:
        return None, None, f"{UNMAPPABLE}: {error}"
    top = top[:n_tokens]
    if len(top) < n_tokens or any(row is None for row in top):
        return (
            None,
            None,
            f"{SHORT_REPORT}: a position's top_logprobs list is short or missing (token strings collide)",
        )
    if probs_kind == "raw":
        sampled = sampled_from_raw(top, chain)  # type: ignore[arg-type]
        if sampled is not None:
            return sampled, "post_sampling", None
    return top, probs_kind, None


def parse_generic_completion(
    body: dict, chain: SamplerChain, probs_kind: str, vocabulary: Vocabulary | None
) -> Reply:
    """A `Reply` from any OpenAI-compatible /v1/completions body (ValueError when malformed or unmappable)."""
    try:
        choice = body["choices"][0]
        tokens, cut = _ids(choice, vocabulary)
        kept, kind, dropped = _reports(choice, len(tokens), chain, probs_kind, vocabulary)
    except (KeyError, TypeError, IndexError, AttributeError) as error:
        raise ValueError(
            f"response: malformed /v1/completions body ({type(error).__name__}: {error})"
        ) from None
    finish = cut or choice.get("finish_reason")
    if cut is None:
        tokens = _with_end(tokens, finish, vocabulary, chain.max_tokens)
        # the end token a server left out has no report
        if kept is not None and len(kept) < len(tokens):
            kept, kind = None, None
    return Reply(
        tokens=tokens,
        text=choice.get("text", ""),
        top_probs=kept,
        probs_kind=kind,
        finish_reason=finish,
        timings=None,
        probs_dropped=dropped,
        raw=body,
    )


class GenericOpenAIClient(OpenAIEndpoint):
    """One OpenAI-compatible endpoint (`client.EngineClient`'s interface); ``async with GenericOpenAIClient(...)``."""

    def __init__(
        self,
        base_url: str,
        *,
        vocabulary: Vocabulary | None = None,
        probs_kind: str = "raw",
        counters: tuple[str, str] | None = None,
        request_extra: dict | None = None,
        text_prompts: bool = False,
        token_by_token: bool = False,
        request_timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, request_timeout_s, retry, transport)
        if probs_kind not in REPORT_KINDS:
            raise ValueError(f"--reports: {probs_kind!r} must be one of {REPORT_KINDS}")
        if text_prompts and vocabulary is None:
            raise ValueError(
                "--text-prompts: needs --tokenizer (the ids are sent as the text they decode to)"
            )
        self.vocabulary, self.probs_kind, self.request_extra = (
            vocabulary,
            probs_kind,
            dict(request_extra or {}),
        )
        self.counters = (
            {"draft_n": counters[0], "draft_n_accepted": counters[1]} if counters else None
        )
        self.text_prompts = text_prompts
        self._texts: dict[tuple[int, ...], str] = {}
        # `token_by_token`: one lock per server, prefixes primed
        self.token_by_token = token_by_token

    async def draft_counters(self) -> dict[str, float]:
        """The user-named engine-wide draft counters now (ValueError when none were named)."""
        if self.counters is None:
            raise ValueError(
                "--draft-counter / --accepted-counter: not given, so no counters can be read"
            )
        return metric_totals(await self._send("GET", "/metrics", None, text=True), self.counters)

    async def complete(
        self, prompt_tokens: list[int], seed: int, chain: SamplerChain, extra: dict | None = None
    ) -> tuple[Reply, dict]:
        """Sample one completion of `prompt_tokens` with `seed`; the parsed result and the body sent."""
        if not self.token_by_token:
            return await self._complete(prompt_tokens, seed, chain, extra)
        # a request behind a lock waits for no wave
        session, unwaved = (
            session_of(self.base_url),
            WAVE.set(None),
        )
        try:
            async with session.lock:
                session.held = None  # unknown until the reply says (a failed request leaves it so)
                reply, body = await self._complete(prompt_tokens, seed, chain, extra)
                session.held = held_after(
                    prompt_tokens, reply.tokens, reply.finish_reason == AMBIGUOUS_END
                )
        finally:
            WAVE.reset(unwaved)
        return reply, body

    async def complete_forced(
        self,
        prompt: list[int],
        prefix: list[int],
        seed: int,
        chain: SamplerChain,
        extra: dict | None = None,
    ) -> tuple[Reply, dict]:
        """`complete` of prompt + prefix for teacher forcing: with `token_by_token`, the shorter prefixes the server
        does not hold are asked first (one token, no logprobs), so each forced token is evaluated alone."""
        if not self.token_by_token:
            return await self._complete([*prompt, *prefix], seed, chain, extra)
        session = session_of(self.base_url)
        async with session.lock:
            primer = replace(chain, max_tokens=1, n_probs=0)
            for j in priming_prefixes(session.held, prompt, prefix):
                session.held = None
                body = await self._body([*prompt, *prefix[:j]], seed, primer, extra)
                # its token is not read
                await self._send("POST", "/v1/completions", {**body, "logprobs": None})
                session.held, session.priming_requests = (
                    (*prompt, *prefix[:j]),
                    session.priming_requests + 1,
                )
            session.held = None
            reply, body = await self._complete([*prompt, *prefix], seed, chain, extra)
            session.held = (*prompt, *prefix)
        return reply, body

    async def _body(
        self, prompt_tokens: list[int], seed: int, chain: SamplerChain, extra: dict | None
    ) -> dict:
        """The /v1/completions body: the ids, or their text for a text-only server."""
        ids = [int(t) for t in prompt_tokens]
        prompt: list[int] | str = await self.text_of(ids) if self.text_prompts else ids
        body = {
            "model": await self._model(),
            **openai_request(chain, self.request_extra),
            **(extra or {}),
            "seed": int(seed),
            "prompt": prompt,
        }
        if self.vocabulary is not None and not chain.n_probs:
            body["logprobs"] = 0  # the token strings come with the logprobs object only
        return body

    async def _complete(
        self, prompt_tokens: list[int], seed: int, chain: SamplerChain, extra: dict | None
    ) -> tuple[Reply, dict]:
        body = await self._body(prompt_tokens, seed, chain, extra)
        times: list[float] = []
        started = time.perf_counter()
        reply = parse_generic_completion(
            await self._send("POST", "/v1/completions", body, times=times),
            chain,
            self.probs_kind,
            self.vocabulary,
        )
        reply.elapsed_s = time.perf_counter() - started
        reply.sent_at, reply.received_at = times
        return reply, body

    async def text_of(self, token_ids: list[int]) -> str:
        """The text a text-only server is sent for `token_ids`: what they decode to, checked once to tokenise back to
        the same ids at the server (`PrefixNotText` otherwise: a non-canonical tokenisation is another prefix)."""
        key = tuple(token_ids)
        if key not in self._texts:
            text = self.vocabulary.text_of(token_ids)  # type: ignore[union-attr]
            if text is None:
                raise PrefixNotText(
                    f"token ids ...{list(key[-5:])}: their bytes are not UTF-8 text"
                )
            back = await self.tokenize(text)
            if back != list(key):
                at = next(
                    (i for i, (a, b) in enumerate(zip(back, key)) if a != b),
                    min(len(back), len(key)),
                )
                raise PrefixNotText(
                    f"token ids ...{list(key[-5:])}: their text tokenises to other ids at "
                    f"{self.base_url} (first difference at index {at} of {len(key)})"
                )
            self._texts[key] = text
        return self._texts[key]

    async def tokenize(self, text: str) -> list[int]:
        """The server's tokenisation of `text`: /tokenize (vLLM's and SGLang's shape), else /extras/tokenize
        (llama-cpp-python's); ValueError when it has neither: give prompt_tokens."""
        model = await self._model()
        for path, body in (
            ("/tokenize", {"model": model, "prompt": text}),
            ("/extras/tokenize", {"input": text}),
        ):
            try:
                return [int(t) for t in (await self._send("POST", path, body))["tokens"]]
            except (httpx.HTTPStatusError, KeyError, TypeError, ValueError):
                continue
        raise ValueError(
            f"prompts: {self.base_url} has no usable /tokenize or /extras/tokenize: give prompt_tokens"
        )

    async def chat_tokenize(self, messages: list[dict]) -> list[int]:
        """A chat through the model's chat template (from --tokenizer's files), tokenised by the server."""
        if self.vocabulary is None:
            raise ValueError(
                "prompts: chat messages need the model's chat template: give --tokenizer (its GGUF or "
                "directory), or prompt_tokens (ids) or text"
            )
        return await self.tokenize(self.vocabulary.chat_text(messages))

    async def props(self) -> dict | None:
        """The served model's name (the header's engine props), or None if /v1/models does not answer."""
        try:
            return {"model_alias": await self._model()}
        except (httpx.HTTPError, ValueError, KeyError, IndexError):
            return None


__all__ = [
    "AMBIGUOUS_END",
    "GenericOpenAIClient",
    "PrefixNotText",
    "REPORT_KINDS",
    "SHORT_REPORT",
    "UNMAPPABLE",
    "UnmappableReport",
    "openai_request",
    "parse_generic_completion",
    "parse_request_extra",
    "sampled_from_raw",
]
