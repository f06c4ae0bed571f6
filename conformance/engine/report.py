"""The engine level's certificate: the core's writer (`core.report.write_report`, level "engine") with the
engine's Markdown rendering.

The JSON is the core's `document` of the result; the engine's own sections (`engine`: files, engines,
model, request defaults, speculation evidence, determinism; `reasons`) come from `SuiteResult.extra`.
"""

from __future__ import annotations

from pathlib import Path

from ..core.report import SuiteResult, write_report
from .level import EngineResult


def _fmt(value, spec: str = ".3g") -> str:
    return "—" if value is None else format(value, spec)


def _ruled_out_line(ruled: dict) -> str:
    """One sentence: the deviation this run's PIT detects (the largest over prompts) against the target."""
    if ruled.get("largest") is None:
        greedy = [p for p, v in (ruled.get("per_prompt") or {}).items() if isinstance(v, str)]
        return ("Rules out: any difference in the greedy outputs of the prompts " + ", ".join(greedy) + "."
                if greedy else "Rules out: no per-token deviation is stated (the PIT did not run).")
    return (f"Rules out (w.p. >= {ruled['power']:g} per prompt): a {ruled['metric']} >= {ruled['largest']:.3g} "
            f"(largest over prompts; the profile's target is {ruled['target']:g}), for {ruled['class']}.")


def _entropy_line(engine: dict) -> str:
    entropy = {pid: h for pid, h in (engine.get("prompt_entropy_nats") or {}).items() if h is not None}
    if not entropy:
        return "Prompt entropy: not measured (the reference reported no probabilities)."
    return ("Prompt entropy (mean over the reference's reports along its own completions, nats; the unlisted tail "
            "as one outcome, so a lower bound): " + ", ".join(f"{pid} {h:.2f}" for pid, h in entropy.items()) + ".")


def to_markdown(doc: dict) -> str:
    """A short human-readable certificate: verdict, reasons, evidence, budget, one row per check."""
    engine = doc.get("engine", {})
    evidence = engine.get("speculation_evidence", {})
    budget = doc["budget"]
    lines = [f"# exactspec engine certificate: {doc['impl']}", "",
             f"**Verdict: {doc['verdict']}** — {doc['verdict_text']}", ""]
    lines += [f"- {reason}" for reason in doc.get("reasons", [])]
    lines += ["", _ruled_out_line(engine.get("ruled_out") or {})]
    lines += ["", f"Profile: {doc['profile']['promise']}", "",
              f"Speculation evidence: drafted {evidence.get('draft_n')} tokens, accepted "
              f"{evidence.get('draft_n_accepted')} (acceptance rate {_fmt(evidence.get('acceptance_rate'))}) over "
              f"{evidence.get('completions')} candidate completions.", "", _entropy_line(engine), "",
              f"Budget: total false-fail rate {budget['total_false_fail']:g} over {budget['n_checks']} statistical "
              f"checks ({budget['per_check_false_fail_rate']:.3g} each); spent {budget['false_fail_rate_spent']:.3g}.",
              "", "| prompt | check | category | n | false_fail_rate | detectable | p | result |",
              "|---|---|---|---|---|---|---|---|"]
    for check in doc["checks"]:
        details = check.get("details") or {}
        detectable = (f"TV {_fmt(check['detectable_tv'])}" if check.get("detectable_tv") is not None else
                      f"Kolmogorov {_fmt(details['detectable_kolmogorov'])}" if details.get("detectable_kolmogorov")
                      else f"rate {_fmt(details['detectable_rate'])}" if details.get("detectable_rate") else "—")
        lines.append(f"| {check['case']} | {check['check']} | {check['category']} | {check['n']} | "
                     f"{_fmt(check['false_fail_rate'])} | {detectable} | {_fmt(check['p_value'])} | "
                     f"{'PASS' if check['passed'] else 'FAIL'} |")
    failed = [c for c in doc["checks"] if not c["passed"]]
    if failed:
        lines += ["", "## Failures", ""] + [f"- {c['case']}: {c['message']}" for c in failed]
    if doc.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {note}" for note in doc["notes"]]
    return "\n".join(lines) + "\n"


def render_markdown(result: SuiteResult, doc: dict, plot_files: list[str]) -> str:
    """The core writer's Markdown hook: the engine certificate of `doc` (the engine level draws no plots)."""
    return to_markdown(doc)


def write_engine_report(result: EngineResult, out_dir: str | Path) -> dict:
    """Write certificate.json and CERTIFICATE.md into `out_dir` (the core writer); return paths and document."""
    return write_report(result, out_dir, render_markdown)
