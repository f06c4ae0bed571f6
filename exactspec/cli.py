"""The `exactspec` command: a thin dispatcher to subcommands that live beside the code they run.

Each subcommand is a module exposing ``add_arguments(parser)`` and ``run(args) -> int``. Only the
chosen subcommand's module is imported, so the NumPy-only demo never imports torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "reference-demo": ("exactspec.reference.demo", "print the seed-article figures computed by the exact oracle"),
    "generate": ("exactspec.gpu_impl.cli", "speculative decoding on a real model (default: the embedded SmolLM2-135M)"),
    "certify": ("exactspec.conformance.certify", "certify an implementation of the verification rule and write a report"),
    "proofs": ("exactspec.proofs.checks", "run every machine check of the correctness argument"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="exactspec", description="exactspec: the reference speculative-sampling implementations are measured against.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = argv[0] if argv else None
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            module = importlib.import_module(module_name)
            module.add_arguments(sub_parser)
            sub_parser.set_defaults(_run=module.run)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args._run(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
