"""The ``llama.cpp`` dialect (the default): llama.cpp's native ``/completion`` (`client.LlamaCppClient`).

Token ids come back with ``return_tokens``, the reports are post-sampling top-N, the draft counters are in each
reply's ``timings``; teacher forcing may reuse the server's prompt cache (``--no-cache-prompt`` turns it off in
`engine certify`, ``--cache-prompt`` turns it on in `engine collect`: every certificate measures what it does).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from .client import LlamaCppClient, SamplerChain
from .dialect_plugin import Capabilities, Connection, DialectPlugin

ENDPOINTS = ("/completion", "/v1/completions")


@dataclass(frozen=True)
class LlamaCppOptions:
    """The path completions are asked at, and whether teacher forcing reuses the prompt cache."""

    endpoint: str = "/completion"
    cache_prompt: bool = False

    def __post_init__(self) -> None:
        if not self.endpoint.startswith("/"):
            raise ValueError(
                f"--endpoint: must be a path such as /completion (got {self.endpoint!r})"
            )


class LlamaCppDialect(DialectPlugin):
    """llama.cpp's `llama-server` and any server in its shape (exactspec's synthetic and mutant servers)."""

    name = "llama.cpp"
    describe = "llama.cpp's native /completion (the default)"
    capabilities = Capabilities(speculation="timings", prompt_cache=True)
    options_type = LlamaCppOptions

    def add_arguments(self, group: argparse._ArgumentGroup, command: str) -> None:
        group.add_argument(
            "--endpoint",
            default="/completion",
            help="/completion (llama.cpp's native one) or "
            "/v1/completions (only for engines whose OpenAI reply carries token ids: llama.cpp's "
            "does not)",
        )
        if command == "certify":
            group.add_argument(
                "--no-cache-prompt",
                action="store_true",
                help="teacher forcing re-evaluates every "
                "prompt (by default it reuses llama.cpp's prompt cache; every certificate measures "
                "that decode-time and teacher-forced reports agree within the tolerance)",
            )
        else:
            group.add_argument(
                "--cache-prompt",
                action="store_true",
                help="teacher forcing reuses llama.cpp's prompt cache",
            )

    def options_from(self, args: argparse.Namespace, command: str) -> LlamaCppOptions:
        cache = not args.no_cache_prompt if command == "certify" else args.cache_prompt
        return LlamaCppOptions(endpoint=args.endpoint, cache_prompt=cache)

    def make_client(
        self, url: str, role: str, options: LlamaCppOptions, connection: Connection
    ) -> LlamaCppClient:
        return LlamaCppClient(
            url,
            endpoint=options.endpoint,
            request_timeout_s=connection.request_timeout_s,
            retry=connection.retry,
        )

    def request_defaults(self, chain: SamplerChain, options: LlamaCppOptions) -> dict:
        return chain.request()

    def forcing_extra(self, options: LlamaCppOptions) -> dict | None:
        return {"cache_prompt": True} if options.cache_prompt else None


__all__ = ["LlamaCppDialect", "LlamaCppOptions"]
