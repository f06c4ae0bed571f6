"""Sequence-level certificate rendering: the Markdown of a report document (schema 2.0, level "sequence").

The JSON document and the file layout (certificate.json + CERTIFICATE.md) are the core's
(`exactspec.conformance.core.report`), the same for both levels; only the Markdown differs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core import report as core_report
from ..core.report import SuiteResult, read_certificate


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _sampling(params: dict) -> str:
    parts = [f"T={params['temperature']:g}"]
    if params.get("top_k") is not None:
        parts.append(f"top_k={params['top_k']}")
    if params.get("top_p", 1) < 1:
        parts.append(f"top_p={params['top_p']:g}")
    if params.get("min_p", 0) > 0:
        parts.append(f"min_p={params['min_p']:g}")
    return ", ".join(parts)


def _detectable(check: dict) -> str:
    if check.get("category") in ("contract", "invariant") or check.get("false_fail_rate", 0) == 0:
        return "any violation (hard check)"
    if check.get("detectable_tv") is not None:
        return f"binned TV >= {check['detectable_tv']:.3g}"
    d = check.get("details", {}).get("detectable_kolmogorov")
    return f"Kolmogorov dist. >= {d:.3g}" if d else "-"


def _environment(report: dict) -> str:
    prov = report.get("provenance", {})
    libs = prov.get("libraries") or prov.get("environment") or {}
    return ", ".join(f"{k} {v}" for k, v in libs.items() if k != "platform" and v) or "-"


def _evidence_lines(c: dict) -> list[str]:
    """Markdown of why one case failed: failed checks, largest deviations, PIT deciles, or the traceback."""
    lines = [f"### `{c['case']}` ({c['what']})", ""]
    if c["status"] == "error":
        return lines + [
            f"The run stopped: `{c['reason']}`.",
            "",
            "```",
            c.get("traceback", "").strip(),
            "```",
            "",
        ]
    lines += [f"- {x['message']}" for x in c["checks"] if not x["passed"]]
    for key, ev in c.get("evidence", {}).items():
        if key.startswith("sequence") or key.startswith("position"):
            tv = ev.get("empirical_tv_to_exact_law", ev.get("empirical_tv_to_exact_marginal"))
            lines.append(
                f"- `{key}`: empirical TV to the exact law {_fmt(tv)}; largest deviations:"
            )
            for d in ev.get("top_deviations", []):
                lines.append(
                    f"    - `{d['outcome']}`: observed {d['observed']}, expected {d['expected']}, z = {d['z']}"
                )
            if ev.get("n_impossible"):
                lines.append(
                    f"    - {ev['n_impossible']} impossible outputs, e.g. {ev['impossible_outputs'][:3]}"
                )
        elif key.startswith("pit_"):
            lines.append(
                f"- `{key}`: KS D = {_fmt(ev['ks_D'])}, PIT decile counts {ev['decile_counts']} "
                f"(expected {ev['expected_per_decile']:.1f} each), mean {ev['mean']:.3f} (exact 0.5)"
            )
    return lines + [""]


def to_markdown(report: dict) -> str:
    """CERTIFICATE.md of a sequence-level report document."""
    b = report["budget"]
    notes = report.get("notes") or []
    lines = [
        f"# Sequence-level certificate: `{report['impl']}`",
        "",
        f"**Verdict: {report['verdict']}** -- {report['verdict_text']}  (profile `{report['profile']['name']}`, "
        f"suite v{report.get('suite_version')}, schema {report['schema_version']}, "
        f"real model: {'yes' if report.get('real_model') else 'no'}, {report['seconds']} s)",
        "",
        f"Implementation: {report.get('description') or report['impl']}",
        "",
        *([f"Notes: {' '.join(notes)}", ""] if notes else []),
        f"Environment: {_environment(report)}.",
        "",
        "## Error budget",
        "",
        f"- Family-wise false-fail rate of this run (an exact implementation fails with probability at most): "
        f"**{b['total_false_fail']:g}**, split evenly over {b['n_checks']} statistical checks "
        f"({b['per_check_false_fail_rate']:.3g} each; actually spent {b['false_fail_rate_spent']:.3g}).",
        f"- Each statistical check detects its stated deviation with probability >= {1 - b['false_pass_rate']:g}; stated "
        f"binned-TV deviations range from {_fmt(b['best_detectable_tv'])} to "
        f"{_fmt(b['worst_detectable_tv'])}; the PIT KS checks detect a Kolmogorov distance >= "
        f"{_fmt(b['worst_detectable_kolmogorov'])}.",
        "- Hard checks (structure, zero-probability tokens, greedy equality) have false-fail rate 0.",
        "",
        "## Cases",
        "",
        "| case | level | sampling | k | max new | n | checks passed | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in report["cases"]:
        checks = c.get("checks", [])
        ok = sum(1 for x in checks if x["passed"])
        verdict = {
            "ok": "PASS" if c.get("passed") else "**FAIL**",
            "unsupported": "unsupported",
            "error": "**ERROR**",
        }[c["status"]]
        p = c["params"]
        lines.append(
            f"| `{c['case']}` | {c['level']} | {_sampling(p)} | {p['k']} | {p['max_new_tokens']} | "
            f"{c.get('n', '-')} | {ok}/{len(checks)} | {verdict} |"
        )
    lines += [
        "",
        "## Checks",
        "",
        "| case | check | n | false-fail rate | statistic | p-value | detects | result |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in report["cases"]:
        for x in c.get("checks", []):
            lines.append(
                f"| `{c['case']}` | {x['name']} | {x['n']} | {_fmt(x['false_fail_rate'])} | {_fmt(x['statistic'], 4)} | "
                f"{_fmt(x['p_value'])} | {_detectable(x)} | {'pass' if x['passed'] else '**FAIL**'} |"
            )
    bad = [c for c in report["cases"] if c.get("passed") is False]
    if bad:
        lines += ["", "## Evidence for the failures", ""]
        for c in bad:
            lines += _evidence_lines(c)
    unsup = [c for c in report["cases"] if c["status"] == "unsupported"]
    if unsup:
        lines += ["", "## Not run (unsupported by the adapter)", ""]
        lines += [f"- `{c['case']}`: {c['reason']}" for c in unsup]
    lines += [
        "",
        "---",
        "Produced by `exactspec certify --level sequence` (`exactspec.conformance.certify`); "
        "certificate.json beside this file holds every number.",
        "",
    ]
    return "\n".join(lines)


def write_report(result: SuiteResult, out_dir: str | Path, impl_spec: str | None = None) -> dict:
    """certificate.json (the core's document) and CERTIFICATE.md of a sequence-level result, into `out_dir`."""
    return core_report.write_report(
        result, out_dir, lambda _result, doc, _plots: to_markdown(doc), None, impl_spec
    )


def render(json_path: str | Path) -> Path:
    """Re-render CERTIFICATE.md beside a sequence-level certificate.json."""
    path = Path(json_path)
    md = path.with_name(core_report.MARKDOWN_NAME)
    md.write_text(to_markdown(read_certificate(path)))
    return md


def write_index(out_dir: str | Path) -> Path:
    """docs index: one line per sequence-level certificate (DIR/*/certificate.json) in `out_dir`."""
    out = Path(out_dir)
    lines = [
        "# Sequence-level certificates",
        "",
        "Generated by `conformance.sequence.report.write_index` from the certificates in this folder.",
        "",
        "| implementation | profile | real model | verdict | cases passed | failed cases | report |",
        "|---|---|---|---|---|---|---|",
    ]
    for path in sorted(out.glob(f"*/{core_report.JSON_NAME}")):
        report = read_certificate(path)
        if report.get("level") != "sequence":
            continue
        ok = sum(1 for c in report["cases"] if c.get("passed"))
        link = f"{path.parent.name}/{core_report.MARKDOWN_NAME}"
        lines.append(
            f"| `{report['impl']}` | {report['profile']['name']} | {'yes' if report.get('real_model') else 'no'} | "
            f"**{report['verdict']}** | {ok}/{len(report['cases'])} | {report['failed_cases'] or '-'} | "
            f"[{link}]({link}) |"
        )
    if (out / "mutant-kill-table.md").exists():
        lines += ["", "Mutant kill table: [mutant-kill-table.md](mutant-kill-table.md)."]
    index = out / "README.md"
    index.write_text("\n".join(lines) + "\n")
    return index


if __name__ == "__main__":
    import sys

    for arg in sys.argv[1:]:
        print(render(arg))
