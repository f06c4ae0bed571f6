"""The engine commands' help says what exists and every default: `engine certify --help` and `engine collect --help`
in groups (what to certify, sampling, load and budget, identity, then one group per dialect with its own flags),
every option's default shown or the option marked required, `--temperature` required, the synopsis naming every
dialect and prompt form; `engine serve --help` naming its three engines; every help ending with the exit codes it
returns. And the recorded `command.txt` of every engine certificate still parses (old flag spellings work)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import pytest

pytest.importorskip("httpx")

from exactspec.cli import build_parser  # noqa: E402
from exactspec.conformance.engine.collect.arguments import EngineHelpFormatter, chosen_dialect  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
GROUPS = [
    "what to certify",
    "sampling: the law both ends are asked for (every request pins it)",
    "load and budget",
    "identity: the engine and its speculation, as the certificate records them",
    "--dialect llama.cpp",
    "--dialect vllm",
    "--dialect openai",
    "in process (--engine-adapter): a Python engine instead of two URLs",
]


def _subcommand(name: str) -> argparse.ArgumentParser:
    engine = build_parser("engine")._subparsers._group_actions[0].choices["engine"]  # type: ignore[union-attr]
    return engine._subparsers._group_actions[0].choices[name]


def _groups(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    return {
        group.title: [a.option_strings[0] for a in group._group_actions]
        for group in parser._action_groups
        if group.title not in ("positional arguments", "options")
    }


@pytest.mark.parametrize("name", ["certify", "collect"])
def test_every_option_shows_its_default_or_that_it_is_required(name):
    parser, formatter = _subcommand(name), EngineHelpFormatter("x")
    for action in parser._actions:
        if action.option_strings and action.dest != "help":
            shown = formatter._get_help_string(action)
            assert "default" in shown or shown.endswith("(required)"), (
                action.option_strings,
                shown,
            )
    required = {a.option_strings[0] for a in parser._actions if a.required}
    assert "--temperature" in required and "--prompts" in required
    help_text = parser.format_help()
    assert "exit status:" in help_text and "  6  unavailable" in help_text


def test_certify_help_groups_its_flags_and_names_what_exists():
    parser = _subcommand("certify")
    groups = _groups(parser)
    # no flags
    assert [title for title in groups if groups[title]] == [
        g for g in GROUPS if g != "--dialect vllm"
    ]
    assert groups["--dialect openai"] == [
        "--tokenizer",
        "--reports",
        "--text-prompts",
        "--force-token-by-token",
        "--draft-counter",
        "--accepted-counter",
        "--request-extra",
    ]
    assert groups["--dialect llama.cpp"] == ["--endpoint", "--no-cache-prompt"]
    assert (
        "--temperature" in groups[GROUPS[1]]
        and "--top-p" in groups[GROUPS[1]]
        and "--min-p" in groups[GROUPS[1]]
    )
    dialect = next(a for a in parser._actions if a.dest == "dialect")
    assert list(dialect.choices) == ["llama.cpp", "vllm", "openai"]
    help_text = " ".join(parser.format_help().split())
    assert "--dialect llama.cpp|vllm|openai" in help_text and '"messages"' in help_text
    assert "--top-p TOP_P top-p (nucleus) truncation (1: off) (default: 1.0)" in help_text
    assert "--min-p MIN_P min-p truncation (0: off) (default: 0.0)" in help_text
    assert "llama.cpp, vLLM or llama-cpp-python" in help_text
    assert _groups(_subcommand("collect"))["--dialect llama.cpp"] == [
        "--endpoint",
        "--cache-prompt",
    ]


def test_serve_and_engine_help_name_the_four_engines_and_show_defaults():
    serve = _subcommand("serve")
    engine = next(a for a in serve._actions if a.dest == "engine")
    assert list(engine.choices) == ["llama.cpp", "vllm", "llama-speculative", "llama-cpp-python"]
    shown = " ".join(serve.format_help().split())
    assert "(default: llama.cpp)" in shown and "(default: ngram)" in shown
    assert "6 unavailable" in shown
    top = " ".join(build_parser("engine").format_help().split())
    assert "llama.cpp, its speculative example, vLLM or llama-cpp-python" in top


def _recorded_certify_commands() -> list[tuple[str, list[str]]]:
    found = []
    for path in sorted((REPO / "docs" / "certificates" / "engine").glob("*/command.txt")):
        for line in path.read_text().splitlines():
            if not line.startswith("exactspec engine certify "):
                continue
            words = shlex.split(line, comments=True)
            if words[:3] == ["exactspec", "engine", "certify"]:
                found.append((path.parent.name, words[3:]))
    return found


@pytest.mark.parametrize(
    "name, argv", _recorded_certify_commands(), ids=[n for n, _ in _recorded_certify_commands()]
)
def test_every_recorded_certify_command_still_parses(name, argv):
    """The flags of every certificate's command.txt keep their spelling and meaning: parsed, their dialect chosen
    and no flag refused as another dialect's (reproducing a run needs its servers, not a new spelling)."""
    args = _subcommand("certify").parse_args(argv)
    assert chosen_dialect(args).name in ("llama.cpp", "vllm", "openai", "python")
    assert args.temperature is not None
