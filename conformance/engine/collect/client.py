"""An async client for llama.cpp-style completion servers: pinned sampler chain, retries, parsed samples.

The engine level compares two endpoints of one engine by their samples, so every request must pin the
whole sampler chain: llama.cpp's defaults (top_k 40, top_p 0.95, min_p 0.05, ...) silently change the law
being sampled. `SamplerChain.request()` sends every knob that can warp the distribution, set to "off"
except the four the user chooses. Requests go through httpx; connection errors, 5xx and 429 are retried
with exponential backoff (tenacity); other 4xx are the caller's mistake and are raised at once.

Both response shapes llama.cpp serves are parsed: the native ``/completion`` (``tokens``,
``completion_probabilities``, ``stop_type``) and the OpenAI-compatible ``/v1/completions``
(``choices[0].logprobs.content``, ``finish_reason``); either carries ``timings`` with the draft counters.
Token ids are taken only from a ``tokens`` field, never rebuilt from the probability entries: llama.cpp
reports no entry for a token that ends inside a UTF-8 character, so entries and tokens can disagree, and
in speculative mode it reports placeholders (prob 1.0, an empty top list) for drafted positions. Either
way the reply's top_probs are dropped whole (`Reply.probs_dropped` says why): a position's distribution
is recorded only when it was reported. llama.cpp's /v1/completions returns no token ids, so the
collector uses the native endpoint with it.

Every completion's exchange is timed (`Reply.sent_at`, `received_at`: the load measured, `..load`), and the bytes of
a request in a wave (`jobs.Wave`) are held in the connection's stream (`WaveStream`) until the wave's other requests
are ready too, so that C requests reach the server together even when the client's own work per request takes
longer than the engine's answer.
"""

from __future__ import annotations

import math
import select
import time
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import httpcore
import httpx
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from .engine_errors import EngineUnreachable, status_error
from .jobs import ARMED, WAVE

#: Every other sampler stage of llama.cpp, pinned off: penalties, DRY, typical, XTC, mirostat, dynamic
#: temperature, top-n-sigma, adaptive-p, stop strings, logit bias. `cache_prompt` off: llama.cpp warns that
#: a reused KV cache may change the logits.
PINNED_OFF: dict[str, Any] = {
    "repeat_penalty": 1.0,
    "repeat_last_n": 0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "dry_multiplier": 0.0,
    "typical_p": 1.0,
    "xtc_probability": 0.0,
    "mirostat": 0,
    "dynatemp_range": 0.0,
    "top_n_sigma": -1.0,
    "adaptive_target": -1.0,
    "min_keep": 0,
    "stop": [],
    "logit_bias": [],
    "cache_prompt": False,
    "stream": False,
}
#: The order llama.cpp applies the kept stages in (its default order without the disabled stages).
SAMPLER_ORDER = ["top_k", "top_p", "min_p", "temperature"]
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class SamplerChain:
    """The user's choice of the law: defaults give plain softmax(logits / temperature) (top_k 0 = off)."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    max_tokens: int = 16
    n_probs: int = 0
    post_sampling_probs: bool = True
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        checks = {
            "temperature": (self.temperature >= 0, ">= 0"),
            "top_k": (self.top_k >= 0, ">= 0 (0: off)"),
            "top_p": (0 < self.top_p <= 1, "in (0, 1]"),
            "min_p": (0 <= self.min_p < 1, "in [0, 1)"),
            "max_tokens": (self.max_tokens >= 1, ">= 1"),
            "n_probs": (self.n_probs >= 0, ">= 0"),
        }
        for name, (ok, wanted) in checks.items():
            if not ok:
                value = getattr(self, name)
                shown = f"{value:g}" if isinstance(value, float) else repr(value)
                raise ValueError(f"--{name.replace('_', '-')}: must be {wanted} (got {shown})")

    def request(self) -> dict[str, Any]:
        """The request body's sampler part: every stage pinned, the token count under both names."""
        chosen = asdict(self)
        chosen["n_predict"] = self.max_tokens
        return {**PINNED_OFF, **chosen, "samplers": list(SAMPLER_ORDER), "return_tokens": True}


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of one request: `attempts` in all, waits doubling from `initial_wait_s` up to `max_wait_s`."""

    attempts: int = 5
    initial_wait_s: float = 0.5
    max_wait_s: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"--retries: must be >= 1 (got {self.attempts})")
        if self.initial_wait_s < 0 or self.max_wait_s < self.initial_wait_s:
            raise ValueError(
                f"--retry-wait-s: must lie in [0, {self.max_wait_s:g}] (got {self.initial_wait_s:g})"
            )


@dataclass
class Reply:
    """One parsed completion: token ids, text, per-position top-N (id, probability), engine timings."""

    tokens: list[int]
    text: str
    top_probs: list[list[list[float]]] | None
    probs_kind: str | None
    finish_reason: str | None
    timings: dict | None
    elapsed_s: float = 0.0
    # why the reported probabilities were not kept (top_probs is then None)
    probs_dropped: str | None = None
    # the request's first byte written, its answer's first read (time.time())
    sent_at: float | None = None
    received_at: float | None = None
    raw: dict = field(default_factory=dict, repr=False)


def is_retryable(error: BaseException) -> bool:
    """Connection trouble, timeouts, 5xx and 429 are worth another try; anything else is not."""
    if isinstance(error, httpx.HTTPStatusError):
        return error.response.status_code in RETRYABLE_STATUS
    return isinstance(error, httpx.TransportError)


def _top_list(entries: list[dict]) -> tuple[list[list[float]], str]:
    """[[id, p], ...] from llama.cpp's top entries, and whether they were post-sampling probabilities."""
    if all("prob" in entry for entry in entries):
        listed, kind = [[int(e["id"]), float(e["prob"])] for e in entries], "post_sampling"
    else:
        listed, kind = [[int(e["id"]), math.exp(float(e["logprob"]))] for e in entries], "raw"
    if not all(0.0 <= p <= 1.0 for _, p in listed):  # also false for NaN
        raise ValueError(f"response: a reported probability is not in [0, 1]: {listed}")
    return listed, kind


def _position_probs(positions: list[dict]) -> tuple[list, str | None]:
    """Per generated position, the reported top-N list (None where the list is empty: not reported); the
    kind of probabilities they are."""
    top_probs, kinds = [], set()
    for position in positions:
        entries = position.get("top_probs", position.get("top_logprobs"))
        if entries is None:
            raise ValueError(
                f"response: a probability entry has neither top_probs nor top_logprobs: {position}"
            )
        listed, kind = (
            _top_list(entries)
            if entries
            else (None, "post_sampling" if "prob" in position else "raw")
        )
        top_probs.append(listed)
        kinds.add(kind)
    if len(kinds) > 1:
        raise ValueError("response: mixed post-sampling and raw probabilities")
    return top_probs, (kinds.pop() if kinds else None)


def parse_completion(body: dict) -> Reply:
    """A `Reply` from a native /completion or an OpenAI /v1/completions response body (ValueError if
    the body is malformed)."""
    try:
        return _parse_completion(body)
    except (KeyError, TypeError, IndexError, AttributeError) as error:
        raise ValueError(
            f"response: malformed completion body ({type(error).__name__}: {error})"
        ) from None


def _parse_completion(body: dict) -> Reply:
    if not isinstance(body, dict):
        raise ValueError(f"response: expected a JSON object, got {type(body).__name__}")
    if "choices" in body:
        if not body["choices"]:
            raise ValueError("response: 'choices' is empty")
        choice = body["choices"][0]
        text, finish = choice.get("text", ""), choice.get("finish_reason")
        positions = (choice.get("logprobs") or {}).get("content") or []
        tokens = body.get("tokens") or choice.get("tokens") or []
    else:
        text, finish = body.get("content", ""), body.get("stop_type", body.get("finish_reason"))
        positions = body.get("completion_probabilities") or []
        tokens = body.get("tokens") or []
    tokens = [int(t) for t in tokens]
    if not tokens and (text or positions):
        raise ValueError(
            "response: a completion without token ids (llama.cpp's native /completion returns them "
            "with return_tokens; its /v1/completions does not: use --endpoint /completion)"
        )
    top_probs, kind = _position_probs(positions) if positions else (None, None)
    dropped = None
    if positions and [int(position["id"]) for position in positions] != tokens:
        dropped = "the probability entries do not match the tokens (a token ending inside a UTF-8 character)"
    elif top_probs is not None and any(listed is None for listed in top_probs):
        dropped = (
            "a position has an empty top list (llama.cpp's placeholder for a speculative round)"
        )
    if dropped:
        top_probs, kind = None, None
    return Reply(
        tokens=tokens,
        text=text,
        top_probs=top_probs,
        probs_kind=kind,
        finish_reason=finish,
        timings=body.get("timings"),
        probs_dropped=dropped,
        raw=body,
    )


def _json_or_raise(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise status_error(response)  # the endpoint and the engine's own reason, in one line
    return response.json()


#: How long the probe before sampling waits for an answer (a server that accepts the connection answers at once).
PROBE_TIMEOUT_S = 10.0


async def probe_http(http: httpx.AsyncClient, base_url: str, path: str) -> None:
    """One request, no retries, before any sampling: any HTTP answer (an error status too) shows that the engine is
    there; `EngineUnreachable` naming the URL when nothing answers."""
    try:
        await http.get(path, timeout=PROBE_TIMEOUT_S)
    except httpx.TransportError as error:
        reason = str(error) or type(error).__name__
        raise EngineUnreachable(
            f"nothing answers at {base_url} ({type(error).__name__}: {reason})"
        ) from None


async def send_with_retries(
    client: Any,
    method: str,
    path: str,
    body: dict | None,
    read: Callable[[httpx.Response], Any] = _json_or_raise,
    times: list | None = None,
) -> Any:
    """One HTTP exchange of `client` (its `_http`, `retry` and `requests_sent`) with retries on connection
    trouble, 5xx and 429; `read(response)` raises for a bad status and decodes the body. With `times` (a
    completion's exchange) the answered attempt's [sent_at, received_at] are put there, and the first attempt's
    bytes wait for the task's wave (`jobs.WAVE`) to be ready."""
    retrying = AsyncRetrying(
        retry=retry_if_exception(is_retryable),
        stop=stop_after_attempt(client.retry.attempts),
        wait=wait_exponential(multiplier=client.retry.initial_wait_s, max=client.retry.max_wait_s),
        reraise=True,
    )
    wave = WAVE.get() if times is not None else None
    async for attempt in retrying:
        with attempt:
            client.requests_sent += 1
            wire: list[float] = []
            armed, timing = ARMED.set(wave), WIRE.set(wire if times is not None else None)
            try:
                started = time.time()
                response = await client._http.request(method, path, json=body)
                ended = time.time()
            finally:
                ARMED.reset(armed)
                WIRE.reset(timing)
                if wave is not None:
                    wave.leave()
                    wave = None  # a retry is sent as soon as it is ready
            value = read(response)
            # as the connection saw them, else around the exchange (another transport)
            if times is not None:
                times[:] = wire if len(wire) == 2 else [started, ended]
            return value
    raise AssertionError("unreachable: tenacity either returns or reraises")


#: The timed exchange going on: [when its first byte was written, when the first byte of its answer was read].
WIRE: ContextVar[list[float] | None] = ContextVar("exactspec_wire", default=None)


class WaveStream(httpcore.AsyncNetworkStream):
    """A connection's stream that holds a waved request's bytes (`jobs.ARMED`) until its first read, then sends them
    in one write with the wave's others (`jobs.Wave.send`): the wave's requests reach the server together. It
    times a timed exchange (`WIRE`) where it meets the wire: its request's first write, its answer's first read."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self.inner = inner
        self.held: list[bytes] = []

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if ARMED.get() is not None:
            if buffer:
                self.held.append(buffer)
            return
        wire = WIRE.get()
        if wire is not None and not wire and buffer:
            wire.append(time.time())
        await self.inner.write(buffer, timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        wire = WIRE.get()
        if self.held:
            data, self.held, wave = b"".join(self.held), [], ARMED.get()

            async def write() -> None:
                if wave is not None:
                    _close_answered(wave.sent)
                    wave.sent.append((self, wire))
                if wire is not None and not wire:
                    wire.append(time.time())
                await self.inner.write(data, timeout)

            await (wave.send(write) if wave is not None else write())
        data = await self.inner.read(max_bytes, timeout)
        if wire is not None and len(wire) == 1 and data:
            wire.append(time.time())
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def start_tls(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        return WaveStream(await self.inner.start_tls(*args, **kwargs))

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


def _close_answered(sent: list[tuple[WaveStream, list[float] | None]]) -> None:
    """The wave's requests already sent whose answer is already here (their socket is readable) were answered before
    the next one goes out: their received_at is now at the latest, not when the event loop gets to read them."""
    sockets = {
        stream.inner.get_extra_info("socket"): wire
        for stream, wire in sent
        if wire is not None and len(wire) == 1
    }
    sockets.pop(None, None)
    # A connection closed meanwhile (its fileno -1) has nothing to time: its answer was read when it closed.
    sockets = {sock: wire for sock, wire in sockets.items() if sock.fileno() >= 0}
    if sockets:
        try:
            now, (readable, _, _) = time.time(), select.select(list(sockets), [], [], 0)
        # closed between the filter and the call: the answer times stay as read
        except (
            OSError,
            ValueError,
        ):
            return
        for sock in readable:
            sockets[sock].append(now)


class WaveBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with every connection's stream a `WaveStream`."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self.inner = inner

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        return WaveStream(await self.inner.connect_tcp(*args, **kwargs))

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        return WaveStream(await self.inner.connect_unix_socket(*args, **kwargs))

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def http_client(
    base_url: str, timeout: float, transport: httpx.AsyncBaseTransport | None
) -> httpx.AsyncClient:
    """The collector's httpx client: with its default transport, connections go through `WaveBackend` (a transport
    given, e.g. a test's, is used as it is; so is a connection pool without the backend hook: no waves then)."""
    http = httpx.AsyncClient(base_url=base_url, timeout=timeout, transport=transport)
    pool = getattr(getattr(http, "_transport", None), "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if transport is None and backend is not None and not isinstance(backend, WaveBackend):
        pool._network_backend = WaveBackend(backend)  # type: ignore[union-attr]
    return http


class LlamaCppClient:
    """One llama.cpp endpoint: `complete`, `tokenize`, `props`, `probe`; use as ``async with LlamaCppClient(...)``."""

    def __init__(
        self,
        base_url: str,
        *,
        endpoint: str = "/completion",
        request_timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"URL: {base_url!r} is not an http(s) URL")
        if request_timeout_s <= 0:
            raise ValueError(f"--request-timeout-s: must be > 0 (got {request_timeout_s:g})")
        self.base_url = base_url.rstrip("/")
        self.endpoint = endpoint
        self.retry = retry or RetryPolicy()
        self.requests_sent = 0
        self._http = http_client(self.base_url, request_timeout_s, transport)

    async def __aenter__(self) -> "LlamaCppClient":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._http.aclose()

    async def _send(
        self, method: str, path: str, body: dict | None, times: list | None = None
    ) -> dict:
        """One HTTP exchange with retries; the decoded JSON body (`times`: a completion's, timed and waved)."""
        return await send_with_retries(self, method, path, body, times=times)

    async def complete(
        self, prompt_tokens: list[int], seed: int, chain: SamplerChain, extra: dict | None = None
    ) -> tuple[Reply, dict]:
        """Sample one completion of `prompt_tokens` with `seed`; the parsed result and the body sent."""
        body = {
            **chain.request(),
            **(extra or {}),
            "seed": int(seed),
            "prompt": [int(t) for t in prompt_tokens],
        }
        times: list[float] = []
        started = time.perf_counter()
        completion = parse_completion(await self._send("POST", self.endpoint, body, times))
        completion.elapsed_s = time.perf_counter() - started
        completion.sent_at, completion.received_at = times
        return completion, body

    async def tokenize(self, text: str) -> list[int]:
        """The engine's own tokenisation of `text`, with its special tokens (BOS) as a string prompt gets."""
        body = await self._send("POST", "/tokenize", {"content": text, "add_special": True})
        return [int(t["id"]) if isinstance(t, dict) else int(t) for t in body["tokens"]]

    async def chat_tokenize(self, messages: list[dict]) -> list[int]:
        """A chat through the engine's chat template (`/apply-template`, with the generation prompt), then tokenised
        with its special tokens parsed."""
        prompt = (await self._send("POST", "/apply-template", {"messages": messages}))["prompt"]
        body = await self._send(
            "POST", "/tokenize", {"content": prompt, "add_special": False, "parse_special": True}
        )
        return [int(t["id"]) if isinstance(t, dict) else int(t) for t in body["tokens"]]

    async def probe(self) -> None:
        """Whether anything answers at the URL (`probe_http`, at /props)."""
        await probe_http(self._http, self.base_url, "/props")

    async def props(self) -> dict | None:
        """GET /props (llama.cpp's version, model path, default settings), or None if it does not answer."""
        try:
            return await self._send("GET", "/props", None)
        except (httpx.HTTPError, ValueError):
            return None
