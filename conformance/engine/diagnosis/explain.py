"""`exactspec engine explain CERT_DIR`: the diagnosis (`diagnose`) re-run offline on a certificate's own sample
files, so that a finding can be reproduced from what was committed.

    exactspec engine explain CERT_DIR [--json]

CERT_DIR holds reference.jsonl and candidate.jsonl (each may be gzipped: `.jsonl.gz`), from the run,
certificate.json, and optionally draft.jsonl (the draft's reports, `exactspec engine draft-reports`: the families
that read q are fitted too) (its verdict is printed beside the diagnosis; the diagnosis never changes it). Torch-free.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ....outcomes import ExitCode, exit_codes_help
from ..checks import check_comparable, coverage_positions, prompts
from ..sample_folder import checked_draft, sample_file_in
from ..samples import SampleFile, read_samples
from . import diagnose
from .render import diagnosis_lines

EXIT_CODES = (ExitCode.OK, ExitCode.USAGE, ExitCode.INTERNAL)
EXIT_NOTES = {
    ExitCode.OK: "the diagnosis was printed",
    ExitCode.USAGE: "a file is missing or invalid (one line naming it)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description, parser.epilog = __doc__, exit_codes_help(EXIT_CODES, EXIT_NOTES)
    parser.add_argument(
        "cert_dir",
        metavar="CERT_DIR",
        help="a certificate's folder: reference.jsonl[.gz], "
        "candidate.jsonl[.gz] and certificate.json",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the diagnosis as JSON instead of Markdown"
    )


def explain(folder: Path) -> tuple[dict, dict]:
    """(the diagnosis of the files in `folder`, the certificate it had or {})."""
    if not folder.is_dir():
        raise ValueError(f"CERT_DIR: {folder} is not a folder")
    reference, candidate = (
        read_samples(sample_file_in(folder, role)) for role in ("reference", "candidate")
    )
    check_comparable(reference, candidate)
    draft = read_draft(folder, candidate)
    parts = [part for part in prompts(reference, candidate) if part.ref and part.cand]
    defaults = reference.header.request_defaults
    positions = max((coverage_positions(defaults, part.cand) for part in parts), default=0)
    certificate_path = folder / "certificate.json"
    certificate = json.loads(certificate_path.read_text()) if certificate_path.is_file() else {}
    failed = [check for check in certificate.get("checks", []) if not check.get("passed", True)]
    return diagnose(parts, positions, defaults.get("temperature"), failed, draft), certificate


def read_draft(folder: Path, candidate: SampleFile) -> SampleFile | None:
    """CERT_DIR's draft file (`exactspec engine draft-reports`), or None; ValueError when it is not a draft file of
    the candidate's prompts."""
    try:
        path = sample_file_in(folder, "draft")
    except ValueError:
        return None
    return checked_draft(read_samples(path), candidate)


def run(args: argparse.Namespace) -> int:
    try:
        diagnosis, certificate = explain(Path(args.cert_dir))
    except (ValueError, json.JSONDecodeError) as error:
        print(f"exactspec engine explain: {error}", file=sys.stderr)
        return int(ExitCode.USAGE)
    if args.json:
        print(json.dumps(diagnosis, indent=1, default=float))
        return int(ExitCode.OK)
    verdict = certificate.get("verdict", "no certificate.json")
    print(
        f"# {certificate.get('impl', args.cert_dir)}: {verdict} (the diagnosis below does not change it)\n"
    )
    temperature = certificate.get("engine", {}).get("request_defaults", {}).get("temperature")
    print("\n".join(diagnosis_lines(diagnosis, temperature)))
    return int(ExitCode.OK)


__all__ = ["add_arguments", "explain", "run"]
