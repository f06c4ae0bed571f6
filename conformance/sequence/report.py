"""Certificates: the suite's report as JSON and as Markdown, both produced from the same dict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


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
    if check.get("alpha", 0) == 0:
        return "any violation (hard check)"
    if check.get("detectable_tv") is not None:
        return f"binned TV >= {check['detectable_tv']:.3g}"
    d = check.get("details", {}).get("detectable_kolmogorov")
    return f"Kolmogorov dist. >= {d:.3g}" if d else "-"


def to_markdown(report: dict) -> str:
    b = report["error_budget"]
    env = report["environment"]
    lines = [
        f"# Sequence-level certificate: `{report['impl']}`",
        "",
        f"**Verdict: {report['verdict']}**  (profile `{report['profile']}`, suite v{report['suite_version']}, "
        f"real model: {'yes' if report['real_model'] else 'no'}, {report['seconds']} s)",
        "",
        f"Implementation: {report.get('description') or report['impl']}",
        "",
        *([f"Notes: {report['notes']}", ""] if report.get("notes") else []),
        f"Environment: Python {env['python']}, torch {env['torch']}, transformers {env['transformers']}, "
        f"numpy {env['numpy']}, scipy {env['scipy']}.",
        "",
        "## Error budget",
        "",
        f"- Family-wise false-fail rate of this run (an exact implementation fails with probability at most): "
        f"**{b['total_false_fail']:g}**, split evenly over {b['n_statistical_checks']} statistical checks "
        f"(alpha = {b['per_check_alpha']:.3g} each; alpha actually spent {b['alpha_spent']:.3g}).",
        f"- Each statistical check detects its stated deviation with probability >= {1 - b['beta']:g}; stated "
        f"binned-TV deviations range from {_fmt(b['best_detectable_binned_tv'])} to "
        f"{_fmt(b['worst_detectable_binned_tv'])}; the PIT KS checks detect a Kolmogorov distance >= "
        f"{_fmt(b['worst_detectable_kolmogorov_pit'])}.",
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
        verdict = {"ok": "PASS" if c.get("passed") else "**FAIL**", "unsupported": "unsupported",
                   "error": "**ERROR**"}[c["status"]]
        p = c["params"]
        lines.append(f"| `{c['case']}` | {c['level']} | {_sampling(p)} | {p['k']} | {p['max_new_tokens']} | "
                     f"{c.get('n', '-')} | {ok}/{len(checks)} | {verdict} |")
    lines += ["", "## Checks", "",
              "| case | check | n | alpha | statistic | p-value | detects | result |",
              "|---|---|---|---|---|---|---|---|"]
    for c in report["cases"]:
        for x in c.get("checks", []):
            lines.append(f"| `{c['case']}` | {x['name']} | {x['n']} | {_fmt(x['alpha'])} | {_fmt(x['statistic'], 4)} | "
                         f"{_fmt(x['p_value'])} | {_detectable(x)} | {'pass' if x['passed'] else '**FAIL**'} |")
    bad = [c for c in report["cases"] if c.get("passed") is False]
    if bad:
        lines += ["", "## Evidence for the failures", ""]
        for c in bad:
            lines.append(f"### `{c['case']}` ({c['what']})")
            lines.append("")
            if c["status"] == "error":
                lines += [f"The adapter raised `{c['reason']}`.", "", "```", c.get("traceback", "").strip(), "```", ""]
                continue
            for x in c["checks"]:
                if not x["passed"]:
                    lines.append(f"- {x['message']}")
            for key, ev in c.get("evidence", {}).items():
                if key.startswith("sequence") or key.startswith("position"):
                    tv = ev.get("empirical_tv_to_exact_law", ev.get("empirical_tv_to_exact_marginal"))
                    lines.append(f"- `{key}`: empirical TV to the exact law {tv:.3f}; largest deviations:")
                    for d in ev.get("top_deviations", []):
                        lines.append(f"    - `{d['outcome']}`: observed {d['observed']}, expected {d['expected']}, z = {d['z']}")
                    if ev.get("n_impossible"):
                        lines.append(f"    - {ev['n_impossible']} impossible outputs, e.g. {ev['impossible_outputs'][:3]}")
                elif key.startswith("pit_"):
                    lines.append(f"- `{key}`: KS D = {_fmt(ev['ks_D'])}, PIT decile counts {ev['decile_counts']} "
                                 f"(expected {ev['expected_per_decile']:.1f} each), mean {ev['mean']:.3f} (exact 0.5)")
            lines.append("")
    unsup = [c for c in report["cases"] if c["status"] == "unsupported"]
    if unsup:
        lines += ["", "## Not run (unsupported by the adapter)", ""]
        lines += [f"- `{c['case']}`: {c['reason']}" for c in unsup]
    lines += ["", "---", "Produced by `conformance.sequence` (`python -m conformance.sequence`); "
              "the JSON file beside this one holds every number.", ""]
    return "\n".join(lines)


def write_report(report: dict, out_dir: str | Path, stem: str | None = None) -> tuple[Path, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = stem or f"{report['impl']}-{report['profile']}{'-real' if report['real_model'] else ''}"
    json_path, md_path = out / f"{stem}.json", out / f"{stem}.md"
    json_path.write_text(json.dumps(report, indent=1, sort_keys=False, allow_nan=False) + "\n")
    md_path.write_text(to_markdown(report))
    return json_path, md_path


def render(json_path: str | Path) -> Path:
    """Re-render the Markdown certificate beside a JSON certificate (adds the adapter's notes if missing)."""
    path = Path(json_path)
    report = json.loads(path.read_text())
    if not report.get("notes"):
        try:
            from exactspec.conformance.sequence.adapters import load_adapter

            report["notes"] = getattr(load_adapter(report["impl"]), "notes", "") or ""
        except Exception:  # noqa: BLE001
            report["notes"] = ""
        path.write_text(json.dumps(report, indent=1) + "\n")
    md = path.with_suffix(".md")
    md.write_text(to_markdown(report))
    return md


if __name__ == "__main__":
    import sys

    for arg in sys.argv[1:]:
        print(render(arg))


def write_index(out_dir: str | Path) -> Path:
    """docs index: one line per JSON certificate in `out_dir` (verdict, profile, cases, failures)."""
    out = Path(out_dir)
    lines = ["# Sequence-level certificates", "",
             "Generated by `conformance.sequence.report.write_index` from the JSON certificates in this folder.", "",
             "| implementation | profile | real model | verdict | cases passed | failed cases | report |",
             "|---|---|---|---|---|---|---|"]
    for path in sorted(out.glob("*.json")):
        report = json.loads(path.read_text())
        if "cases" not in report:
            continue
        ok = sum(1 for c in report["cases"] if c.get("passed"))
        lines.append(f"| `{report['impl']}` | {report['profile']} | {'yes' if report['real_model'] else 'no'} | "
                     f"**{report['verdict']}** | {ok}/{len(report['cases'])} | {report['failed_cases'] or '-'} | "
                     f"[{path.with_suffix('.md').name}]({path.with_suffix('.md').name}) |")
    if (out / "mutant-kill-table.md").exists():
        lines += ["", "Mutant kill table: [mutant-kill-table.md](mutant-kill-table.md)."]
    index = out / "README.md"
    index.write_text("\n".join(lines) + "\n")
    return index
