"""The ``openai`` dialect: any OpenAI-compatible ``/v1/completions`` (`generic_openai.GenericOpenAIClient`), with
what the API leaves unsaid told by its own flags: the tokenizer that maps token strings to ids, what the logprobs
are, text-only prompts, token-by-token teacher forcing, the Prometheus counters that show speculation and the
server's own sampler knobs (docs/engines.md).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .client import SamplerChain
from .dialect_plugin import Capabilities, Connection, DialectPlugin
from .generic_openai import REPORT_KINDS, GenericOpenAIClient, openai_request, parse_request_extra
from .vocabulary import Vocabulary


@dataclass(frozen=True)
class OpenAIOptions:
    """What the generic dialect is told about the server (each field is one flag of `OpenAIDialect`)."""

    # the model's tokenizer.json, its directory or its GGUF (--tokenizer)
    tokenizer: str | None = None
    reports: str = "raw"  # what its logprobs are: "raw" or "post_sampling" (--reports)
    draft_counters: tuple[str, str] | None = None  # /metrics counters (drafted, accepted)
    request_extra: dict = field(default_factory=dict)  # merged into every request (--request-extra)
    text_prompts: bool = False  # the server takes text prompts only (--text-prompts)
    # teacher forcing evaluates each forced token alone (--force-token-by-token)
    token_by_token: bool = False

    def __post_init__(self) -> None:
        if self.reports not in REPORT_KINDS:
            raise ValueError(
                f"--reports: must be one of {', '.join(REPORT_KINDS)} (got {self.reports!r})"
            )
        if self.tokenizer and not Path(self.tokenizer).expanduser().exists():
            raise ValueError(f"--tokenizer: {self.tokenizer} does not exist")
        if self.text_prompts and not self.tokenizer:
            raise ValueError(
                "--text-prompts: needs --tokenizer (the ids are sent as the text they decode to)"
            )


@lru_cache(maxsize=4)
def _vocabulary(path: str | None) -> Vocabulary | None:
    return Vocabulary.from_path(path) if path else None


def _counters(args: argparse.Namespace) -> tuple[str, str] | None:
    """--draft-counter and --accepted-counter: both or neither (ValueError naming them otherwise)."""
    named = (args.draft_counter, args.accepted_counter)
    if any(named) and not all(named):
        raise ValueError(
            "--draft-counter / --accepted-counter: give both Prometheus counter names, or neither"
        )
    if all(named) and args.declare_speculation:
        raise ValueError(
            "--declare-speculation: the counters named show speculation; give one or the other"
        )
    return (str(named[0]), str(named[1])) if all(named) else None


class OpenAIDialect(DialectPlugin):
    """SGLang, TGI, TensorRT-LLM's trtllm-serve, llama-cpp-python's server, vLLM without its extensions, ..."""

    name = "openai"
    describe = "any OpenAI-compatible /v1/completions server (its flags below)"
    capabilities = Capabilities(speculation="declared")
    options_type = OpenAIOptions

    def add_arguments(self, group: argparse._ArgumentGroup, command: str) -> None:
        add = group.add_argument
        add(
            "--tokenizer",
            metavar="PATH",
            help="the model's tokenizer.json, its directory or its GGUF, to map token "
            "strings to ids where the server returns no ids (ambiguous strings are refused); its chat template "
            "turns `messages` prompts into text (default: none: ids from the reply)",
        )
        add(
            "--reports",
            choices=REPORT_KINDS,
            default="raw",
            help="the server's logprobs are the model's raw law "
            "or the law sampled from after the whole chain",
        )
        add(
            "--text-prompts",
            action="store_true",
            help="the server takes text prompts only (llama-cpp-python, "
            "TGI): ids are sent as the text they decode to (--tokenizer), each checked to tokenise back to the same "
            "ids at the server's /tokenize or /extras/tokenize; prefixes that do not stay unreported",
        )
        add(
            "--force-token-by-token",
            action="store_true",
            help="teacher forcing evaluates each forced token alone, "
            "as decoding does, for servers that keep one KV cache across requests and whose kernels are not "
            "batch-invariant (llama-cpp-python): requests to each reference server are serialised and shorter "
            "prefixes asked first",
        )
        add(
            "--draft-counter",
            metavar="NAME",
            help="the Prometheus counter of drafted tokens at /metrics (default: "
            "none: speculation declared with --declare-speculation, or not observed)",
        )
        add(
            "--accepted-counter",
            metavar="NAME",
            help="the counter of accepted draft tokens (default: none)",
        )
        add(
            "--request-extra",
            metavar="JSON",
            help="a JSON object merged into every request, for the server's own "
            "knobs (e.g. '{\"repeat_penalty\": 1.0}'); recorded as part of the law (default: none)",
        )

    def options_from(self, args: argparse.Namespace, command: str) -> OpenAIOptions:
        return OpenAIOptions(
            tokenizer=args.tokenizer,
            reports=args.reports,
            draft_counters=_counters(args),
            request_extra=parse_request_extra(args.request_extra),
            text_prompts=args.text_prompts,
            token_by_token=args.force_token_by_token,
        )

    def make_client(
        self, url: str, role: str, options: OpenAIOptions, connection: Connection
    ) -> GenericOpenAIClient:
        """The user's counters on the candidate; token-by-token forcing on the reference."""
        return GenericOpenAIClient(
            url,
            vocabulary=_vocabulary(options.tokenizer),
            probs_kind=options.reports,
            counters=options.draft_counters if role == "candidate" else None,
            request_extra=options.request_extra,
            text_prompts=options.text_prompts,
            token_by_token=options.token_by_token and role == "reference",
            request_timeout_s=connection.request_timeout_s,
            retry=connection.retry,
        )

    def request_defaults(self, chain: SamplerChain, options: OpenAIOptions) -> dict:
        return openai_request(chain, options.request_extra)

    def speculation_of(self, options: OpenAIOptions) -> str:
        """The counters named: read at /metrics; else declared (or not observed)."""
        return "metrics" if options.draft_counters else "declared"


__all__ = ["OpenAIDialect", "OpenAIOptions"]
