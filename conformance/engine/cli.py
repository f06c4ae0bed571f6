"""`exactspec engine SUBCOMMAND`: the engine level's commands, each in the part of the engine folder it belongs to.

* `certify` (`collect.campaign`): collect, teacher-force and certify in rounds until a verdict: the one command;
* `serve` (`serve.command`): start the built-in servers (llama.cpp, vLLM) on 127.0.0.1 and print their URLs;
* `collect` (`collect.command`): one collection step, for files certified later by `exactspec certify-samples`;
* `explain` (`diagnosis.explain`): re-run the diagnosis of a certificate's files offline (torch- and httpx-free).

Each subcommand's module exposes ``add_arguments(parser)`` and ``run(args)``; all three need the `[engine]` extra only.
"""

from __future__ import annotations

import argparse
import importlib

SUBCOMMANDS = {
    "certify": (".collect.campaign", "collect, teacher-force and certify in rounds until a verdict (one command)"),
    "serve": (".serve.command", "start the built-in servers (llama.cpp or vLLM) on 127.0.0.1 and print their URLs"),
    "collect": (".collect.command", "sample completions from a reference and a candidate endpoint into files"),
    "explain": (".diagnosis.explain", "re-run a certificate's diagnosis (where, which mechanism fits) on its files"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One subparser per subcommand, with its module's options."""
    sub = parser.add_subparsers(dest="engine_command", metavar="SUBCOMMAND", required=True)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        module = importlib.import_module(module_name, __package__)
        module.add_arguments(sub_parser)
        sub_parser.set_defaults(_engine_run=module.run)


def run(args: argparse.Namespace) -> int:
    return int(args._engine_run(args))
