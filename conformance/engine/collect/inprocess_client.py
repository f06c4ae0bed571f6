"""The ``python`` dialect's client: an in-process engine backend (`..backend`) behind the collector's client
interface (``complete``, ``tokenize``, ``chat_tokenize``, ``props``), so that an adapter goes through the same
rounds, teacher forcing and certificate as an HTTP endpoint.

Calls run in worker threads (the event loop keeps both ends and the teacher forcing going), serialised per adapter
unless it says ``thread_safe``. The reference's reports while sampling (``n_probs``) and when teacher-forced both
come from the adapter's ``report`` (teacher forcing samples nothing: `report_after`); they agree when the report
depends on the prefix alone, which the certificate's premise check measures (an engine whose logits depend on how
the prefix was evaluated fails it: llama-cpp-python's adapter evaluates as plain decoding does for that reason).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from ..backend import Sampling, load_backend
from .client import Reply, SamplerChain
from .engine_errors import EngineCallError

ADAPTER_SCHEME = "python:"


def sampling_of(chain: SamplerChain) -> Sampling:
    """The adapter's view of a pinned sampler chain."""
    return Sampling(
        temperature=chain.temperature,
        top_k=chain.top_k,
        top_p=chain.top_p,
        min_p=chain.min_p,
        ignore_eos=chain.ignore_eos,
    )


def python_request(chain: SamplerChain) -> dict:
    """The law an in-process engine is asked for (`..backend.Sampling`) and the tokens per completion: the sample
    files' request defaults, and the law part of every recorded request."""
    return {
        "temperature": chain.temperature,
        "top_k": chain.top_k,
        "top_p": chain.top_p,
        "min_p": chain.min_p,
        "max_tokens": chain.max_tokens,
        "ignore_eos": chain.ignore_eos,
    }


def checked_report(listed: Any, n: int, where: str) -> list[list[float]]:
    """[[id, p], ...] from an adapter's report: at most n pairs, probabilities in [0, 1] summing to <= 1 (ValueError
    naming `where` otherwise), most probable first (ties by id)."""
    try:
        pairs = [[int(token), float(p)] for token, p in listed]
    except (TypeError, ValueError):
        raise ValueError(
            f"report at {where}: expected (token_id, probability) pairs, got {listed!r:.200}"
        ) from None
    if not pairs or len(pairs) > n:
        raise ValueError(f"report at {where}: {len(pairs)} pairs, expected 1..{n}")
    if not all(0.0 <= p <= 1.0 for _, p in pairs) or sum(p for _, p in pairs) > 1.0 + 1e-6:
        raise ValueError(
            f"report at {where}: probabilities must lie in [0, 1] and sum to at most 1: {pairs[:5]}"
        )
    if len({token for token, _ in pairs}) != len(pairs):
        raise ValueError(f"report at {where}: a token id is listed twice")
    pairs.sort(key=lambda pair: (-pair[1], pair[0]))
    return pairs


class InProcessClient:
    """One role of an in-process adapter; use as ``async with InProcessClient(...)``."""

    def __init__(self, spec: str, role: str, options: dict[str, str] | None = None) -> None:
        self.spec, self.role = spec, role
        try:
            self.adapter = load_backend(spec, role, options)
        except ValueError:
            raise  # a bad --engine-adapter or --adapter-option: a usage error naming it
        except Exception as error:  # noqa: BLE001 -- the engine's own failure to start (a model missing, ...)
            raise EngineCallError(
                f"--engine-adapter {spec}: building the {role} raised {type(error).__name__}: "
                f"{error}"
            ) from error
        self.base_url = ADAPTER_SCHEME + spec
        self.requests_sent = 0
        self._lock = None if getattr(self.adapter, "thread_safe", False) else _lock_of(self.adapter)

    async def __aenter__(self) -> "InProcessClient":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    async def probe(self) -> None:
        """Nothing to reach: the engine was built with the client (a failure to build raised there)."""

    async def _call(self, method: str, *args: Any, times: list | None = None) -> Any:
        """The adapter's `method` in a worker thread, under the adapter's lock unless it is thread-safe; `times` gets
        when the call started and ended (inside the lock: the load the engine was under)."""
        self.requests_sent += 1
        function, lock = getattr(self.adapter, method), self._lock

        def timed() -> Any:
            started = time.time()
            try:
                result = function(*args)
            except Exception as error:  # noqa: BLE001 -- the engine's failure, not exactspec's: the run stops on it
                raise EngineCallError(
                    f"{self.spec} ({self.role}): {method} raised {type(error).__name__}: {error}"
                ) from error
            if times is not None:
                times[:] = [started, time.time()]
            return result

        def locked() -> Any:
            if lock is None:
                return timed()
            with lock:
                return timed()

        return await asyncio.to_thread(locked)

    async def complete(
        self, prompt_tokens: list[int], seed: int, chain: SamplerChain, extra: dict | None = None
    ) -> tuple[Reply, dict]:
        """One completion (and, when the chain asks for n_probs, the report after each of its prefixes)."""
        prompt, sampling = [int(t) for t in prompt_tokens], sampling_of(chain)
        body = {
            **python_request(chain),
            "n_probs": chain.n_probs,
            "seed": int(seed),
            "prompt": prompt,
        }
        times: list[float] = []
        started = time.perf_counter()
        done = await self._call(
            "complete", prompt, int(seed), sampling, chain.max_tokens, times=times
        )
        tokens = [int(t) for t in done.tokens]
        if len(tokens) > chain.max_tokens:
            raise ValueError(f"complete: {len(tokens)} tokens for max_tokens {chain.max_tokens}")
        top = None
        if chain.n_probs:
            top = [
                checked_report(
                    await self._call("report", prompt + tokens[:t], sampling, chain.n_probs),
                    chain.n_probs,
                    f"position {t + 1}",
                )
                for t in range(len(tokens))
            ]
        timings = None
        if done.draft_n is not None:
            timings = {
                "draft_n": int(done.draft_n),
                "draft_n_accepted": int(done.draft_n_accepted or 0),
            }
        finish = "eos" if done.stopped_by_eos else "limit"
        return Reply(
            tokens=tokens,
            text="",
            top_probs=top,
            probs_kind="post_sampling" if top else None,
            finish_reason=finish,
            timings=timings,
            elapsed_s=time.perf_counter() - started,
            sent_at=times[0],
            received_at=times[1],
        ), body

    async def report_after(
        self, prefix: list[int], chain: SamplerChain
    ) -> tuple[list[list[float]], dict]:
        """Teacher forcing: the adapter's report after `prefix` (nothing sampled), and the request as recorded."""
        ids, sampling = [int(t) for t in prefix], sampling_of(chain)
        body = {**python_request(chain), "n_probs": chain.n_probs, "prompt": ids}
        listed = checked_report(
            await self._call("report", ids, sampling, chain.n_probs),
            chain.n_probs,
            f"prefix of {len(ids)} tokens",
        )
        return listed, body

    async def tokenize(self, text: str) -> list[int]:
        if not callable(getattr(self.adapter, "tokenize", None)):
            raise ValueError(
                f"prompts: {self.spec} has no tokenize method: give prompt_tokens (ids), not text"
            )
        return [int(t) for t in await self._call("tokenize", text)]

    async def chat_tokenize(self, messages: list[dict]) -> list[int]:
        if not callable(getattr(self.adapter, "chat_tokenize", None)):
            raise ValueError(
                f"prompts: {self.spec} has no chat_tokenize method: give prompt_tokens or text"
            )
        return [int(t) for t in await self._call("chat_tokenize", messages)]

    async def props(self) -> dict:
        """The header's engine props: the adapter's name, version and model."""
        adapter = self.adapter
        return {
            "build_info": str(getattr(adapter, "version", "unknown")),
            "model_alias": str(getattr(adapter, "model_name", "unknown")),
            "adapter": self.spec,
            "engine": str(getattr(adapter, "name", type(adapter).__name__)),
            "calls": "serialised" if self._lock is not None else "concurrent",
        }


_LOCKS: dict[int, threading.Lock] = {}


def _lock_of(adapter: Any) -> threading.Lock:
    """One lock per adapter instance, shared by every client of its role (adapters live as long as the process)."""
    return _LOCKS.setdefault(id(adapter), threading.Lock())


__all__ = ["ADAPTER_SCHEME", "InProcessClient", "checked_report", "python_request", "sampling_of"]
