"""The `exactspec` command: a thin dispatcher to subcommands that live beside the code they run.

Each subcommand is a module exposing ``add_arguments(parser)`` and ``run(args) -> int``. Only the
chosen subcommand's module is imported, so the NumPy-only demo never imports torch.

Exit codes mean one thing in every subcommand (`outcomes.ExitCode`, listed by `exactspec --help`): 2 for a usage
error (argparse's own), 3 when exactspec itself crashes (an unexpected exception, reported with a request to file
it); each subcommand's --help lists the codes it returns.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__
from .crash import internal_crash
from .outcomes import ExitCode, exit_codes_help

EXIT_USAGE = int(ExitCode.USAGE)
EXIT_INTERNAL = int(ExitCode.INTERNAL)

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "reference-demo": (
        "exactspec.reference.demo",
        "print the seed-article figures computed by the exact oracle",
    ),
    "generate": (
        "exactspec.gpu_impl.cli.cli",
        "speculative decoding on a real model (default: the embedded SmolLM2-135M)",
    ),
    "train-heads": (
        "exactspec.gpu_impl.heads.train_heads_cli",
        "train the prediction-heads draft (--draft heads) on the target, offline",
    ),
    "certify": (
        "exactspec.conformance.certify_command",
        "certify an implementation (rule, sequence or tree level) and write a report",
    ),
    "certify-samples": (
        "exactspec.conformance.engine.certify_samples",
        "certify a serving engine offline from reference and candidate sample files (JSONL)",
    ),
    "kill-table": (
        "exactspec.conformance.kill_table",
        "run a level's mutant zoo (--level rule|sequence|tree|engine) and write its kill table",
    ),
    "proofs": ("exactspec.proofs.cli", "run every machine check of the correctness argument"),
    "calibrate": (
        "exactspec.conformance.calibrate",
        "run a known-exact implementation R times on salted seeds: each check's rejection rate at 1e-2 / 1e-3",
    ),
    "cache": (
        "exactspec.cache_cli",
        "what exactspec caches on this machine (models, kernel plans, ...): info, clear",
    ),
    "engine": (
        "exactspec.conformance.engine.cli",
        "engine level: `exactspec engine certify` certifies a serving "
        "engine in one command (`serve` starts llama.cpp, its speculative example, vLLM or llama-cpp-python, `collect` samples files)",
    ),
}


def _attach(sub_parser: argparse.ArgumentParser, module_name: str) -> None:
    """Import the chosen subcommand's module and let it add its arguments."""
    module = importlib.import_module(module_name)
    module.add_arguments(sub_parser)
    sub_parser.set_defaults(_run=module.run)


def build_parser(chosen: str | None) -> argparse.ArgumentParser:
    """The top-level parser; only the `chosen` subcommand's module is imported."""
    parser = argparse.ArgumentParser(
        prog="exactspec",
        description="exactspec: the reference speculative-sampling "
        "implementations are measured against.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=exit_codes_help() + "each command's --help lists the codes it returns\n",
    )
    parser.add_argument("--version", action="version", version=f"exactspec {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            _attach(sub_parser, module_name)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    chosen = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    command = " ".join(["exactspec", *argv])
    try:
        parser = build_parser(chosen)
    except ModuleNotFoundError as error:
        missing = str(error.name or "")
        if chosen is None or not (
            missing == SUBCOMMANDS[chosen][0] or not missing.startswith("exactspec")
        ):
            return internal_crash(command)
        what = (
            "is not available in this install"
            if missing.startswith("exactspec")
            else "needs a missing package"
        )
        print(
            f"exactspec {chosen}: {what} ({error}); the torch-backed commands need `pip install exactspec[torch]`",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except Exception:  # noqa: BLE001 -- a subcommand module that fails to import is our own bug
        return internal_crash(command)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args._run(args) or 0)
    except BrokenPipeError:  # the reader went away (`exactspec proofs | head`): not a crash
        sys.stderr.close()
        return 0
    except Exception:  # noqa: BLE001 -- the subcommands record implementation failures; this is our own bug
        return internal_crash(command)


if __name__ == "__main__":
    raise SystemExit(main())
