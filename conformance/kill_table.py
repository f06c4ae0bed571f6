"""One mutant kill table for every level: run a level's suite on its mutant zoo and its valid variants.

    exactspec kill-table --level rule|sequence|tree|engine [--profile quick] [--out DIR] [--mutants A,B] [--valid C,D]
    python -m exactspec.conformance.kill_table --level ...

Each row (same columns at every level): the mutant or valid variant, the real bug it models, the verdicts
it must get, the verdict it got, the checks that failed, whether a first-token-only test would have missed
it, and the seconds it took; at a level whose NOT_EXACT carries a diagnosis (engine), the mechanism it names.
Writes ``kill-table.json`` and ``kill-table.md`` under ``--out`` (default ``docs/certificates/kill-tables/<level>/``,
or ``<level>-<profile>/`` at a profile other than quick). Exit status 0 when every mutant is rejected and every
row gets an expected verdict, 1 otherwise, 2 on a usage error.

Every run is a full run of the level's suite (no fail-fast), so the failed checks and the first-token-only
column are exact. Each level declares its rows (`Level.mutants`: its zoo's `core.mutants.MutantSpec`s, kind
"mutant" or "valid_variant") and what a first-token-only test would see (`Level.first_token_failure`); the rule
and tree levels import no torch, the sequence and engine levels do.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..outcomes import ExitCode, Verdict
from .core.driver import run_level
from .core.level import Level
from .core.levels import check_level, get_level, level_names
from .core.mutants import MUTANT, REJECTED, VALID_VARIANT, MutantSpec
from .core.profiles import PROFILE_NAMES

JSON_NAME, MARKDOWN_NAME = "kill-table.json", "kill-table.md"


@dataclass(frozen=True)
class Outcome:
    """Level-independent result of one suite run."""

    verdict: str
    failed_checks: list[str]  # unique check names, in the order the suite ran them
    first_failure: str | None  # "case/check: message" of the first failure
    caught_by_first_token: bool  # would a first-token-only test of this level have failed it too?
    # the mechanism a level's diagnosis names (engine level: `engine.diagnosis`)
    diagnosis: str | None = None


def _unique(names: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())


def outcome_of(result: Any, caught_by_first_token: Callable[[Any], bool]) -> Outcome:
    """The outcome of a suite result (`verdict`, `failed` records, `first_failure()`), either level."""
    failed = result.failed
    first = result.first_failure()
    return Outcome(
        verdict=result.verdict,
        failed_checks=_unique([r.check for r in failed]),
        first_failure=None
        if first is None
        else f"{first.case}/{first.check}: {_one_line(first.result.message)[:300]}",
        caught_by_first_token=any(caught_by_first_token(r) for r in failed),
        diagnosis=_diagnosis_of(result),
    )


def _diagnosis_of(result: Any) -> str | None:
    """The mechanism the result's diagnosis names ("none of these" when it names none; "A + B" when a hard check
    names A and the best fit at the listed tokens is B), None without one."""
    diagnosis = (getattr(result, "extra", None) or {}).get("diagnosis")
    if not diagnosis:
        return None
    mechanism = diagnosis["mechanism"]
    also = (mechanism.get("also") or {}).get("family")
    return (mechanism.get("family") or "none of these") + (f" + {also}" if also else "")


def run_subject(level: Level, subject: MutantSpec, profile: str) -> Outcome:
    """The level's suite (every case and check, no fail-fast) on one subject."""
    result = run_level(level, subject.make(), subject.name, profile=profile, fail_fast=False)
    return outcome_of(result, level.first_token_failure)


# --------------------------------------------------------------------------- the table
def select(
    subjects: list[MutantSpec], kind: str, names: Sequence[str] | None, argument: str
) -> list[MutantSpec]:
    """The subjects of `kind`, restricted to `names` (None: all) in zoo order; unknown names are a ValueError."""
    of_kind = [s for s in subjects if s.kind == kind]
    if names is None:
        return of_kind
    known = {s.name for s in of_kind}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"{argument}: unknown {kind} name(s) {unknown}; known: {sorted(known)}")
    return [s for s in of_kind if s.name in set(names)]


def as_expected(subject: MutantSpec, verdict: str) -> bool:
    """A mutant must be rejected (and get one of its verdicts); a valid variant must get one of its verdicts."""
    if subject.kind == MUTANT and verdict == Verdict.CERTIFIED:
        return False
    return verdict in subject.expected or (
        REJECTED in subject.expected and verdict != Verdict.CERTIFIED
    )


def table_row(subject: MutantSpec, outcome: Outcome, seconds: float) -> dict:
    """One row of the table (plain JSON); `missed_by_first_token_only` is None where nothing was caught to miss
    (valid variants, certified mutants)."""
    rejected = outcome.verdict != Verdict.CERTIFIED
    missed = (not outcome.caught_by_first_token) if subject.kind == MUTANT and rejected else None
    return {
        "name": subject.name,
        "kind": subject.kind,
        "models": subject.models,
        "expected": list(subject.expected),
        "verdict": outcome.verdict,
        "as_expected": as_expected(subject, outcome.verdict),
        "failed_checks": outcome.failed_checks,
        "first_failure": outcome.first_failure,
        "missed_by_first_token_only": missed,
        "diagnosis": outcome.diagnosis,
        "seconds": round(seconds, 2),
    }


def summarize(level: str, profile: str, rows: list[dict]) -> dict:
    mutants = [r for r in rows if r["kind"] == MUTANT]
    valid = [r for r in rows if r["kind"] == VALID_VARIANT]
    return {
        "level": level,
        "profile": profile,
        "mutants": len(mutants),
        "mutants_rejected": sum(r["verdict"] != Verdict.CERTIFIED for r in mutants),
        "mutants_as_expected": sum(r["as_expected"] for r in mutants),
        "valid_variants": len(valid),
        "valid_variants_as_expected": sum(r["as_expected"] for r in valid),
        "mutants_missed_by_first_token_only": [
            r["name"] for r in mutants if r["missed_by_first_token_only"]
        ],
        "passed": all(r["as_expected"] for r in rows),
        "seconds": round(sum(r["seconds"] for r in rows), 1),
    }


def choose(
    level: str,
    profile: str,
    mutants: Sequence[str] | None = None,
    valid: Sequence[str] | None = None,
) -> list[MutantSpec]:
    """The subjects a table of `level` at `profile` runs (names `None`: all); bad input is a ValueError."""
    check_level(level)
    if profile not in PROFILE_NAMES:
        raise ValueError(f"profile must be one of {PROFILE_NAMES}, got {profile!r}")
    subjects = get_level(level).mutants(profile)
    return select(subjects, MUTANT, mutants, "mutants") + select(
        subjects, VALID_VARIANT, valid, "valid"
    )


def run_subjects(
    level: str,
    profile: str,
    subjects: list[MutantSpec],
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Run `level`'s suite at `profile` on each subject; return the table (summary + rows)."""
    declared = get_level(level)
    rows = []
    for subject in subjects:
        start = time.perf_counter()
        row = table_row(
            subject, run_subject(declared, subject, profile), time.perf_counter() - start
        )
        rows.append(row)
        if progress:
            progress(
                f"{row['name']:36s} {row['kind']:13s} {row['verdict']:20s} "
                f"{'ok' if row['as_expected'] else 'WRONG'} {row['seconds']:.1f} s"
            )
    return {"summary": summarize(level, profile, rows), "rows": rows}


def kill_table(
    level: str,
    profile: str = "quick",
    mutants: Sequence[str] | None = None,
    valid: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """The kill table of `level` at `profile` over the named mutants and valid variants (`None`: all)."""
    return run_subjects(level, profile, choose(level, profile, mutants, valid), progress)


def _cell(text: Any) -> str:
    return str(text).replace("|", "/").replace("\n", " ")


def _checks_cell(names: list[str], shown: int = 6) -> str:
    more = f" (+{len(names) - shown} more)" if len(names) > shown else ""
    return _cell(", ".join(names[:shown]) + more) if names else "-"


def to_markdown(table: dict) -> str:
    """The table as Markdown: one line per mutant / valid variant, same columns at every level."""
    s = table["summary"]
    # levels that diagnose a NOT_EXACT: one more column
    diagnosed = any(r.get("diagnosis") for r in table["rows"])
    lines = [
        f"# Mutant kill table: {s['level']} level, profile `{s['profile']}`",
        "",
        f"Mutants rejected: **{s['mutants_rejected']}/{s['mutants']}** ({s['mutants_as_expected']} with an "
        f"expected verdict); valid variants with their expected verdict: "
        f"**{s['valid_variants_as_expected']}/{s['valid_variants']}**. "
        f"Missed by a first-token-only test: {', '.join(s['mutants_missed_by_first_token_only']) or 'none'}.",
        "",
        "| mutant | models | expected | verdict | failed checks | missed by first-token-only test | seconds |"
        + (" diagnosis |" if diagnosed else ""),
        "|---|---|---|---|---|---|---|" + ("---|" if diagnosed else ""),
    ]
    for r in table["rows"]:
        missed = {True: "**yes**", False: "no", None: "n/a"}[r["missed_by_first_token_only"]]
        verdict = r["verdict"] if r["as_expected"] else f"**{r['verdict']} (WRONG)**"
        lines.append(
            f"| `{r['name']}` ({r['kind']}) | {_cell(r['models'])} | {' or '.join(r['expected'])} | "
            f"{verdict} | {_checks_cell(r['failed_checks'])} | {missed} | {r['seconds']} |"
            + (f" {r.get('diagnosis') or '-'} |" if diagnosed else "")
        )
    lines += [
        "",
        f"Produced by `exactspec kill-table --level {s['level']} --profile {s['profile']}`.",
        "",
    ]
    return "\n".join(lines)


def write_table(table: dict, out_dir: str | Path) -> tuple[Path, Path]:
    """Write kill-table.json and kill-table.md under `out_dir`; return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / JSON_NAME, out / MARKDOWN_NAME
    json_path.write_text(json.dumps(table, indent=1) + "\n")
    md_path.write_text(to_markdown(table))
    return json_path, md_path


# --------------------------------------------------------------------------- command line
def default_out(level: str, profile: str) -> Path:
    """docs/certificates/kill-tables/<level> at quick, <level>-<profile> at any other profile."""
    return Path("docs/certificates/kill-tables") / (
        level if profile == "quick" else f"{level}-{profile}"
    )


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--level",
        required=True,
        choices=level_names(),
        help="rule (verify adapters), sequence (generate), tree (verify_tree) or engine (served mutants)",
    )
    parser.add_argument(
        "--profile", default="quick", choices=PROFILE_NAMES, help="suite profile (default: quick)"
    )
    parser.add_argument(
        "--out",
        default=None,
        help="directory for kill-table.json and kill-table.md (default: docs/certificates/kill-tables/<level>, "
        "or <level>-<profile> at a profile other than quick)",
    )
    parser.add_argument(
        "--mutants",
        type=_names,
        default=None,
        help="comma-separated mutant names to run (default: all; an empty string: none)",
    )
    parser.add_argument(
        "--valid",
        type=_names,
        default=None,
        help="comma-separated valid-variant names to run (default: all; an empty string: none)",
    )


def run(args: argparse.Namespace) -> int:
    """Build, write and summarize the table; 0 when every row got an expected verdict."""
    try:
        subjects = choose(args.level, args.profile, args.mutants, args.valid)
    except ValueError as error:
        print(f"exactspec kill-table: {error}", file=sys.stderr)
        return ExitCode.USAGE
    table = run_subjects(
        args.level,
        args.profile,
        subjects,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    out = args.out if args.out is not None else default_out(args.level, args.profile)
    json_path, md_path = write_table(table, out)
    print(json.dumps(table["summary"], indent=1))
    print(f"  table: {md_path} (+ {json_path})")
    return 0 if table["summary"]["passed"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="exactspec kill-table", description=__doc__.splitlines()[0]
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
