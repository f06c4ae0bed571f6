"""python -m exactspec.conformance.sequence --impl MODULE:NAME|builtin --profile quick|standard|full --out DIR [--real-model]"""

from __future__ import annotations

import argparse
import sys

from ..core.profiles import PROFILE_NAMES
from . import certify_generation
from .adapters import BUILTIN


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exactspec.conformance.sequence", description=__doc__)
    parser.add_argument("--impl", required=True, help=f"MODULE:NAME or one of {sorted(BUILTIN)}")
    parser.add_argument("--profile", default="quick", choices=list(PROFILE_NAMES))
    parser.add_argument("--out", default=None, help="directory for certificate.json + CERTIFICATE.md")
    parser.add_argument("--real-model", action="store_true", help="add the SmolLM2-135M PIT and greedy cases")
    parser.add_argument("--cases", nargs="*", default=None, help="run only these case names")
    parser.add_argument("--workers", type=int, default=1, help="worker processes for the cases (default 1: in-process)")
    args = parser.parse_args(argv)
    report = certify_generation(args.impl, profile=args.profile, out_dir=args.out, real_model=args.real_model,
                                cases=args.cases, workers=args.workers, progress=lambda m: print(m, file=sys.stderr, flush=True))
    print(f"{report['impl']}: {report['verdict']} (profile {report['profile']['name']}, {report['seconds']} s)")
    for c in report["cases"]:
        print(f"  {c['name']:32s} {c['status']:11s} passed={c.get('passed')} n={c.get('n')}")
    for f in report.get("files", []):
        print(f"  wrote {f}")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
