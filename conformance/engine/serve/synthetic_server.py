"""The synthetic serving engine over llama.cpp's ``/completion`` protocol, in its own process, with real concurrency.

    python -m exactspec.conformance.engine.serve.synthetic_server --mode exact --port 8090 --profile lm-like

serves one mode of `synthetic_engine` (``plain`` is the reference) on 127.0.0.1. The protocol pieces are
`mutant_server`'s (`Completer`'s answer shapes, `probability_entries`, `sampling_from_request`'s refusals with
HTTP 400); the routes are the same (``/health``, ``/props``, ``/tokenize``, ``/completion``,
``/v1/completions``), but generation runs in a thread pool, so several requests are in flight at once. The
server counts them (`InFlight`: +1 when a completion request arrives, -1 when it is answered) and the
load-dependent modes read that count and the other requests' contexts; ``/props`` reports the mode, the model
and the counters (``max_in_flight``, the histogram of in-flight counts seen at arrival).

A ``samplers`` order with the filters before the temperature (llama.cpp's default, what the engine level's
collector pins) is served in that order (`Chain.temperature_last`); an order this server cannot follow is
refused. `SyntheticServer` starts the server as a subprocess of the current interpreter on a free port, waits
(bounded) for ``/health`` and stops it by PID (terminate, then kill after a timeout).
"""

from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from .mutant_server import (
    LLAMA_DEFAULTS,
    Completer,
    Generated,
    RequestError,
    loopback_socket,
    sampling_from_request,
)
from .synthetic_engine import DEFAULT_K, Load, Mode, generate
from .synthetic_served import SERVABLE, servable
from .synthetic_model import PROFILES, Chain, SyntheticModel, as_chain

if TYPE_CHECKING:
    from typing_extensions import Self

BUILD_INFO = "exactspec-synthetic-engine"
MODULE = "exactspec.conformance.engine.serve.synthetic_server"
#: The GIL's switch interval in the server process: short, so that the event loop takes new requests while
#: generation threads run (at Python's default 5 ms a 1 ms generation is seldom overlapped).
SWITCH_INTERVAL_S = 2e-4
LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


def chain_from_request(body: dict) -> Chain:
    """The request's sampler chain: `sampling_from_request`'s reading, in the order its ``samplers`` give
    (filters before the temperature: llama.cpp's order; after it or no order: exactspec's)."""
    order = body.get("samplers")
    params = sampling_from_request({key: value for key, value in body.items() if key != "samplers"})
    if order is None:
        return Chain(params)
    if not isinstance(order, list) or not all(isinstance(stage, str) for stage in order):
        raise RequestError(f"samplers must be a list of stage names, got {order!r}")
    active = [
        name
        for name, on in (
            ("top_k", params.top_k is not None),
            ("top_p", params.top_p < 1),
            ("min_p", params.min_p > 0),
        )
        if on
    ]
    if any(name not in order for name in active) or (
        params.temperature not in (0.0, 1.0) and "temperature" not in order
    ):
        raise RequestError(
            f"samplers order {order} leaves out an active stage of {active + ['temperature']}"
        )
    if [order.index(name) for name in active] != sorted(order.index(name) for name in active):
        raise RequestError(
            f"samplers order {order}: this server applies top_k, top_p, min_p in that order"
        )
    # top-k commutes with temperature
    sensitive = [order.index(name) for name in active if name != "top_k"]
    if not sensitive or params.temperature in (0.0, 1.0):
        return Chain(params)
    before = {position < order.index("temperature") for position in sensitive}
    if len(before) > 1:
        raise RequestError(f"samplers order {order} puts the temperature between top_p and min_p")
    return Chain(params, temperature_last=before.pop())


class InFlight:
    """The server's completion requests in flight: the count, its maximum, the histogram of counts at arrival
    (this request included), and the contexts being generated (for modes that mix requests up)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = self.max_in_flight = 0
        self.histogram: Counter[int] = Counter()
        self._contexts: dict[int, list[int]] = {}

    def arrive(self) -> None:
        with self._lock:
            self.count += 1
            self.max_in_flight = max(self.max_in_flight, self.count)
            self.histogram[self.count] += 1

    def leave(self) -> None:
        with self._lock:
            self.count -= 1

    def register(self, key: int, context: list[int] | None) -> None:
        with self._lock:
            if context is None:
                self._contexts.pop(key, None)
            else:
                self._contexts[key] = context

    def companion(self, key: int) -> list[int] | None:
        with self._lock:
            others = [context for other, context in self._contexts.items() if other != key]
        return others[0] if others else None

    def describe(self) -> dict:
        with self._lock:
            return {
                "in_flight": self.count,
                "max_in_flight": self.max_in_flight,
                "in_flight_histogram": {str(n): c for n, c in sorted(self.histogram.items())},
            }


class ServerLoad(Load):
    """One request's view of the server's load: the live in-flight count and another request's context."""

    def __init__(self, tracker: InFlight) -> None:
        self.tracker = tracker

    def in_flight(self) -> int:
        return self.tracker.count

    def companion(self) -> list[int] | None:
        return self.tracker.companion(id(self))

    def track(self, context: list[int]) -> None:
        self.tracker.register(id(self), context)


class SyntheticBackend:
    """A mode on a synthetic model, with `mutant_backends.Backend`'s interface (generate, position_probs, ...)."""

    def __init__(
        self, model: SyntheticModel, mode: Mode, k: int = DEFAULT_K, tracker: InFlight | None = None
    ) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.model, self.mode, self.k = model, mode, int(k)
        self.tracker = tracker or InFlight()
        self.name, self.speculative = mode.name, mode.speculative
        self.vocab, self.eos = model.vocab, model.eos

    def generate(self, prompt: list[int], max_tokens: int, sampling: Any, seed: int) -> Generated:
        load = ServerLoad(self.tracker)
        try:
            return generate(
                self.model, self.mode, prompt, max_tokens, as_chain(sampling), seed, self.k, load
            )
        finally:
            self.tracker.register(id(load), None)

    def position_probs(self, prompt: list[int], tokens: list[int], sampling: Any) -> Any:
        """The reported rows: the target's, or the draft's when the draft is what is served."""
        which = "draft" if self.mode.name == "draft" else "target"
        return self.model.position_rows(prompt, tokens, as_chain(sampling), which)

    def describe(self) -> dict:
        return {
            "backend": "synthetic",
            "mode": self.mode.name,
            "exact": self.mode.exact,
            "mode_mechanism": (self.mode.__doc__ or "").strip(),
            "speculative": self.speculative,
            "seed_coupled": self.mode.seed_coupled,
            "k": self.k,
            "model": self.model.describe(),
            **self.tracker.describe(),
        }


class SyntheticCompleter(Completer):
    """`Completer` reading the sampler chain with its ``samplers`` order (`chain_from_request`)."""

    def sampling_of(self, body: dict) -> Any:
        return chain_from_request(body)


def build_app(backend: SyntheticBackend, model_name: str) -> Any:
    """The starlette application: completions run in the thread pool, counted in flight from arrival to answer."""
    # starlette (the [engine] extra): the engine's model and tables are read without it
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    completer, tracker = SyntheticCompleter(backend, model_name), backend.tracker

    def refusal(error: Exception) -> JSONResponse:
        return JSONResponse(
            {"error": {"code": 400, "message": str(error), "type": "invalid_request_error"}},
            status_code=400,
        )

    def answer(method, counted: bool):
        async def endpoint(request):
            if counted:
                tracker.arrive()
            try:
                body = await request.json()
                if not isinstance(body, dict):
                    raise RequestError("the request body must be a JSON object")
                return JSONResponse(await run_in_threadpool(method, body))
            except (RequestError, ValueError, TypeError) as error:
                return refusal(error)
            finally:
                if counted:
                    tracker.leave()

        return endpoint

    async def health(request):
        return JSONResponse({"status": "ok"})

    async def props(request):
        # anyio (with starlette): only a served request needs it
        import anyio.to_thread

        # generation threads
        slots = int(anyio.to_thread.current_default_thread_limiter().total_tokens)
        return JSONResponse(
            {
                "build_info": BUILD_INFO,
                "model_path": model_name,
                "total_slots": slots,
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
            Route("/tokenize", answer(tokenize, False), methods=["POST"]),
            Route("/completion", answer(completer.native, True), methods=["POST"]),
            Route("/v1/completions", answer(completer.openai, True), methods=["POST"]),
        ]
    )


def model_name_of(profile: str, vocab: int, model_seed: int) -> str:
    return f"synthetic-{profile}-v{vocab}-seed{model_seed}"


def _bound_socket(port: int) -> Any:
    """A listening-ready TCP socket on 127.0.0.1:`port` (0: a free one) with TCP_NODELAY (`loopback_socket`)."""
    if port == 0:
        return loopback_socket()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=f"python -m {MODULE}", description="Serve one synthetic engine mode."
    )
    parser.add_argument(
        "--mode",
        required=True,
        choices=sorted(SERVABLE),
        help="plain (the reference), a mode, or draft (the draft model served plain)",
    )
    parser.add_argument(
        "--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one, printed)"
    )
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--model-seed", type=int, default=0)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="lm-like")
    parser.add_argument("--k", type=int, default=DEFAULT_K, help="drafts per round")
    args = parser.parse_args(argv)
    if args.vocab < 8 or args.k < 1 or not 0 <= args.port < 65536:
        parser.error(
            f"need --vocab >= 8, --k >= 1 and --port in [0, 65535], got {args.vocab}, {args.k}, {args.port}"
        )
    return args


def main(argv: list[str] | None = None) -> None:
    """Serve until SIGTERM or SIGINT; prints ``listening on URL`` once the socket is bound."""
    # uvicorn (the [engine] extra): only serving needs it
    import uvicorn

    args = parse_args(argv)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    model = SyntheticModel(args.vocab, args.model_seed, args.profile)
    backend = SyntheticBackend(model, servable(args.mode), args.k)
    app = build_app(backend, model_name_of(args.profile, args.vocab, args.model_seed))
    sock = _bound_socket(args.port)
    print(
        f"{BUILD_INFO} ({args.mode}) listening on http://127.0.0.1:{sock.getsockname()[1]}",
        flush=True,
    )
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


class SyntheticServer:
    """``with SyntheticServer(mode="exact", profile="flat") as s: s.base_url, s.pid`` -- its own process."""

    def __init__(
        self,
        mode: str = "exact",
        *,
        vocab: int = 256,
        model_seed: int = 0,
        profile: str = "lm-like",
        k: int = DEFAULT_K,
        ready_timeout_s: float = 30.0,
        stop_timeout_s: float = 5.0,
    ) -> None:
        servable(mode)
        if profile not in PROFILES:
            raise ValueError(f"profile must be one of {sorted(PROFILES)}, got {profile!r}")
        if ready_timeout_s <= 0 or stop_timeout_s <= 0:
            raise ValueError(f"timeouts must be > 0, got {ready_timeout_s}, {stop_timeout_s}")
        self.command = [
            sys.executable,
            "-m",
            MODULE,
            "--mode",
            mode,
            "--port",
            "0",
            "--vocab",
            str(int(vocab)),
            "--model-seed",
            str(int(model_seed)),
            "--profile",
            profile,
            "--k",
            str(int(k)),
        ]
        self.ready_timeout_s, self.stop_timeout_s = ready_timeout_s, stop_timeout_s
        self.base_url, self.pid = "", 0
        self._process: subprocess.Popen | None = None
        self._log: Any = None

    def __enter__(self) -> Self:
        self._log = tempfile.TemporaryFile()
        self._process = subprocess.Popen(self.command, stdout=self._log, stderr=subprocess.STDOUT)
        self.pid = self._process.pid
        try:
            self._wait_ready(time.monotonic() + self.ready_timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def output(self) -> str:
        """What the server process has printed so far."""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def _wait_ready(self, deadline: float) -> None:
        # httpx (the [engine] extra): only serving needs it
        import httpx

        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(
                    f"the synthetic server exited ({self._process.returncode}): {self.output()[-2000:]}"
                )
            found = LISTENING.search(self.output()) if not self.base_url else None
            self.base_url = found.group(1) if found else self.base_url
            if self.base_url:
                try:
                    if httpx.get(self.base_url + "/health", timeout=1.0).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
            time.sleep(0.05)
        raise TimeoutError(
            f"the synthetic server (pid {self.pid}) did not answer /health within "
            f"{self.ready_timeout_s} s"
        )

    def stop(self) -> None:
        """Terminate the process by its PID, kill it if it has not exited after `stop_timeout_s`."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=self.stop_timeout_s)
        if self._log is not None:
            self._log.close()
        self._process, self._log = None, None

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


if __name__ == "__main__":
    main()
