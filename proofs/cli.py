"""`exactspec proofs` and `python -m exactspec.proofs`: run the machine checks of ARGUMENT.md and print
each check, then the claim -> result table; exit status 1 if any check fails."""

from __future__ import annotations

import argparse
from typing import Sequence

from .registry import all_checks, claim_table, run_checks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommand's options: `--only NAME ...` and `--list`."""
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="CHECK",
        choices=list(all_checks()),
        help="run only these checks",
    )
    parser.add_argument(
        "--list", action="store_true", help="list the checks and their claims, run nothing"
    )


def run(args: argparse.Namespace) -> int:
    """List the checks, or run them (all, or `--only` these) and report; 1 if any failed."""
    if getattr(args, "list", False):
        for name, chk in all_checks().items():
            print(f"{name:<34} {','.join(chk.claims):<12} {chk.doc}")
        return 0
    results = run_checks(getattr(args, "only", None))
    for r in results:
        status = "ok  " if r.passed else "FAIL"
        print(f"[{status}] {r.name:<34} {r.seconds:6.2f}s  {r.detail}")
    print()
    print(claim_table(results))
    failed = [r.name for r in results if not r.passed]
    print(
        f"\n{len(results) - len(failed)}/{len(results)} checks passed"
        + (f"; FAILED: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m exactspec.proofs",
        description="Run every machine check of proofs/ARGUMENT.md.",
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))
