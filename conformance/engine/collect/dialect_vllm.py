"""The ``vllm`` dialect: vLLM's OpenAI server with its token-id extensions (`openai_client.OpenAIEngineClient`).

Its reports are post-sampling when the server runs with ``--logprobs-mode processed_logprobs`` (read from the flags
recorded with ``--engine-flags`` / ``--candidate-flags``), raw otherwise; the candidate is asked for none (vLLM's
placeholders at accepted drafts break the reply); speculation shows only in ``/metrics``, read around each batch.
It has no flags of its own.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterable
from dataclasses import dataclass

from .client import SamplerChain
from .dialect_plugin import Capabilities, Connection, DialectPlugin
from .generic_openai import REPORT_KINDS
from .openai_client import OpenAIEngineClient, vllm_request


@dataclass(frozen=True)
class VllmOptions:
    """What vLLM's logprobs are: the law sampled from (``post_sampling``) or the model's raw law."""

    reports: str = "raw"

    def __post_init__(self) -> None:
        if self.reports not in REPORT_KINDS:
            raise ValueError(f"reports: must be one of {REPORT_KINDS} (got {self.reports!r})")

    @classmethod
    def from_flags(cls, flags: Iterable[str]) -> "VllmOptions":
        """The options a server started with `flags` needs (processed logprobs: post-sampling reports)."""
        return cls("post_sampling" if "processed_logprobs" in " ".join(flags) else "raw")


class VllmDialect(DialectPlugin):
    """vLLM's OpenAI server: /v1/completions with token-id prompts, return_token_ids, top-N keyed by id."""

    name = "vllm"
    describe = (
        "vLLM's OpenAI server (/v1/completions with its token-id extensions; drafts from /metrics)"
    )
    capabilities = Capabilities(speculation="metrics")
    options_type = VllmOptions

    def options_from(self, args: argparse.Namespace, command: str) -> VllmOptions:
        return VllmOptions.from_flags(
            [*shlex.split(args.engine_flags or ""), *shlex.split(args.candidate_flags or "")]
        )

    def make_client(
        self, url: str, role: str, options: VllmOptions, connection: Connection
    ) -> OpenAIEngineClient:
        return OpenAIEngineClient(
            url,
            probs_kind=options.reports,
            measure_drafts=False,
            report_probs=role != "candidate",
            request_timeout_s=connection.request_timeout_s,
            retry=connection.retry,
        )

    def request_defaults(self, chain: SamplerChain, options: VllmOptions) -> dict:
        return vllm_request(chain)


__all__ = ["VllmDialect", "VllmOptions"]
