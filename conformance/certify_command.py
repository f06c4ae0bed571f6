"""`exactspec certify`: run a level's conformance checks in-process (no pytest) and write a certificate.

    exactspec certify --impl MODULE:NAME [--profile quick|standard|full] [--out DIR] [--level auto|rule|sequence|tree]
                      [--workers N | --scheduler tcp://HOST:8786] [--cases A,B | -k SUBSTRINGS]

The level follows what the adapter offers: `generate(...)` -> the sequence level (whole generation loops on
real transformers models), `verify(...)` -> the rule level, `verify_tree(...)` only -> the tree level; `--level`
demands one. A serving engine's sample files are certified by `exactspec certify-samples`. Cases run in this
process, in --workers local processes, or on the Dask cluster at --scheduler: the certificate is the same.
Whatever the implementation raises is a failed case in the certificate, never a crash of the run.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..crash import internal_crash
from ..errors import AdapterLoadError, ImplementationError, ImplUnavailable
from ..outcomes import CERTIFICATION_EXIT_CODES, ExitCode, Verdict, exit_codes_help
from .core.levels import get_level, level_names
from .core.profiles import PROFILE_NAMES, get_profile
from .paths import check_writable

EXIT_CODES = (*CERTIFICATION_EXIT_CODES, ExitCode.UNAVAILABLE)
EXIT_NOTES = {
    ExitCode.NOT_EXACT: "an exception raised by the implementation counts as a failed case",
    ExitCode.USAGE: "--out not writable, the adapter cannot be loaded (import error, no "
    "verify/generate/verify_tree, asked level not offered), an unknown case, an unreachable --scheduler",
    ExitCode.UNAVAILABLE: "the implementation is unavailable here (ImplUnavailable: a missing package, no CUDA "
    "device, ...)",
}
EXIT_CODES_HELP = exit_codes_help(EXIT_CODES, EXIT_NOTES)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EXIT_CODES_HELP
    parser.add_argument(
        "--impl",
        default="exactspec.conformance.adapters.reference:Reference",
        help="MODULE:NAME of the implementation (an object with verify(), generate() or verify_tree(), "
        "or a zero-argument callable returning one), or a builtin sequence adapter name such as "
        "'reference' or 'gpu_impl'; MODULE is imported from sys.path, the current directory "
        "included (default: exactspec's NumPy reference)",
    )
    parser.add_argument(
        "--profile",
        default="standard",
        choices=list(PROFILE_NAMES),
        help="quick (CI), standard (default) or full (certificate grade)",
    )
    parser.add_argument(
        "--out",
        default="conformance-report",
        help="directory for certificate.json, "
        "CERTIFICATE.md and the PNG plots (default: ./conformance-report); created and checked "
        "for writability before the run starts",
    )
    parser.add_argument(
        "--fail-fast", action="store_true", help="stop at the first failing case (serial runs)"
    )
    parser.add_argument(
        "--no-hypothesis",
        action="store_true",
        help="rule level: skip the Hypothesis-generated cases",
    )
    parser.add_argument("--no-progress", action="store_true", help="print no line per case")
    parser.add_argument(
        "--level",
        default="auto",
        choices=["auto", *level_names()],
        help="auto (default): the sequence level if the adapter offers generate(), else the rule "
        "level (verify()), else the tree level (verify_tree()); a level name demands it (the "
        "engine level: exactspec certify-samples)",
    )
    parser.add_argument(
        "--cases",
        default=None,
        metavar="NAMES",
        help="run only these cases (comma-separated names)",
    )
    parser.add_argument(
        "-k",
        dest="case_filter",
        default=None,
        metavar="SUBSTRINGS",
        help="run only the cases whose name contains one of these comma-separated substrings",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        help="local worker processes for the cases (0, the default: one per CPU core; 1: in-process)",
    )
    parser.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run the cases on the Dask cluster whose scheduler is at ADDRESS (tcp://host:8786); "
        "every worker needs the same exactspec installed and the adapter importable",
    )
    parser.add_argument(
        "--real-model",
        action="store_true",
        help="sequence level: also run the cases on the embedded SmolLM2-135M (float32; -k bf16 picks "
        "the bfloat16 ones instead)",
    )


def _names(text: str | None) -> list[str]:
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def select_cases(
    level: Any,
    profile: str,
    impl: Any,
    names: str | None,
    substrings: str | None,
    real_model: bool = False,
) -> list[str] | None:
    """The case names --cases / -k (and --real-model) select at `level` (None: the profile's); ValueError naming
    the option when a name is unknown or nothing matches."""
    prof = get_profile(profile)
    if not names and not substrings and not real_model:
        return None
    every = [c.name for c in level.select_cases(prof, impl)]
    other_dtypes: list[
        str
    ] = []  # real-model cases in another dtype than float32: only when -k or --cases names them
    if real_model:
        from .sequence.cases import REAL_CASES

        profiled = [c for c in REAL_CASES if prof.name != "quick" or c.in_quick]
        every += [c.name for c in profiled if c.dtype == "float32"]
        other_dtypes = [c.name for c in profiled if c.dtype != "float32"]
    chosen = list(every)
    if names:
        wanted = _names(names)
        try:
            known = {c.name for c in level.select_cases(prof, impl, wanted)}
        except ValueError as error:
            raise ValueError(f"--cases: {error}") from None
        chosen = [n for n in wanted if n in known]
    if substrings:
        parts = _names(substrings)
        chosen = [
            n
            for n in (chosen if names else chosen + other_dtypes)
            if any(part in n for part in parts)
        ]
        if not chosen:
            raise ValueError(f"-k {substrings!r} matches no case name of the {level.name} level")
    return chosen


def _progress(args: argparse.Namespace):
    if args.no_progress:
        return None
    return lambda o: print(
        f"  case {o.case}: {o.entry.get('status', 'ok')} "
        f"{'passed' if all(r.passed for r in o.records) else 'FAILED'} ({o.entry.get('seconds')} s)",
        file=sys.stderr,
        flush=True,
    )


def _certify(args: argparse.Namespace) -> int:
    # here, not at the top: `exactspec certify --help` answers without numpy and scipy
    from .api import certify, resolve

    try:
        check_writable(args.out)
        level, obj, _, _ = resolve(args.impl, args.level)
        cases = select_cases(
            get_level(level), args.profile, obj, args.cases, args.case_filter, args.real_model
        )
    except (AdapterLoadError, ValueError) as error:
        print(f"exactspec certify: {error}", file=sys.stderr)
        return ExitCode.USAGE
    workers = args.workers if args.workers and args.workers > 0 else (os.cpu_count() or 1)
    try:
        cert = certify(
            args.impl,
            level,
            args.profile,
            cases=cases,
            workers=1 if args.scheduler else workers,
            scheduler=args.scheduler,
            fail_fast=args.fail_fast,
            hypothesis=not args.no_hypothesis,
            progress=_progress(args),
        )
    except (OSError, TimeoutError) as error:  # the scheduler cannot be reached
        print(f"exactspec certify: --scheduler {args.scheduler}: {error}", file=sys.stderr)
        return ExitCode.USAGE
    # e.g. a worker with another exactspec, numpy or scipy: not one run's certificate
    except ValueError as error:
        print(f"exactspec certify: {error}", file=sys.stderr)
        return ExitCode.USAGE
    paths = cert.write(args.out)
    print(get_level(level).summary(cert.result))
    print(
        f"  report: {paths['markdown']} (+ {paths['json']}{', ' + str(len(paths['plots'])) + ' plots' if paths.get('plots') else ''})"
    )
    return Verdict(cert.verdict).exit_code


def run(args: argparse.Namespace) -> int:
    """Load, run and report; every outcome is one of the documented exit statuses (see EXIT_CODES_HELP)."""
    try:
        return _certify(args)
    except ImplUnavailable as error:
        print(f"exactspec certify: {args.impl} is unavailable here: {error}", file=sys.stderr)
        return ExitCode.UNAVAILABLE
    # should be recorded per case; never let it look like our crash
    except ImplementationError as error:
        print(
            f"exactspec certify: {args.impl} failed outside any recorded case: {error}\n{error.traceback_text}",
            file=sys.stderr,
        )
        return ExitCode.NOT_EXACT
    except Exception:  # noqa: BLE001 -- anything else is a bug in exactspec
        return internal_crash(" ".join(sys.argv))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="exactspec certify", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
