"""A small llama.cpp-shaped HTTP server for exactspec's own generators and mutants (the engine meta-test).

`EngineServer(backend)` is a context manager that serves one generation backend (`mutant_backends`) with
starlette + uvicorn on 127.0.0.1, on a free port, in a background thread: it waits (bounded) for
``/health`` and stops the server cleanly on exit. The endpoints answer in llama.cpp's shapes for the
fields the engine level uses:

* ``GET /health`` -> ``{"status": "ok"}``; ``GET /props`` -> ``build_info``, ``model_path``,
  ``total_slots``, ``default_generation_settings`` and an ``exactspec`` block describing the backend;
* ``POST /tokenize`` -- a toy tokenizer for the id-only tiny models: whitespace-separated integers;
* ``POST /completion`` (native: ``tokens`` with ``return_tokens``, ``completion_probabilities``,
  ``stop_type``) and ``POST /v1/completions`` (OpenAI: ``choices[0].logprobs.content``, ``finish_reason``),
  both with ``timings`` carrying ``draft_n`` / ``draft_n_accepted`` when the backend drafted.

Request fields: token-id ``prompt``, ``seed`` (missing or -1: random), ``temperature`` / ``top_k`` /
``top_p`` / ``min_p`` with llama.cpp's defaults (0.8 / 40 / 0.95 / 0.05; top_k 0 = off, temperature <= 0
= greedy), ``max_tokens`` or ``n_predict``, ``n_probs`` + ``post_sampling_probs``. The probabilities are
the target's warped distribution computed by exactspec (``post_sampling``; raw = softmax of the logits).
Any other sampler stage set to a non-neutral value (penalties, DRY, XTC, typical, mirostat, dynamic
temperature, logit bias, stop strings) is refused with HTTP 400: this server implements only the four.
Warping order is exactspec's (temperature first); a ``samplers`` order for which that matters is refused.
"""

from __future__ import annotations

import secrets
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ....reference.warping import SamplingParams

LLAMA_DEFAULTS = {"temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05}
NEUTRAL = {
    "repeat_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "dry_multiplier": 0.0,
    "typical_p": 1.0,
    "xtc_probability": 0.0,
    "mirostat": 0,
    "dynatemp_range": 0.0,
}
EMPTY_OK = ("stop", "logit_bias")
MAX_TOKENS_LIMIT = 256
BUILD_INFO = "exactspec-meta-server"


class RequestError(ValueError):
    """A request this server refuses (answered with HTTP 400 and the message)."""


def sampling_from_request(body: dict) -> SamplingParams:
    """The request's sampler chain as exactspec `SamplingParams` (llama.cpp defaults for missing fields)."""
    for name, neutral in NEUTRAL.items():
        if name in body and float(body[name]) != neutral:
            raise RequestError(f"{name}={body[name]!r} is not supported (only {neutral} is)")
    if body.get("stream"):
        raise RequestError("stream=true is not supported by this server")
    for name in EMPTY_OK:
        if body.get(name):
            raise RequestError(f"{name} must be empty, got {body[name]!r}")
    values = {name: body.get(name, default) for name, default in LLAMA_DEFAULTS.items()}
    temperature = max(0.0, float(values["temperature"]))
    top_k = int(values["top_k"]) if int(values["top_k"]) > 0 else None
    top_p, min_p = float(values["top_p"]), float(values["min_p"])
    order = body.get("samplers")
    if order is not None and temperature not in (0.0, 1.0) and (top_p < 1 or min_p > 0):
        filters = [i for i, s in enumerate(order) if s in ("top_p", "min_p")]
        if "temperature" not in order or any(i < order.index("temperature") for i in filters):
            raise RequestError(
                f"samplers order {order} applies top_p/min_p before temperature; this server "
                "warps temperature first (exactspec's order)"
            )
    try:
        return SamplingParams(temperature, top_k, top_p, min_p)
    except ValueError as error:
        raise RequestError(str(error)) from error


def _prompt_tokens(body: dict) -> list[int]:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], list):
        prompt = prompt[0]
    ids_only = isinstance(prompt, list) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in prompt
    )
    if not ids_only or not prompt:
        raise RequestError(f"prompt must be a non-empty list of token ids, got {prompt!r}")
    return prompt


def _max_tokens(body: dict) -> int:
    value = body.get("max_tokens", body.get("n_predict", 16))
    value = int(value)
    if value < 1 or value > MAX_TOKENS_LIMIT:
        raise RequestError(f"max_tokens must be in [1, {MAX_TOKENS_LIMIT}], got {value}")
    return value


def _seed(body: dict) -> int:
    seed = body.get("seed", -1)
    if seed is None or int(seed) < 0:
        return secrets.randbits(32)
    return int(seed)


def detokenize(tokens: list[int]) -> str:
    """The toy tokenizer's text: one space-prefixed integer per token (so /tokenize inverts it)."""
    return "".join(f" {int(t)}" for t in tokens)


@dataclass(frozen=True)
class Generated:
    """One completion: new tokens (EOS included when it stopped generation) and the draft counters."""

    tokens: list[int]
    stopped_by_eos: bool
    draft_n: int = 0
    draft_n_accepted: int = 0


def completion_text(generated: Generated) -> str:
    """The text of a completion; a final EOS renders as nothing (llama.cpp: ``tokens`` keeps it, text does not)."""
    return detokenize(generated.tokens[:-1] if generated.stopped_by_eos else generated.tokens)


def _entry(token: int, prob: float, post_sampling: bool) -> dict:
    text = f" {int(token)}"
    key = "prob" if post_sampling else "logprob"
    value = (
        float(prob)
        if post_sampling
        else (float(np.log(prob)) if prob > 0 else float(np.finfo(np.float32).min))
    )
    return {"id": int(token), "token": text, "bytes": list(text.encode()), key: value}


def probability_entries(
    tokens: list[int], rows: np.ndarray, n_probs: int, post_sampling: bool
) -> list[dict]:
    """llama.cpp's per-position entries: the chosen token's probability and the top-N (nonzero, by
    probability then id), under ``top_probs``/``prob`` (post-sampling) or ``top_logprobs``/``logprob``."""
    out = []
    for token, row in zip(tokens, rows):
        order = sorted(np.flatnonzero(row > 0), key=lambda i: (-row[i], i))[:n_probs]
        entry = _entry(token, row[token], post_sampling)
        entry["top_probs" if post_sampling else "top_logprobs"] = [
            _entry(int(i), row[i], post_sampling) for i in order
        ]
        out.append(entry)
    return out


class ServedBackend(Protocol):
    """What a completer needs of a backend: generation, the teacher-forced rows and what it is
    (`mutant_backends.Backend`, or the synthetic engine's, whose sampling is a sampler chain)."""

    def generate(self, prompt: Any, max_tokens: int, sampling: Any, seed: int) -> Generated: ...

    def position_probs(self, prompt: Any, tokens: Any, sampling: Any) -> Any: ...

    def describe(self) -> dict: ...


class Completer:
    """Runs one completion request against a backend and shapes the native and OpenAI answers."""

    def __init__(self, backend: ServedBackend, model_name: str) -> None:
        self.backend, self.model_name = backend, model_name

    def run(self, body: dict) -> dict:
        """The parts both response shapes need (raises RequestError for a refused request)."""
        prompt, sampling, max_tokens = (
            _prompt_tokens(body),
            self.sampling_of(body),
            _max_tokens(body),
        )
        seed = _seed(body)
        if body.get("ignore_eos"):
            raise RequestError(
                "ignore_eos=true is not supported: the served model always stops at its EOS"
            )
        started = time.perf_counter()
        try:
            generated = self.backend.generate(prompt, max_tokens, sampling, seed)
        except ValueError as error:
            raise RequestError(str(error)) from error
        elapsed_ms = 1000 * (time.perf_counter() - started)
        n_probs = int(body.get("n_probs", 0))
        post = bool(body.get("post_sampling_probs", False))
        probs = None
        if n_probs > 0 and generated.tokens:
            rows = self.backend.position_probs(
                prompt, generated.tokens, sampling if post else SamplingParams(1.0)
            )
            probs = probability_entries(generated.tokens, rows, n_probs, post)
        return {
            "prompt": prompt,
            "generated": generated,
            "probs": probs,
            "seed": seed,
            "sampling": sampling,
            "timings": self._timings(generated, len(prompt), elapsed_ms),
        }

    def sampling_of(self, body: dict) -> Any:
        """The request's sampling settings as the backend takes them."""
        return sampling_from_request(body)

    @staticmethod
    def _timings(generated: Generated, n_prompt: int, elapsed_ms: float) -> dict:
        n = len(generated.tokens)
        timings = {
            "cache_n": 0,
            "prompt_n": n_prompt,
            "prompt_ms": 0.0,
            "predicted_n": n,
            "predicted_ms": elapsed_ms,
            "predicted_per_second": 1000 * n / elapsed_ms if elapsed_ms else 0.0,
        }
        if generated.draft_n > 0:
            timings["draft_n"], timings["draft_n_accepted"] = (
                generated.draft_n,
                generated.draft_n_accepted,
            )
        return timings

    def native(self, body: dict) -> dict:
        """The ``/completion`` answer."""
        done = self.run(body)
        generated: Generated = done["generated"]
        s: SamplingParams = done["sampling"]
        answer = {
            "index": 0,
            "content": completion_text(generated),
            "tokens": generated.tokens if body.get("return_tokens") else [],
            "id_slot": 0,
            "stop": True,
            "model": self.model_name,
            "tokens_predicted": len(generated.tokens),
            "tokens_evaluated": len(done["prompt"]),
            "generation_settings": {
                "seed": done["seed"],
                "temperature": s.temperature,
                "top_k": s.top_k or 0,
                "top_p": s.top_p,
                "min_p": s.min_p,
                "n_predict": _max_tokens(body),
                "n_probs": int(body.get("n_probs", 0)),
                "post_sampling_probs": bool(body.get("post_sampling_probs", False)),
            },
            "prompt": detokenize(done["prompt"]),
            "truncated": False,
            "stop_type": "eos" if generated.stopped_by_eos else "limit",
            "stopping_word": "",
            "tokens_cached": 0,
            "timings": done["timings"],
        }
        if done["probs"] is not None:
            answer["completion_probabilities"] = done["probs"]
        return answer

    def openai(self, body: dict) -> dict:
        """The ``/v1/completions`` answer."""
        done = self.run(body)
        generated: Generated = done["generated"]
        choice = {
            "text": completion_text(generated),
            "index": 0,
            "logprobs": None if done["probs"] is None else {"content": done["probs"]},
            "finish_reason": "stop" if generated.stopped_by_eos else "length",
        }
        n, n_prompt = len(generated.tokens), len(done["prompt"])
        return {
            "choices": [choice],
            "created": int(time.time()),
            "model": self.model_name,
            "system_fingerprint": BUILD_INFO,
            "object": "text_completion",
            "usage": {
                "completion_tokens": n,
                "prompt_tokens": n_prompt,
                "total_tokens": n + n_prompt,
            },
            "id": f"cmpl-{secrets.token_hex(8)}",
            "timings": done["timings"],
        }


def build_app(backend: ServedBackend, model_name: str = "exactspec-tiny") -> Any:
    """The starlette application serving `backend`."""
    # starlette (the [engine] extra): the module is read without it (its protocol, `Generated`)
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    completer = Completer(backend, model_name)

    def answer(method):
        async def endpoint(request: Request) -> JSONResponse:
            try:
                body = await request.json()
                if not isinstance(body, dict):
                    raise RequestError("the request body must be a JSON object")
                # inline: generation is serialised anyway (one slot)
                return JSONResponse(method(body))
            except (RequestError, ValueError, TypeError) as error:
                return JSONResponse(
                    {
                        "error": {
                            "code": 400,
                            "message": str(error),
                            "type": "invalid_request_error",
                        }
                    },
                    status_code=400,
                )

        return endpoint

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def props(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "build_info": BUILD_INFO,
                "model_path": model_name,
                "total_slots": 1,
                "default_generation_settings": {"params": dict(LLAMA_DEFAULTS)},
                "exactspec": backend.describe(),
            }
        )

    def tokenize(body: dict) -> dict:
        try:
            return {"tokens": [int(t) for t in str(body.get("content", "")).split()]}
        except ValueError as error:
            raise RequestError(
                f"content must be whitespace-separated token ids: {error}"
            ) from error

    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/props", props, methods=["GET"]),
            Route("/tokenize", answer(tokenize), methods=["POST"]),
            Route("/completion", answer(completer.native), methods=["POST"]),
            Route("/v1/completions", answer(completer.openai), methods=["POST"]),
        ]
    )


def loopback_socket() -> socket.socket:
    """A TCP socket bound to a free 127.0.0.1 port, for uvicorn to serve on (handed over: no port race).

    Accepted connections inherit its TCP_NODELAY: without it each small answer waits ~40 ms on Nagle's
    algorithm against the client's delayed ACK (45 ms a request against 1 ms of generation)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


class EngineServer:
    """Serve `backend` on 127.0.0.1 in a background thread: ``with EngineServer(b) as s: s.base_url``."""

    def __init__(
        self,
        backend: ServedBackend,
        model_name: str = "exactspec-tiny",
        ready_timeout_s: float = 20.0,
    ) -> None:
        if ready_timeout_s <= 0:
            raise ValueError(f"ready_timeout_s must be > 0, got {ready_timeout_s}")
        self.backend, self.model_name, self.ready_timeout_s = backend, model_name, ready_timeout_s
        self.base_url = ""
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "EngineServer":
        # uvicorn (the [engine] extra): only a served backend needs it
        import uvicorn

        sock = loopback_socket()
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            build_app(self.backend, self.model_name),
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            daemon=True,
            name=f"exactspec-serve-{port}",
        )
        self._thread.start()
        self.base_url = f"http://127.0.0.1:{port}"
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        # httpx (the [engine] extra): only a served backend needs it
        import httpx

        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self._thread is not None and not self._thread.is_alive():
                raise RuntimeError(
                    f"the server thread for {self.base_url} exited before it answered /health"
                )
            try:
                if httpx.get(self.base_url + "/health", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.__exit__(None, None, None)
        raise TimeoutError(f"{self.base_url}/health did not answer within {self.ready_timeout_s} s")

    def __exit__(self, *exc_info: object) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10.0)
        self._server, self._thread = None, None
