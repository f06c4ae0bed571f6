"""`exactspec certify-samples REF.jsonl CAND.jsonl`: certify a serving engine offline from two sample files.

REF.jsonl holds completions from the engine's plain mode (speculation off) and the reference's prefix
probabilities; CAND.jsonl holds completions of the same prompts and seeds with speculation on (schema:
conformance/CONTRACT.md, "Engine level"). Needs numpy/scipy/statsmodels only (no torch, no httpx).
"""

from __future__ import annotations

import argparse
import sys

from ...crash import internal_crash
from ...outcomes import CERTIFICATION_EXIT_CODES, ExitCode, Verdict, exit_codes_help
from ..core.profiles import PROFILE_NAMES
from ..paths import check_writable
from .sample_folder import checked_draft
from .samples import read_samples

EXIT_CODES = CERTIFICATION_EXIT_CODES
EXIT_NOTES = {
    ExitCode.OK: "CERTIFIED: no check failed, speculation was observed, and every prompt (or the pooled set) "
    "reaches the target for deviations of any shape (coupling, or the law route's any-shape bound)",
    ExitCode.NOT_EXACT: "a hard check or a statistical check of the candidate failed",
    ExitCode.USAGE: "an unreadable or invalid sample file (the message names file, line and field), files that do "
    "not match (roles, model, prompts, sampler parameters), --out not writable",
    ExitCode.INCONCLUSIVE: "the files cannot support a certificate, because\n"
    "- the reference's reports are void (its own tokens disagree with them, or decode-time and "
    "teacher-forced reports of one prefix differ beyond the tolerance): the checks that read "
    "them are void, and no coupling route reaches the target;\n"
    "- speculation was never observed (no draft counter moved, none declared);\n"
    "- the input is short: a prompt one side dropped, law checks that could not run (raw "
    "reports under a warping chain, max_tokens 1, no teacher-forced report of the candidate's "
    "prefixes), reference tokens with no teacher-forced report (the paired checks are void), a "
    "check that ran on nothing;\n"
    "- it is short of the target: no route rules out the profile's target (the message says how "
    "many completions would reach it, or that the engine is not seed-coupled and more seeds "
    "cannot)",
    ExitCode.QUALIFIED: "nothing failed, and the monotone law route reaches the target, but no route bounds "
    "deviations of any shape at it (the message says what would: more completions, or prompts "
    "whose continuations repeat)",
}
EXIT_CODES_HELP = exit_codes_help(EXIT_CODES, EXIT_NOTES)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EXIT_CODES_HELP
    parser.add_argument(
        "reference",
        metavar="REF.jsonl",
        help="samples from the reference endpoint (speculation off)",
    )
    parser.add_argument(
        "candidate",
        metavar="CAND.jsonl",
        help="samples from the candidate endpoint (speculation on)",
    )
    parser.add_argument(
        "--profile",
        default="standard",
        choices=list(PROFILE_NAMES),
        help="total false-fail rate and positions compared (default: standard)",
    )
    parser.add_argument(
        "--pooled",
        action="store_true",
        help="certify the prompts together (many prompts, few "
        "completions each): the bound is stated over the prompt set's tokens (default: per prompt)",
    )
    parser.add_argument(
        "--out",
        default="engine-certificate",
        help="directory for certificate.json and CERTIFICATE.md (default: ./engine-certificate)",
    )
    parser.add_argument(
        "--draft",
        metavar="DRAFT.jsonl",
        help="the draft's reports (`exactspec engine draft-reports`):"
        " a NOT_EXACT's diagnosis then fits the mechanisms that read q too (no check reads them)",
    )


def _certify(args: argparse.Namespace) -> int:
    # here, not at the top: `exactspec certify-samples --help` answers without loading numpy, scipy and statsmodels
    from .certificate import write_engine_report
    from .engine_level import certify_samples

    try:
        check_writable(args.out)
        reference, candidate = read_samples(args.reference), read_samples(args.candidate)
        draft = checked_draft(read_samples(args.draft), candidate) if args.draft else None
        result = certify_samples(reference, candidate, args.profile, args.pooled, draft)
    except ValueError as error:
        print(f"exactspec certify-samples: {error}", file=sys.stderr)
        return int(ExitCode.USAGE)
    paths = write_engine_report(result, args.out)
    print(f"exactspec certify-samples: {result.impl}: {result.verdict}")
    for reason in result.reasons:
        print(f"  {reason}")
    print(f"  report: {paths['markdown']} (+ {paths['json']})")
    return int(Verdict(result.verdict).exit_code)


def run(args: argparse.Namespace) -> int:
    """Read, check, report; every outcome is one of the documented exit statuses."""
    try:
        return _certify(args)
    except Exception:  # noqa: BLE001 -- input errors are ValueErrors above; anything else is our bug
        return internal_crash(" ".join(sys.argv))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="exactspec certify-samples", description=__doc__.splitlines()[0]
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
