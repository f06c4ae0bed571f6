"""``python -m exactspec.conformance.docs --write | --check``: rewrite, or check, every generated region of the
README, the docs pages, the contract and the certificate indexes (from a checkout)."""

from __future__ import annotations

import argparse
import sys

from .pages import stale_regions, write_regions
from ..paths import project_root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m exactspec.conformance.docs", description=__doc__
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite every generated region")
    mode.add_argument("--check", action="store_true", help="list the stale regions; exit 1 if any")
    args = parser.parse_args(argv)
    repo = project_root()
    if repo is None:
        print(
            "exactspec.conformance.docs: run it from a checkout (no pyproject.toml beside conformance/)",
            file=sys.stderr,
        )
        return 2
    if args.write:
        for path in write_regions(repo):
            print(f"rewrote {path}")
        return 0
    stale = stale_regions(repo)
    for path, name in stale:
        print(f"stale: {path}: {name}")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
