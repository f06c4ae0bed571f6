"""The engine level's certificate: the core's writer (`core.report.write_report`, level "engine") with the
engine's Markdown rendering.

The JSON is the core's `document` of the result; the engine's own sections (`engine`: files, engines, design,
model, request defaults, speculation evidence, determinism, what each prompt's certification route rules out;
`reasons`; and, from `exactspec engine certify`, `campaign`: rounds, minutes, concurrency) come from
`SuiteResult.extra`.
"""

from __future__ import annotations

from pathlib import Path

from ..core.report import SuiteResult, write_report
from .diagnosis.plots import diagnosis_plots
from .diagnosis.render import diagnosis_lines
from .result import EngineResult
from .route_text import coverage_text


def _fmt(value, spec: str = ".3g") -> str:
    return "—" if value is None else format(value, spec)


def _route_text(route: dict) -> str:
    """One route's statement: its bound, quantity and evidence."""
    if route["route"] == "coupling":
        where = (
            f"{route['mismatches']} mismatches in {route['seeds']} random seeds, so whole completions differ in "
            f"TV by <= {route['completion_tv']:.3g}"
        )
    elif route["route"] == "law_any":
        where = (
            f"{route['values']} tokens of {route['completions']} completions, {route['covered_share']:.0%} of "
            f"them at prefixes seen often enough for a bound of any shape, the rest counted as TV 1"
        )
    else:
        where = f"{route['values']} tokens of {route['completions']} completions"
    return (
        f"{route['route']}: the {route['quantity']} is <= {route['bound']:.3g} ({where}; probability >= "
        f"{1 - route['false_pass_rate']:g})"
    )


def _route_line(pid: str, entry: dict, target: float) -> list[str]:
    """One prompt's statement: greedy equality, or each route's bound, and which target it reaches."""
    if entry.get("route") == "greedy":
        return [f"- {pid} (temperature 0): {entry['what']}."]
    if not entry.get("routes"):
        return [f"- {pid}: nothing is ruled out (no certification route ran)."]
    reach = (
        "reaches the target for deviations of any shape"
        if entry["any_shape_reached"]
        else "reaches the target for the monotone class only"
        if entry["reached"]
        else "short of the target"
    )
    return [f"- {pid}: {reach} ({target:g}):"] + [f"  - {_route_text(r)}" for r in entry["routes"]]


def _ruled_out_lines(ruled: dict) -> list[str]:
    """What the certificate rules out, per prompt and route."""
    per_prompt = ruled.get("per_prompt") or {}
    if not per_prompt:
        return ["Rules out: nothing (no prompt was compared)."]
    positions = ruled.get("positions") or [1, "?"]
    coverage = coverage_text(f"{positions[0]}..{positions[1]}", "the prompts below")
    return [f"Rules out (coverage: {coverage}):"] + [
        line
        for pid, entry in per_prompt.items()
        for line in _route_line(pid, entry, ruled["target"])
    ]


def _settings_line(engine: dict) -> str:
    """The sampling settings the coverage holds for: the request parameters both ends were asked with."""
    defaults = engine.get("request_defaults") or {}
    shown = ", ".join(
        f"{key} {value}"
        for key, value in sorted(defaults.items())
        if key not in ("n_probs", "seed")
    )
    return f"Sampling settings covered (both ends' request parameters): {shown or 'the engine defaults'}."


def _load_line(engine: dict) -> str:
    """The load the coverage holds for: asked and measured from the requests' own intervals (`load`)."""
    text = (engine.get("load") or {}).get("text")
    return (
        f"Load: {text}"
        if text
        else "Load: not measured (the sample files carry no request intervals)."
    )


def _speculation_line(evidence: dict) -> str:
    if evidence.get("declared"):
        return (
            f"Speculation evidence: declared by the user (the engine shows no draft counters), not measured, over "
            f"{evidence.get('completions')} candidate completions."
        )
    return (
        f"Speculation evidence: drafted {evidence.get('draft_n')} tokens, accepted "
        f"{evidence.get('draft_n_accepted')} (acceptance rate {_fmt(evidence.get('acceptance_rate'))}) over "
        f"{evidence.get('completions')} candidate completions."
    )


def _entropy_line(engine: dict) -> str:
    entropy = {
        pid: h for pid, h in (engine.get("prompt_entropy_nats") or {}).items() if h is not None
    }
    if not entropy:
        return "Prompt entropy: not measured (the reference reported no probabilities)."
    return (
        "Prompt entropy (mean over the reference's reports along its own completions, nats; the unlisted tail "
        "as one outcome, so a lower bound): "
        + ", ".join(f"{pid} {h:.2f}" for pid, h in entropy.items())
        + "."
    )


def _design_line(engine: dict, campaign: dict | None) -> str:
    """How the samples were drawn: the seeds, the candidate's concurrency, and the campaign's time and rounds."""
    design = (engine.get("design") or {}).get("candidate") or {}
    seeds = design.get("seeds") or {}
    seed_text = (
        f"seeds drawn uniformly at random without replacement from [0, {seeds['space'] - 1}] (key "
        f"{seeds.get('key')}), the same at both ends"
        if seeds.get("kind") == "random"
        else "consecutive seeds (the design does not say they were drawn at random: no coupling route)"
    )
    concurrency = design.get("concurrency")
    plural = "" if concurrency == 1 else "s"
    text = (
        f"Design: {seed_text}; candidate sampled {concurrency} request{plural} at a time"
        if concurrency
        else f"Design: {seed_text}"
    )
    if campaign:
        text += (
            f"; collected and certified in {campaign['rounds']} rounds, {campaign['minutes']:.1f} min "
            f"(`exactspec engine certify`)"
        )
    return text + "."


def _detectable(check: dict) -> str:
    details = check.get("details") or {}
    if details.get("ruled_out_tv") is not None:
        return f"TV {_fmt(details['ruled_out_tv'])}"
    if check.get("detectable_tv") is not None:
        return f"TV {_fmt(check['detectable_tv'])}"
    return "—"


def to_markdown(doc: dict) -> str:
    """A short human-readable certificate: verdict, reasons, what is ruled out, evidence, budget, one row per check."""
    engine = doc.get("engine", {})
    evidence = engine.get("speculation_evidence", {})
    budget = doc["budget"]
    lines = [
        f"# exactspec engine certificate: {doc['impl']}",
        "",
        f"**Verdict: {doc['verdict']}** — {doc['verdict_text']}",
        "",
    ]
    if doc.get("reasons"):
        lines += [f"- {reason}" for reason in doc["reasons"]] + [""]
    lines += _ruled_out_lines(engine.get("ruled_out") or {})
    lines += [
        "",
        _settings_line(engine),
        "",
        _load_line(engine),
        "",
        f"Profile: {doc['profile']['promise']}",
        "",
        _design_line(engine, doc.get("campaign")),
        "",
        _speculation_line(evidence),
        "",
        _entropy_line(engine),
        "",
        f"Budget: total false-fail rate {budget['total_false_fail']:g} over {budget['n_checks']} statistical "
        f"checks ({budget['per_check_false_fail_rate']:.3g} each, every one anytime-valid but greedy_spread); "
        f"spent {budget['false_fail_rate_spent']:.3g}.",
        "",
        "| prompt | check | category | n | false_fail_rate | rules out | p | result |",
        "|---|---|---|---|---|---|---|---|",
    ]
    voided = set(doc.get("voided") or [])
    for check in doc["checks"]:
        result = (
            "VOID"
            if f"{check['case']}/{check['check']}" in voided
            else "PASS"
            if check["passed"]
            else "FAIL"
        )
        lines.append(
            f"| {check['case']} | {check['check']} | {check['category']} | {check['n']} | "
            f"{_fmt(check['false_fail_rate'])} | {_detectable(check)} | {_fmt(check['p_value'])} | "
            f"{result} |"
        )
    failed = [c for c in doc["checks"] if not c["passed"]]
    if failed:
        lines += ["", "## Failures", ""] + [f"- {c['case']}: {c['message']}" for c in failed]
    if doc.get("diagnosis"):
        lines += [""] + diagnosis_lines(
            doc["diagnosis"], (engine.get("request_defaults") or {}).get("temperature")
        )
    if doc.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {note}" for note in doc["notes"]]
    return "\n".join(lines) + "\n"


def render_markdown(result: SuiteResult, doc: dict, plot_files: list[str]) -> str:
    """The core writer's Markdown hook: the engine certificate of `doc`, its diagnosis pictures linked at the end."""
    pictures = "".join(f"\n![{name}]({name})\n" for name in plot_files)
    return to_markdown(doc) + pictures


def _plots(result: SuiteResult, out: Path) -> list[str]:
    """The diagnosis's pictures of a NOT_EXACT (`diagnosis.plots`); no other certificate draws any."""
    diagnosis = result.extra.get("diagnosis")
    if not diagnosis:
        return []
    temperature = (result.extra.get("engine", {}).get("request_defaults") or {}).get("temperature")
    return diagnosis_plots(diagnosis, out, temperature)


def write_engine_report(result: EngineResult, out_dir: str | Path) -> dict:
    """Write certificate.json, CERTIFICATE.md and a NOT_EXACT's diagnosis pictures into `out_dir` (the core
    writer); return paths and document."""
    return write_report(result, out_dir, render_markdown, _plots)
