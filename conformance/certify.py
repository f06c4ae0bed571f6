"""`exactspec certify`: run the conformance checks in-process (no pytest) and write a certificate.

    exactspec certify --impl MODULE:NAME [--profile quick|standard|full] [--out DIR] [--level auto|rule|sequence]

The level follows what the adapter offers: `generate(...)` -> the sequence level (whole generation
loops on real transformers models, `conformance.sequence`), `verify(...)` -> the rule level.

Exit status: 0 CERTIFIED, 1 NOT_EXACT or CONTRACT_VIOLATION, 3 EXACT_NOT_STANDARD (exact, but not the
standard rule's acceptance), 4 the implementation is unavailable here (e.g. no CUDA), 2 usage error.
"""

from __future__ import annotations

import argparse
import sys

EXIT = {"CERTIFIED": 0, "NOT_EXACT": 1, "CONTRACT_VIOLATION": 1, "EXACT_NOT_STANDARD": 3}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from exactspec.conformance.profiles import PROFILES

    parser.add_argument("--impl", default="exactspec.conformance.adapters.reference:Reference",
                        help="MODULE:NAME of the implementation (an object with verify(), or a zero-argument "
                             "callable returning one); MODULE is imported from sys.path, the current directory "
                             "included (default: exactspec's NumPy reference)")
    parser.add_argument("--profile", default="standard", choices=sorted(PROFILES),
                        help="quick (CI), standard (default) or full (certificate grade)")
    parser.add_argument("--out", default="conformance-report", help="directory for certificate.json, "
                        "CERTIFICATE.md and the PNG plots (default: ./conformance-report)")
    parser.add_argument("--fail-fast", action="store_true", help="stop at the first failing step")
    parser.add_argument("--no-hypothesis", action="store_true", help="skip the Hypothesis-generated invariant cases")
    parser.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    parser.add_argument("--level", default="auto", choices=["auto", "rule", "sequence"],
                        help="auto (default): the sequence level if the adapter offers generate(), else the rule level")
    parser.add_argument("--real-model", action="store_true",
                        help="sequence level: also run the PIT cases on the embedded SmolLM2-135M")


def run_sequence_level(args: argparse.Namespace) -> int:
    """Certify a generation-level adapter and write its report under --out."""
    from exactspec.conformance.sequence import certify_generation

    report = certify_generation(args.impl, profile=args.profile, out_dir=args.out, real_model=args.real_model,
                                fail_fast=args.fail_fast,
                                progress=None if args.no_progress else (lambda message: print(message, file=sys.stderr)))
    print(f"exactspec certify (sequence level): {args.impl}: {report['verdict']}")
    for path in report.get("files", []):
        print(f"  report: {path}")
    return 0 if report["passed"] else 1


def run(args: argparse.Namespace) -> int:
    from exactspec.conformance.harness import ImplUnavailable, load_impl
    from exactspec.conformance.sequence import offers_generation

    if args.level == "sequence" or (args.level == "auto" and offers_generation(args.impl)):
        return run_sequence_level(args)
    from exactspec.conformance.report import format_summary, write_report
    from exactspec.conformance.runner import run_suite

    try:
        impl = load_impl(args.impl)
    except ImplUnavailable as error:
        print(f"exactspec certify: {args.impl} is unavailable here: {error}", file=sys.stderr)
        return 4
    except ValueError as error:
        print(f"exactspec certify: {error}", file=sys.stderr)
        return 2
    result = run_suite(impl, args.impl, args.profile, progress=not args.no_progress,
                       fail_fast=args.fail_fast, hypothesis=not args.no_hypothesis)
    notes = list(getattr(impl, "certificate_notes", []) or [])
    paths = write_report(result, args.out, extra_notes=notes)
    print(format_summary(result))
    print(f"  report: {paths['markdown']} (+ {paths['json']}, {len(paths['plots'])} plots)")
    return EXIT[result.verdict]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="exactspec certify", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
