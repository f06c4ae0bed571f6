"""A toy dialect, written as a new dialect is: this one module (its options, its flag, its client, its plugin) and one
registration line (`register_dialect(ToyDialect())`, in `tests/test_engine_dialect_plugin.py`).

It speaks a toy JSON protocol over HTTP, with a bearer token given by its own flag ``--toy-token``:

* ``GET /toy/info`` -> {"engine", "version", "model"};
* ``POST /toy/sample`` {"prompt": ids, "seed", temperature, top_k, top_p, min_p, ignore_eos, max_tokens, n_probs}
  -> {"ids", "eos", "drafted", "accepted", "top": per position [[id, p], ...] or null};
* ``POST /toy/report`` {"prompt": ids, temperature, top_k, top_p, min_p, ignore_eos, n_probs} -> {"top": [[id, p],
  ...]} (a report without sampling).

Nothing else of exactspec changes: the rounds, teacher forcing (through `report_after`), the certificate and the exit
codes are the other dialects'.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any

import httpx

from exactspec.conformance.engine.collect.client import Reply, RetryPolicy, SamplerChain, probe_http
from exactspec.conformance.engine.collect.client import send_with_retries
from exactspec.conformance.engine.collect.dialect_plugin import (
    Capabilities,
    Connection,
    DialectPlugin,
)


@dataclass(frozen=True)
class ToyOptions:
    """The toy dialect's one option: the bearer token its servers want."""

    token: str = ""


def _law(chain: SamplerChain) -> dict:
    """What every request pins of the law (a sample file's request defaults, under the names the checks read)."""
    return {
        "temperature": chain.temperature,
        "top_k": chain.top_k,
        "top_p": chain.top_p,
        "min_p": chain.min_p,
        "ignore_eos": chain.ignore_eos,
        "max_tokens": chain.max_tokens,
    }


class ToyClient:
    """One end of a toy server (the collector's client interface)."""

    def __init__(self, base_url: str, token: str, connection: Connection) -> None:
        self.base_url, self.retry, self.requests_sent = (
            base_url.rstrip("/"),
            connection.retry or RetryPolicy(),
            0,
        )
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=connection.request_timeout_s,
            headers={"authorization": f"Bearer {token}"},
        )

    async def __aenter__(self) -> "ToyClient":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._http.aclose()

    async def probe(self) -> None:
        await probe_http(self._http, self.base_url, "/toy/info")

    async def complete(
        self, prompt_tokens: list[int], seed: int, chain: SamplerChain, extra: dict | None = None
    ) -> tuple[Reply, dict]:
        body = {
            **_law(chain),
            "n_probs": chain.n_probs,
            "seed": int(seed),
            "prompt": [int(t) for t in prompt_tokens],
        }
        times: list[float] = []
        started = time.perf_counter()
        answer = await send_with_retries(self, "POST", "/toy/sample", body, times=times)
        timings = (
            {"draft_n": answer["drafted"], "draft_n_accepted": answer["accepted"]}
            if answer["drafted"]
            else None
        )
        reply = Reply(
            tokens=answer["ids"],
            text="",
            top_probs=answer["top"],
            probs_kind="post_sampling" if answer["top"] else None,
            finish_reason="eos" if answer["eos"] else "limit",
            timings=timings,
            elapsed_s=time.perf_counter() - started,
            sent_at=times[0],
            received_at=times[1],
        )
        return reply, body

    async def report_after(self, prefix: list[int], chain: SamplerChain) -> tuple[list, dict]:
        body = {**_law(chain), "n_probs": chain.n_probs, "prompt": [int(t) for t in prefix]}
        answer = await send_with_retries(self, "POST", "/toy/report", body)
        return answer["top"], body

    async def tokenize(self, text: str) -> list[int]:
        raise ValueError("prompts: the toy dialect takes token ids only (prompt_tokens)")

    async def chat_tokenize(self, messages: list[dict]) -> list[int]:
        raise ValueError("prompts: the toy dialect takes token ids only (prompt_tokens)")

    async def props(self) -> dict | None:
        try:
            info = await send_with_retries(self, "GET", "/toy/info", None)
        except (httpx.HTTPError, ValueError):
            return None
        return {"build_info": f"{info['engine']} {info['version']}", "model_alias": info["model"]}


class ToyDialect(DialectPlugin):
    """The toy protocol above: draft counters per reply, reports without sampling, one flag of its own."""

    name = "toy"
    describe = "the tests' toy JSON protocol (--toy-token)"
    capabilities = Capabilities(speculation="timings")
    options_type = ToyOptions

    def add_arguments(self, group: argparse._ArgumentGroup, command: str) -> None:
        group.add_argument("--toy-token", default="", help="the bearer token the toy servers want")

    def options_from(self, args: argparse.Namespace, command: str) -> ToyOptions:
        return ToyOptions(token=args.toy_token)

    def make_client(self, url: str, role: str, options: ToyOptions, connection: Connection) -> Any:
        return ToyClient(url, options.token, connection)

    def request_defaults(self, chain: SamplerChain, options: ToyOptions) -> dict:
        return _law(chain)


__all__ = ["ToyClient", "ToyDialect", "ToyOptions"]
