"""The command-line flags `engine collect` and `engine certify` share, in the groups ``--help`` shows them in, and
the parts of the collection plan they make (`plan`): the law, the transport, the identity, the load.

Every group's flags show their default (`EngineHelpFormatter`); ``--temperature`` has none (a forgotten one would
certify T = 1 silently). Each registered dialect contributes a group of its own flags (`add_dialect_groups`); a
dialect's flag given with another dialect is refused, naming it (`transport_from`).
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from .client import RetryPolicy, SamplerChain
from .dialect_plugin import Connection, DialectPlugin
from .dialects import DEFAULT_DIALECT, DIALECTS, get_dialect, named_dialects
from .plan import (
    BACKGROUND_KEYS,
    DEFAULT_BACKGROUND_SAMPLING,
    DEFAULT_SERIAL_SHARE,
    Identity,
    LoadDesign,
    Transport,
)

BACKGROUND_SAMPLING_TEXT = ",".join(f"{key}={value}" for key, value in DEFAULT_BACKGROUND_SAMPLING)
PROMPTS_HELP = (
    'JSON Lines of {"prompt_id", and one of "prompt_tokens": [ids], "text": str (the engine\'s tokenizer) '
    'or "messages": [{"role", "content"}] (a chat, through the engine\'s chat template)}'
)
#: Where `add_dialect_groups` leaves each dialect's flags on the parsed arguments: {dialect: [(flag, dest, default)]}.
DIALECT_FLAGS = "_dialect_flags"


class EngineHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The description and epilog as written; every option's help ends with its default (or says it is required),
    unless the help states its default itself."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.required:
            return text + " (required)"
        if not action.option_strings or action.default is argparse.SUPPRESS or "default" in text:
            return text
        if isinstance(action, argparse._StoreTrueAction):
            return text + " (default: off)"
        if action.default is None or action.default == "":
            return text + " (default: none)"
        return text + " (default: %(default)s)"


def add_endpoint_arguments(group: argparse._ArgumentGroup) -> None:
    """The two ends and the dialect they speak (in the command's "what" group)."""
    group.add_argument(
        "--reference-url",
        action="append",
        metavar="URL",
        help="the engine with speculation off, "
        "e.g. http://127.0.0.1:8081 (repeatable: replicas, requests spread over them; default: none, "
        "give it or --engine-adapter)",
    )
    group.add_argument(
        "--candidate-url",
        action="append",
        metavar="URL",
        help="the same engine and model with "
        "speculation on (repeatable; default: none, give it or --engine-adapter)",
    )
    group.add_argument(
        "--dialect",
        choices=named_dialects(),
        default=None,
        help="how both ends are spoken to: "
        + "; ".join(f"{name}: {DIALECTS[name].describe}" for name in named_dialects())
        + f" (default: {DEFAULT_DIALECT}; --engine-adapter chooses the in-process one)",
    )


def add_sampling_group(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The law both ends are asked for, and the reports; the command adds its own flags to the group returned."""
    group = parser.add_argument_group(
        "sampling: the law both ends are asked for (every request pins it)"
    )
    add = group.add_argument
    add(
        "--temperature",
        type=float,
        required=True,
        help="the temperature (0: greedy); no default, so that a "
        "forgotten one does not certify T = 1",
    )
    add("--top-k", type=int, default=0, help="top-k truncation (0: off)")
    add("--top-p", type=float, default=1.0, help="top-p (nucleus) truncation (1: off)")
    add("--min-p", type=float, default=0.0, help="min-p truncation (0: off)")
    add(
        "--max-tokens",
        type=int,
        default=16,
        help="tokens per completion; a certificate covers positions 1..max-tokens",
    )
    add(
        "--ignore-eos",
        action="store_true",
        help="ask the engine to ignore EOS (it changes the law: both ends)",
    )
    add(
        "--seed-key",
        default=None,
        help="hex key of the random seeds (default: the resumed files' key, else a fresh one)",
    )
    add("--teacher-n-probs", type=int, default=20, help="N of the reference's reported top-N")
    return group


def add_load_group(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The candidate's load, the requests' connection; the command adds its budget flags to the group returned."""
    group = parser.add_argument_group("load and budget")
    add = group.add_argument
    add(
        "--concurrency",
        type=int,
        default=4,
        help="candidate requests in flight at once, sent in waves that reach "
        "the server together; the certificate states the load measured",
    )
    add(
        "--reference-concurrency",
        type=int,
        default=None,
        help="reference requests in flight (default: --concurrency)",
    )
    add(
        "--serial-share",
        type=float,
        default=None,
        metavar="F",
        help="candidate: this share of each prompt's seeds "
        "is asked one request at a time, the others at --concurrency (seed index i when floor((i + 1) F) > floor(i F): "
        "every 4th at 0.25, chosen before any sampling); each record says which, 'serial' or 'loaded' (default: "
        f"{DEFAULT_SERIAL_SHARE}; 0 with --engine-adapter, which refuses it)",
    )
    add(
        "--background-load",
        type=int,
        default=0,
        metavar="N",
        help="candidate: N more requests sent with every wave "
        "of loaded ones, with --background-sampling, so that bugs that mix a batch's sampling show; not samples, "
        "their number and load are recorded (0: off; refused with --engine-adapter)",
    )
    add(
        "--background-sampling",
        default=BACKGROUND_SAMPLING_TEXT,
        metavar="KEY=VALUE,...",
        help=f"the background requests' sampling, over the run's: {', '.join(BACKGROUND_KEYS)}",
    )
    add("--request-timeout-s", type=float, default=120.0, help="seconds per HTTP request")
    add(
        "--retries", type=int, default=5, help="attempts per request on connection errors, 5xx, 429"
    )
    add("--retry-wait-s", type=float, default=0.5, help="first wait between attempts, doubling")
    return group


def add_identity_group(parser: argparse.ArgumentParser) -> None:
    """What the engine is and how it speculates: recorded in the sample files' headers and the certificate."""
    group = parser.add_argument_group(
        "identity: the engine and its speculation, as the certificate records them"
    )
    add = group.add_argument
    add(
        "--engine-name",
        default=None,
        help="default: the dialect's name (the class with --engine-adapter)",
    )
    add(
        "--engine-version",
        help="default: what the engine reports (/props build_info; an sdist build of llama.cpp "
        "says b0-unknown)",
    )
    add(
        "--engine-flags",
        default="",
        help="the engine's command-line flags, recorded in both headers",
    )
    add(
        "--candidate-flags",
        default="",
        help="the candidate's extra flags (its speculation), recorded in its header",
    )
    add(
        "--speculation-type",
        help="draft-model, ngram, ... (default: unspecified; recorded in the candidate's header)",
    )
    add(
        "--draft-sampling",
        choices=("greedy", "probabilistic"),
        default=None,
        help="how the drafts are verified (default: unspecified)",
    )
    add(
        "--expect-seed-coupled",
        action="store_true",
        help="the engine is expected to give the same tokens for the "
        "same seed at both ends (sampler-match drafting); `engine certify` then teacher-forces nothing until a seed "
        "mismatches; a mismatch disproves only the coupling, never exactness",
    )
    add(
        "--declare-speculation",
        action="store_true",
        help="the candidate speculates, declared (the server shows no "
        "counters); the certificate says so",
    )
    add(
        "--model-name", help="default: the file name of the engine's model path (/props model_path)"
    )
    add("--model-sha256", help="default: none (not recorded)")


def add_dialect_groups(parser: argparse.ArgumentParser, command: str) -> None:
    """One group per registered dialect with its own flags (`DialectPlugin.add_arguments`); which flags each owns is
    left on the parsed arguments (`DIALECT_FLAGS`), so that another dialect's flags can be refused."""
    owned: dict[str, list[tuple[str, str, Any]]] = {}
    for plugin in DIALECTS.values():
        group = parser.add_argument_group(plugin.group_title)
        plugin.add_arguments(group, command)
        owned[plugin.name] = [
            (action.option_strings[0], action.dest, action.default)
            for action in group._group_actions
        ]
    parser.set_defaults(**{DIALECT_FLAGS: owned})


def law_from(args: argparse.Namespace, n_probs: int = 0) -> SamplerChain:
    """The law asked (`SamplerChain`: ValueError naming the flag out of range)."""
    return SamplerChain(
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        min_p=args.min_p,
        max_tokens=args.max_tokens,
        n_probs=n_probs,
        ignore_eos=args.ignore_eos,
    )


def chosen_dialect(args: argparse.Namespace) -> DialectPlugin:
    """The dialect the command line chooses: by a flag of its own (--engine-adapter), else --dialect, else the
    default; ValueError when both choose, or when another dialect's flag is given."""
    selected = [plugin for plugin in DIALECTS.values() if plugin.selected_by(args)]
    if selected and args.dialect not in (None, selected[0].name):
        raise ValueError(
            f"{selected[0].only_with}: selects the {selected[0].name} dialect ({selected[0].describe}); "
            f"leave out --dialect {args.dialect}"
        )
    plugin = selected[0] if selected else get_dialect(args.dialect or DEFAULT_DIALECT)
    for name, flags in getattr(args, DIALECT_FLAGS, {}).items():
        for flag, dest, default in flags if name != plugin.name else ():
            if getattr(args, dest, default) != default:
                raise ValueError(
                    f"{flag}: only with {DIALECTS[name].only_with} (this run's dialect is "
                    f"{plugin.name})"
                )
    return plugin


def transport_from(args: argparse.Namespace, command: str) -> Transport:
    """The dialect with its own options, the URLs (checked), the requests in flight and the connection."""
    plugin = chosen_dialect(args)
    transport = Transport(
        dialect=plugin,
        options=plugin.options_from(args, command),
        reference_urls=tuple(args.reference_url or ()),
        candidate_urls=tuple(args.candidate_url or ()),
        concurrency=args.concurrency,
        reference_concurrency=args.reference_concurrency,
        connection=Connection(args.request_timeout_s, RetryPolicy(args.retries, args.retry_wait_s)),
    )
    transport.endpoints()  # a bad URL, or URLs beside --engine-adapter: refused before anything runs
    return transport


def identity_from(
    args: argparse.Namespace, transport: Transport, record_speculation: bool
) -> Identity:
    """What the headers record of the engine; `record_speculation`: the candidate's speculation is recorded even
    when --speculation-type is not given (`engine certify`: a certificate says what it certified)."""
    speculation = None
    if args.speculation_type or record_speculation:
        speculation = {
            "type": args.speculation_type or "unspecified",
            "draft_sampling": args.draft_sampling,
            "expect_seed_coupled": bool(args.expect_seed_coupled),
        }
        if args.declare_speculation:
            speculation["evidence"] = "declared"
    name = args.engine_name or transport.plugin.default_engine_name(transport.options)
    return Identity(
        engine_name=name,
        engine_version=args.engine_version,
        engine_flags=tuple(shlex.split(args.engine_flags or "")),
        candidate_flags=tuple(shlex.split(args.candidate_flags or "")),
        speculation=speculation,
        model_name=args.model_name,
        model_sha256=args.model_sha256,
    )


def parse_background_sampling(text: str) -> tuple[tuple[str, Any], ...]:
    """--background-sampling KEY=VALUE,...: keys of `plan.BACKGROUND_KEYS`, values of their kind (ValueError naming
    the argument otherwise)."""
    pairs = []
    for part in (part.strip() for part in text.split(",") if part.strip()):
        key, equals, value = (piece.strip() for piece in part.partition("="))
        kind = BACKGROUND_KEYS.get(key)
        if not equals or kind is None:
            raise ValueError(
                f"--background-sampling: {part!r} is not KEY=VALUE with KEY one of "
                f"{', '.join(BACKGROUND_KEYS)}"
            )
        try:
            pairs.append((key, kind(value)))
        except ValueError:
            kind_name = "an integer" if kind is int else "a number"
            raise ValueError(f"--background-sampling: {key}={value!r} is not {kind_name}") from None
    return tuple(pairs)


def load_from(args: argparse.Namespace) -> LoadDesign:
    """--serial-share, --background-load, --background-sampling (ValueError naming the argument)."""
    if args.background_sampling != BACKGROUND_SAMPLING_TEXT and not args.background_load:
        raise ValueError(
            "--background-sampling: only with --background-load N (the background requests it sets)"
        )
    return LoadDesign(
        serial_share=args.serial_share,
        background_load=args.background_load,
        background_sampling=parse_background_sampling(args.background_sampling),
    )


__all__ = [
    "BACKGROUND_SAMPLING_TEXT",
    "EngineHelpFormatter",
    "PROMPTS_HELP",
    "add_dialect_groups",
    "add_endpoint_arguments",
    "add_identity_group",
    "add_load_group",
    "add_sampling_group",
    "chosen_dialect",
    "identity_from",
    "law_from",
    "load_from",
    "parse_background_sampling",
    "transport_from",
]
