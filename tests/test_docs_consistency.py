"""The docs agree with their sources: every generated region is what `exactspec.conformance.docs` renders now, and
the figures typed in prose (claim ranges, versions, exit codes, subcommands, kill-table claims, test-run minutes)
are read against the code, the committed kill tables and benchmarks/results/test_runs.json."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from exactspec.conformance import CONTRACT_VERSION
from exactspec.conformance.core.report import SCHEMA_VERSION
from exactspec.conformance.docs.catalogue import has_history
from exactspec.conformance.docs.pages import PAGE_GLOBS, pages, stale_regions
from exactspec.conformance.docs.regions import fill, regions, unmatched_marks
from exactspec.conformance.engine.route_text import ROUTE_CLAIMS, ROUTE_HOW
from exactspec.outcomes import ExitCode, Verdict

REPO = Path(__file__).resolve().parents[1]
REGENERATE = "run: python -m exactspec.conformance.docs --write"
VERDICT = "|".join(v.value for v in Verdict)


def doc_pages() -> list[Path]:
    """Every Markdown page the docs check reads (relative to the repository)."""
    return sorted({p.relative_to(REPO) for pattern in PAGE_GLOBS for p in REPO.glob(pattern)})


def outside_regions(text: str) -> str:
    """`text` without its generated regions (what a person typed)."""
    return re.sub(
        r"^<!-- generated: ([\w-]+) -->\n.*?^<!-- end generated: \1 -->$",
        "",
        text,
        flags=re.S | re.M,
    )


# --------------------------------------------------------------------------- generated regions
def test_the_region_reader_and_writer():
    text = (
        "a\n<!-- generated: x -->\nold\n<!-- end generated: x -->\nb\n"
        "<!-- generated: y -->\n<!-- end generated: y -->\n"
    )
    assert regions(text) == {"x": ["old\n"], "y": [""]}
    assert fill(text, {"x": "new"}) == text.replace("old", "new")
    assert unmatched_marks(text) == [] and unmatched_marks("<!-- generated: z -->\n") == [
        "<!-- generated: z -->"
    ]


def test_generated_regions_are_current():
    """Every region of every page is what its renderer gives now (the certificate indexes' flags need git's history:
    in a shallow clone or a tarball those regions are not compared)."""
    stale = stale_regions(REPO)
    if not has_history(REPO):
        stale = [(page, name) for page, name in stale if not name.startswith("certificates")]
    assert not stale, f"stale generated regions {stale}: {REGENERATE}"


def test_pages_that_describe_the_engine_routes_hold_the_generated_text():
    """The route descriptions live in one place (`engine.route_text`): the pages that state them hold its region,
    and no page retypes them outside one."""
    holding = {
        str(page) for page in pages(REPO) if "engine-routes" in regions((REPO / page).read_text())
    }
    assert {
        "README.md",
        "docs/engine-level.md",
        "conformance/CONTRACT.md",
        "docs/certificates/engine/README.md",
    } <= holding
    phrases = [how.split(":")[0][:60] for how in ROUTE_HOW.values()]
    for page in doc_pages():
        typed = outside_regions((REPO / page).read_text())
        assert not [p for p in phrases if p in typed], (
            f"{page}: a route described outside the generated region"
        )


# --------------------------------------------------------------------------- figures typed in prose
def _claims() -> list[int]:
    text = (REPO / "proofs/ARGUMENT.md").read_text()
    return [int(n) for n in re.findall(r"^## C(\d+) —", text, flags=re.M)]


def test_claim_ranges_follow_the_argument():
    """Every "claims C1–Cn" written anywhere (docs, docstrings) ends at the argument's last claim, and each route's
    claims exist."""
    claims = _claims()
    assert claims == list(range(1, len(claims) + 1))
    files = [*doc_pages(), *[p.relative_to(REPO) for p in (REPO / "proofs").glob("*.py")]]
    for path in files:
        for end in re.findall(r"\bclaims C1\s*(?:–|-|\.\.)\s*C(\d+)\b", (REPO / path).read_text()):
            assert int(end) == claims[-1], (
                f"{path}: claims C1–C{end}, but proofs/ARGUMENT.md has C1–C{claims[-1]}"
            )
    for route, names in ROUTE_CLAIMS.items():
        assert {int(n[1:]) for n in names} <= set(claims), (
            f"{route} cites a claim the argument lacks: {names}"
        )


def test_versions_follow_the_code():
    """The contract's version in its title, the report schema version and the sample schema version are the code's."""
    from exactspec.conformance.engine.samples import SCHEMA_VERSION as SAMPLES

    contract = (REPO / "conformance/CONTRACT.md").read_text()
    assert re.search(r"^# .*\(version ([\d.]+)\)", contract, re.M).group(1) == CONTRACT_VERSION
    assert re.findall(r'`schema_version` is `"([\d.]+)"`', contract) == [SCHEMA_VERSION]
    assert set(re.findall(r"sample schema version ([\d.]+)", contract)) == {SAMPLES}
    schema = json.loads((REPO / "conformance/report.schema.json").read_text())
    assert schema["properties"]["schema_version"]["const"] == SCHEMA_VERSION


EXIT_PAIRS = (  # (verdict, code) as the docs write them
    re.compile(rf"\b({VERDICT})\**`?\s*\(exit (\d)"),  # CERTIFIED (exit 0)
    re.compile(rf"`({VERDICT})` \((\d):"),  # `CERTIFIED` (0: ...
    re.compile(rf"^\| `({VERDICT})` \|.*\| (\d) \|$", re.M),  # a verdict table with an exit column
)
EXIT_FIRST = (
    re.compile(rf"\bexit(?:s| status)? (\d)[ :]+\**({VERDICT})"),  # exit 0 CERTIFIED
    re.compile(rf"\bexits (\d) for (?:an? |the two )?({VERDICT})"),  # exits 1 for a NOT_EXACT
    re.compile(
        rf"\(exit (?:\d+ [A-Z_]+, )*(?:(\d) ({VERDICT}))"
    ),  # (exit 0 CERTIFIED, 1 NOT_EXACT, ...)
)


def exit_claims(text: str) -> list[tuple[str, int]]:
    """Every (verdict, exit code) pair a text states."""
    found = [(v, int(c)) for pattern in EXIT_PAIRS for v, c in pattern.findall(text)]
    found += [(v, int(c)) for pattern in EXIT_FIRST for c, v in pattern.findall(text)]
    for group in re.findall(r"\(exit ((?:\d [A-Z_]+(?:, )?)+)\)", text):
        found += [(v, int(c)) for c, v in re.findall(rf"(\d) ({VERDICT})", group)]
    return found


def test_the_exit_claim_reader():
    text = "QUALIFIED (exit 5); exits 1 for a NOT_EXACT; (exit 0 CERTIFIED, 1 NOT_EXACT, 4 INCONCLUSIVE)"
    assert set(exit_claims(text)) == {
        ("QUALIFIED", 5),
        ("NOT_EXACT", 1),
        ("CERTIFIED", 0),
        ("INCONCLUSIVE", 4),
    }


def test_exit_codes_in_the_docs_follow_outcomes():
    """Each verdict's exit code, wherever a page states one, is `Verdict.exit_code`; usage errors are 2, crashes 3."""
    for page in doc_pages():
        text = (REPO / page).read_text()
        wrong = [(v, c) for v, c in exit_claims(text) if c != int(Verdict(v).exit_code)]
        assert not wrong, f"{page}: exit codes that are not exactspec.outcomes' {wrong}"
        for code, phrase in re.findall(r"\b(\d) (?:is )?(?:for )?an? (usage|internal|crash)", text):
            expected = ExitCode.USAGE if phrase == "usage" else ExitCode.INTERNAL
            assert int(code) == int(expected), (
                f"{page}: '{code} ... {phrase}' but ExitCode says {int(expected)}"
            )


def _subcommands() -> tuple[set[str], set[str]]:
    from exactspec.cli import SUBCOMMANDS
    from exactspec.conformance.engine.cli import SUBCOMMANDS as ENGINE

    return set(SUBCOMMANDS), set(ENGINE)


COMMAND = re.compile(r"(?:^|`)(?:[\w./-]*/)?exactspec ([a-z][\w-]*)(?: ([a-z][\w-]*))?")


def named_commands(text: str) -> list[tuple[str, str]]:
    """The `exactspec NAME [SUB]` a page names: in inline code, or at the start of a line of a code block."""
    blocks = [
        COMMAND.findall(line.strip())[:1]
        for block in re.findall(r"```.*?```", text, re.S)
        for line in block.splitlines()
    ]
    inline = [
        m
        for line in re.findall(r"`[^`\n]+`", re.sub(r"```.*?```", "", text, flags=re.S))
        for m in COMMAND.findall(line)
    ]
    return inline + [m[0] for m in blocks if m]


def test_the_command_reader():
    text = "exactspec tells you; run `exactspec engine certify --x` or\n```\n.venv/bin/exactspec proofs\n```\n"
    assert named_commands(text) == [("engine", "certify"), ("proofs", "")]


def test_every_exactspec_command_named_in_the_docs_exists():
    """`exactspec NAME` and `exactspec engine NAME`, in inline code or starting a code block's line, are
    subcommands."""
    top, engine = _subcommands()
    for page in doc_pages():
        for first, second in named_commands((REPO / page).read_text()):
            assert first in top, f"{page}: `exactspec {first}` is no subcommand ({sorted(top)})"
            if first == "engine" and second:
                assert second in engine, (
                    f"{page}: `exactspec engine {second}` is no subcommand ({sorted(engine)})"
                )


KILL_CLAIM = re.compile(r"\ball (\d+) (rule|sequence|tree|engine)-level\s+mutants\b")


def test_kill_claims_follow_the_committed_kill_tables():
    """ "Rejects all N <level>-level mutants": the level's committed kill table rejected all N, and its valid variants
    got their expected verdicts."""
    tables = {}
    for path in (REPO / "docs/certificates/kill-tables").glob("*/kill-table.json"):
        summary = json.loads(path.read_text())["summary"]
        assert summary["mutants_rejected"] == summary["mutants"], f"{path}: a mutant escaped"
        assert summary["valid_variants_as_expected"] == summary["valid_variants"], (
            f"{path}: a valid variant failed"
        )
        tables.setdefault(summary["level"], set()).add(summary["mutants"])
    claims = KILL_CLAIM.findall((REPO / "README.md").read_text())
    assert claims, "README.md states no kill-table claim ('all N <level>-level mutants')"
    for n, level in claims:
        assert {int(n)} == tables[level], (
            f"README.md: all {n} {level}-level mutants; the kill tables: {tables[level]}"
        )


def _runs() -> dict:
    return json.loads((REPO / "benchmarks/results/test_runs.json").read_text())


def test_test_run_minutes_follow_their_source():
    """The fresh-clone CI minutes and the fast lane's, where README.md and docs/setup.md state them, are
    benchmarks/results/test_runs.json's (rounded to the minute)."""
    runs = _runs()
    ci = round(runs["ci_fresh_clone"]["seconds"] / 60)
    for page in ("README.md", "docs/setup.md"):
        text = " ".join((REPO / page).read_text().split())
        stated = re.findall(
            r"(\d+(?:\.\d+)?) min (?:from a fresh clone|on the project's 2-core machine \(at)", text
        )
        assert stated and {float(m) for m in stated} == {ci}, (
            f"{page}: CI minutes {stated}, test_runs.json {ci}"
        )
        if "fast_lane" in runs:
            fast = round(runs["fast_lane"]["seconds"] / 60)
            said = re.findall(
                r"(\d+) min(?: \d+ s)? (?:here|on the project's)", text.split("fast lane", 1)[-1]
            )[:1]
            assert said == [str(fast)], f"{page}: fast lane {said} min, test_runs.json {fast}"


@pytest.mark.parametrize("page", ["README.md"])
def test_the_readme_keeps_its_two_set_up_commands(page):
    """The README's two set-up commands (the main job, the tests) are the only bash blocks before "Certify"."""
    text = (REPO / page).read_text().split("## Certify your implementation")[0]
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    assert len(blocks) == 2 and blocks[1].strip().endswith(
        "pytest -n 2 --dist loadfile --exactspec-profile quick"
    )
    ci = (REPO / ".ci" / "run").read_text()
    assert blocks[1].strip() in ci, "the README's test command is what .ci/run runs"
