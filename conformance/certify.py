"""`exactspec certify`: run the conformance checks in-process (no pytest) and write a certificate.

    exactspec certify --impl MODULE:NAME [--profile quick|standard|full] [--out DIR] [--level auto|rule|sequence]

The level follows what the adapter offers: `generate(...)` -> the sequence level (whole generation
loops on real transformers models, `conformance.sequence`), `verify(...)` -> the rule level,
`verify_tree(...)` only -> the tree level (`conformance.tree`; `--level tree` asks for it explicitly). Whatever
the implementation raises is a failed case in the certificate, never a crash of the run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ..cli import EXIT_INTERNAL, internal_crash  # noqa: F401 -- EXIT_INTERNAL: part of the exit table below
from ..errors import AdapterLoadError, ImplementationError, ImplUnavailable

EXIT_CERTIFIED = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 4
#: Verdict -> exit status. EXACT_NOT_STANDARD is exact (a pass); the report says it is not the standard rule.
#: INCONCLUSIVE (rule level: it accepts differently from the standard rule and exactness could not be confirmed
#: at the deviation seen) shares 4 with "unavailable", as in `certify-samples`: the run could not decide.
EXIT = {"CERTIFIED": EXIT_CERTIFIED, "EXACT_NOT_STANDARD": EXIT_CERTIFIED, "NOT_EXACT": EXIT_FAILED,
        "CONTRACT_VIOLATION": EXIT_FAILED, "FAILED": EXIT_FAILED, "INCONCLUSIVE": EXIT_UNAVAILABLE}

EXIT_CODES_HELP = """\
exit status:
  0  CERTIFIED, or EXACT_NOT_STANDARD (exact, but not the standard rule's acceptance)
  1  NOT_EXACT or CONTRACT_VIOLATION (an exception raised by the implementation counts as a failed case)
  2  usage error: bad arguments, --out not writable, or the adapter cannot be loaded (import error, no
     verify/generate, asked level not offered)
  3  exactspec itself crashed (an unexpected exception inside exactspec: please report it, with the traceback)
  4  the implementation is unavailable here (ImplUnavailable: missing package, no CUDA device, ...), or
     INCONCLUSIVE (it accepts differently from the standard rule and exactness could not be confirmed at the
     deviation seen: the report says how many rounds would settle it)
"""



def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .profiles import PROFILES

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EXIT_CODES_HELP
    parser.add_argument("--impl", default="exactspec.conformance.adapters.reference:Reference",
                        help="MODULE:NAME of the implementation (an object with verify() or generate(), or a "
                             "zero-argument callable returning one), or a builtin sequence adapter name such as "
                             "'reference' or 'gpu_impl'; MODULE is imported from sys.path, the current directory "
                             "included (default: exactspec's NumPy reference)")
    parser.add_argument("--profile", default="standard", choices=sorted(PROFILES),
                        help="quick (CI), standard (default) or full (certificate grade)")
    parser.add_argument("--out", default="conformance-report", help="directory for certificate.json, "
                        "CERTIFICATE.md and the PNG plots (default: ./conformance-report); created and checked "
                        "for writability before the run starts")
    parser.add_argument("--fail-fast", action="store_true", help="stop at the first failing step")
    parser.add_argument("--no-hypothesis", action="store_true", help="skip the Hypothesis-generated invariant cases")
    parser.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    parser.add_argument("--level", default="auto", choices=["auto", "rule", "sequence", "tree"],
                        help="auto (default): the sequence level if the adapter offers generate(), else the rule "
                             "level if it offers verify(), else the tree level (verify_tree()); rule/sequence/tree "
                             "demand that level (an error if the adapter does not offer it)")
    parser.add_argument("--cases", default=None, metavar="NAMES",
                        help="rule level: run only these cases (comma-separated exact names)")
    parser.add_argument("-k", dest="case_filter", default=None, metavar="SUBSTRINGS",
                        help="rule level: run only the cases whose name contains one of these comma-separated substrings")
    parser.add_argument("--workers", type=int, default=0,
                        help="rule and sequence levels: worker processes for the cases (0, the default: one per CPU core; "
                             "1: in-process)")
    parser.add_argument("--real-model", action="store_true",
                        help="sequence level: also run the PIT cases on the embedded SmolLM2-135M")


def check_writable(out: str | os.PathLike) -> Path:
    """Create `out` and write then delete a probe file in it; ValueError naming --out if that fails."""
    path = Path(out)
    probe = path / ".exactspec-write-probe"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe.write_text("probe\n")
        probe.unlink()
    except OSError as error:
        raise ValueError(f"--out {str(out)!r} is not a writable directory: {error}") from error
    return path


def select_cases(names: str | None, substrings: str | None) -> list | None:
    """The rule-level cases --cases / -k select (None: all); ValueError naming the option if none match."""
    if not names and not substrings:
        return None
    from .cases import SUITE_CASES

    chosen = list(SUITE_CASES)
    if names:
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        unknown = sorted(set(wanted) - {c.name for c in SUITE_CASES})
        if unknown:
            raise ValueError(f"--cases: unknown case names {unknown}; known: {[c.name for c in SUITE_CASES]}")
        chosen = [c for c in chosen if c.name in wanted]
    if substrings:
        parts = [s.strip() for s in substrings.split(",") if s.strip()]
        chosen = [c for c in chosen if any(part in c.name for part in parts)]
        if not chosen:
            raise ValueError(f"-k {substrings!r} matches no case name")
    return chosen


def _sequence_builtins(spec: str) -> dict:
    """The builtin sequence adapters, imported (with torch) only for a spec without ':' that may name one."""
    if ":" in spec:
        return {}
    try:
        from .sequence.adapters import BUILTIN
    except ImportError as error:
        raise ImplUnavailable(f"builtin sequence adapter {spec!r} needs torch and transformers: {error}") from error
    return BUILTIN


def load(args: argparse.Namespace) -> Any:
    """The LoadedAdapter for args.impl at args.level."""
    from .loader import load_adapter

    return load_adapter(args.impl, level=args.level, builtins=_sequence_builtins(args.impl))


def run_sequence_level(args: argparse.Namespace, adapter: Any) -> int:
    """Certify a generation-level adapter and write its report under --out."""
    from .sequence import certify_generation

    workers = args.workers if args.workers and args.workers > 0 else (os.cpu_count() or 1)
    spec = args.impl if isinstance(args.impl, str) else None
    report = certify_generation(spec or adapter, profile=args.profile, out_dir=args.out, real_model=args.real_model,
                                impl_spec=args.impl, fail_fast=args.fail_fast, workers=workers,
                                progress=None if args.no_progress else (lambda message: print(message, file=sys.stderr)))
    print(f"exactspec certify (sequence level): {args.impl}: {report['verdict']}")
    for path in report.get("files", []):
        print(f"  report: {path}")
    return EXIT.get(report["verdict"], EXIT_CERTIFIED if report.get("passed") else EXIT_FAILED)


def run_rule_level(args: argparse.Namespace, impl: Any) -> int:
    """Certify a rule-level adapter and write its report under --out."""
    from .report import format_summary, write_report
    from .runner import run_suite

    cases = getattr(args, "selected_cases", None)
    workers = getattr(args, "workers", 1)
    workers = workers if workers and workers > 0 else (os.cpu_count() or 1)
    spec = args.impl if isinstance(args.impl, str) and ":" in args.impl else None
    result = run_suite(impl, args.impl, args.profile, cases=cases, progress=not args.no_progress,
                       fail_fast=args.fail_fast, hypothesis=not args.no_hypothesis, workers=workers, spec=spec)
    notes = list(getattr(impl, "certificate_notes", []) or [])
    paths = write_report(result, args.out, extra_notes=notes)
    print(format_summary(result))
    print(f"  report: {paths['markdown']} (+ {paths['json']}, {len(paths['plots'])} plots)")
    return EXIT[result.verdict]


def run_tree_level(args: argparse.Namespace, impl: Any) -> int:
    """Certify a tree-level adapter (verify_tree) and write its report under --out."""
    from .tree.report import format_summary, write_tree_report
    from .tree.suite import run_tree_suite

    result = run_tree_suite(impl, args.impl, args.profile, fail_fast=args.fail_fast)
    paths = write_tree_report(result, args.out, impl_spec=args.impl)
    print(format_summary(result))
    print(f"  report: {paths['markdown']} (+ {paths['json']})")
    return EXIT.get(result.verdict, EXIT_FAILED)


def _certify(args: argparse.Namespace) -> int:
    try:
        check_writable(args.out)
        args.selected_cases = select_cases(getattr(args, "cases", None), getattr(args, "case_filter", None))
        loaded = load(args)
    except (AdapterLoadError, ValueError) as error:
        print(f"exactspec certify: {error}", file=sys.stderr)
        return EXIT_USAGE
    if loaded.level == "sequence":
        return run_sequence_level(args, loaded.adapter)
    if loaded.level == "tree":
        return run_tree_level(args, loaded.adapter)
    return run_rule_level(args, loaded.adapter)


def run(args: argparse.Namespace) -> int:
    """Load, run and report; every outcome is one of the documented exit statuses (see EXIT_CODES_HELP)."""
    try:
        return _certify(args)
    except ImplUnavailable as error:
        print(f"exactspec certify: {args.impl} is unavailable here: {error}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except ImplementationError as error:  # should be recorded per case; never let it look like our crash
        print(f"exactspec certify: {args.impl} failed outside any recorded case: {error}\n{error.traceback_text}",
              file=sys.stderr)
        return EXIT_FAILED
    except Exception:  # noqa: BLE001 -- anything else is a bug in exactspec
        return internal_crash(" ".join(sys.argv))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="exactspec certify", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
