"""The tree level's certificate: the core's JSON document plus a short Markdown rendering."""

from __future__ import annotations

from pathlib import Path

from ..core.mechanism import markdown_lines
from ..core.records import VERDICT_TEXT
from ..core.report import SuiteResult, write_report


def format_summary(result: SuiteResult) -> str:
    failed = [f"{r.case}/{r.check}" for r in result.records if not r.passed]
    tail = f"; failed: {', '.join(failed[:8])}" if failed else ""
    if result.extra.get("diagnosis"):
        tail += f"; diagnosis: {result.extra['diagnosis']['mechanism']['text'][:200]}"
    return (
        f"exactspec certify (tree level): {result.impl}: {result.verdict} -- {len(result.records)} checks on "
        f"{len(result.cases)} cases, profile {result.profile.name}, {result.seconds:.1f} s{tail}"
    )


def to_markdown(result: SuiteResult, doc: dict, plots: list[str]) -> str:
    lines = [
        f"# Tree-level certificate: `{result.impl}`",
        "",
        f"**Verdict: {result.verdict}** -- {VERDICT_TEXT[result.verdict]}",
        "",
        f"Contract {doc['contract_version']} (tree level), profile `{result.profile.name}`: "
        f"{doc['profile']['promise']}",
        "",
        "| case | nodes | depth | width | V | replacement | rows by | rounds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for case in result.cases:
        n = result.plan.get(case["name"], {}).get("n", "")
        lines.append(
            f"| {case['name']} | {case['nodes']} | {case['depth']} | {case['max_width']} | {case['V']} | "
            f"{case['replacement']} | {case['rows_by']} | {n} |"
        )
    lines += ["", "| case | check | category | passed | p-value | n |", "|---|---|---|---|---|---|"]
    for r in result.records:
        lines.append(
            f"| {r.case} | {r.check} | {r.category} | {'yes' if r.passed else '**NO**'} | "
            f"{r.result.p_value:.3g} | {r.result.n} |"
        )
    failed = [r for r in result.records if not r.passed]
    if failed:
        lines += ["", "## Failures", ""] + [
            f"- `{r.case}/{r.check}`: {r.result.message}" for r in failed
        ]
    if result.extra.get("diagnosis"):
        lines += [""] + markdown_lines(result.extra["diagnosis"])
    return "\n".join(lines) + "\n"


def write_tree_report(
    result: SuiteResult, out_dir: str | Path, impl_spec: str | None = None
) -> dict:
    return write_report(result, out_dir, to_markdown, impl_spec=impl_spec)
