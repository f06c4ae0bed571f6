"""`exactspec engine SUBCOMMAND`: the engine level's commands, each in the part of the engine folder it belongs to.

* `certify` (`collect.engine_certify`): collect, teacher-force and certify in rounds until a verdict: the one command;
* `serve` (`serve.command`): start a built-in engine's servers (llama.cpp, its speculative example, vLLM or
  llama-cpp-python) on 127.0.0.1
  and print their URLs and the `engine certify` command for them;
* `collect` (`collect.engine_collect`): one collection step, for files certified later by `exactspec certify-samples`;
* `explain` (`diagnosis.explain`): re-run the diagnosis of a certificate's files offline (torch- and httpx-free);
* `draft-reports` (`collect.draft_reports`): the draft's reports of a certificate's prefixes, for the diagnosis.

Each subcommand's module exposes ``add_arguments(parser)`` and ``run(args)``; `certify`, `serve` and `collect` need the
`[engine]` extra, `explain` none. A usage error is one line (`OneLineErrorParser`) with exit 2, as in every command.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from ...outcomes import ExitCode, exit_codes_help

SUBCOMMANDS = {
    "certify": (
        ".collect.engine_certify",
        "collect, teacher-force and certify in rounds until a verdict (one command)",
    ),
    "serve": (
        ".serve.command",
        "start a built-in engine's servers (llama.cpp, its speculative example, vLLM or "
        "llama-cpp-python) on 127.0.0.1 and print the certify command",
    ),
    "collect": (
        ".collect.engine_collect",
        "sample completions from a reference and a candidate endpoint into files",
    ),
    "explain": (
        ".diagnosis.explain",
        "re-run a certificate's diagnosis (where, which mechanism fits) on its files",
    ),
    "draft-reports": (
        ".collect.draft_reports",
        "ask the draft served plain for its reports of a certificate's "
        "prefixes (draft.jsonl: the diagnosis then fits the mechanisms that read q)",
    ),
}
#: A subcommand whose extra is not installed exits with this code, naming the package to install.
EXIT_MISSING_EXTRA = ExitCode.UNAVAILABLE


class OneLineErrorParser(argparse.ArgumentParser):
    """A parser whose usage errors are one line naming the argument (not the whole usage of ~40 flags), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(int(ExitCode.USAGE), f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _missing_extra(name: str, error: ModuleNotFoundError) -> int:
    print(
        f"exactspec engine {name}: needs a missing package ({error}); install `pip install exactspec[engine]`",
        file=sys.stderr,
    )
    return int(EXIT_MISSING_EXTRA)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One subparser per subcommand, with its module's options; a subcommand whose extra is missing still parses
    and says which package it needs, so that the others (`explain` needs no extra) work on the base install."""
    parser.epilog = (
        exit_codes_help(
            (ExitCode.USAGE, ExitCode.INTERNAL, ExitCode.UNAVAILABLE),
            {ExitCode.UNAVAILABLE: "also: a subcommand's package is not installed"},
        )
        + "each subcommand's --help lists its own exit codes\n"
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    sub = parser.add_subparsers(
        dest="engine_command", metavar="SUBCOMMAND", required=True, parser_class=OneLineErrorParser
    )
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        try:
            module = importlib.import_module(module_name, __package__)
        except ModuleNotFoundError as error:
            if str(error.name or "").startswith("exactspec"):
                raise  # our own module missing: a packaging bug, not a missing extra
            # every argument taken as it comes (no option is known without the module): the message says what to install
            stub = sub.add_parser(
                name, help=help_text, description=help_text, prefix_chars="\x00", add_help=False
            )
            stub.add_argument("arguments", nargs="*")
            stub.set_defaults(
                _engine_run=lambda args, name=name, error=error: _missing_extra(name, error)
            )
            continue
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(sub_parser)
        sub_parser.set_defaults(_engine_run=module.run)


def run(args: argparse.Namespace) -> int:
    return int(args._engine_run(args))
