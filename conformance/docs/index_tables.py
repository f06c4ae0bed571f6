"""The certificate indexes' tables, rendered from the certificates' own JSON (`catalogue`): one row per
certificate with its verdict, profile, minutes, checks, n, coverage, contract and schema version and flags."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .catalogue import Certificate
from .rerun import expected_minutes, rerun_command
from .texts import markdown_table

STATISTICAL = ("exactness", "standard_rule")


def _link(cert: Certificate, base: str) -> str:
    rel = cert.name[len(base) :].lstrip("/") if base else cert.name
    return f"[{rel}]({rel}/CERTIFICATE.md)"


def versions(cert: Certificate) -> str:
    """Contract and schema version as the certificate was written (a 2.0 document is read in the 2.1 layout)."""
    schema = cert.doc.get("read_from_version") or cert.doc["schema_version"]
    return f"{cert.doc.get('contract_version', '?')} / {schema}"


def commit(cert: Certificate) -> str:
    return (((cert.doc.get("provenance") or {}).get("exactspec") or {}).get("git_commit") or "?")[
        :7
    ]


def flags(cert: Certificate) -> str:
    return "**" + "; ".join(cert.flags) + "**" if cert.flags else "—"


def checks_text(doc: dict) -> str:
    """All checks (failed), then the statistical ones (failed)."""
    checks = doc.get("checks", [])
    stat = [c for c in checks if c.get("category") in STATISTICAL]
    failed = lambda items: sum(1 for c in items if not c.get("passed"))  # noqa: E731
    return f"{len(checks)} ({failed(checks)}); {len(stat)} ({failed(stat)})"


def minutes(cert: Certificate) -> str:
    value = expected_minutes(cert)
    return "—" if value is None else f"{value:.1f}"


def round_level_table(certs: list[Certificate], base: str = "") -> str:
    """Rule- or tree-level certificates: implementation, profile, verdict, checks, minutes, versions, flags."""
    head = [
        "certificate",
        "implementation",
        "profile",
        "verdict",
        "checks (failed); statistical (failed)",
        "minutes",
        "contract / schema",
        "commit",
        "flags",
    ]
    rows = [
        [
            _link(c, base),
            f"`{c.doc['impl']}`",
            c.doc["profile"]["name"],
            f"**{c.doc['verdict']}**",
            checks_text(c.doc),
            minutes(c),
            versions(c),
            commit(c),
            flags(c),
        ]
        for c in certs
    ]
    return markdown_table(head, rows)


def _cases_passed(doc: dict) -> str:
    cases = doc.get("cases", [])
    unsupported = [c["name"] for c in cases if c.get("status") == "unsupported"]
    passed = sum(1 for c in cases if c.get("passed"))
    extra = f" ({', '.join(unsupported)} unsupported)" if unsupported else ""
    return f"{passed}/{len(cases)}{extra}"


def _smallest_p(doc: dict) -> str:
    values = [
        c["p_value"]
        for c in doc.get("checks", [])
        if c.get("category") in STATISTICAL and c.get("p_value") is not None
    ]
    return f"{min(values):.3g}" if values else "—"


def sequence_table(certs: list[Certificate], base: str = "sequence") -> str:
    """Sequence-level certificates: profile, real model, verdict, cases passed, checks, smallest p, minutes."""
    head = [
        "certificate",
        "implementation",
        "profile",
        "real model",
        "verdict",
        "cases passed",
        "checks (failed); statistical (failed)",
        "smallest p",
        "minutes",
        "contract / schema",
        "commit",
        "flags",
    ]
    rows = [
        [
            _link(c, base),
            f"`{c.doc['impl']}`",
            c.doc["profile"]["name"],
            "yes" if c.doc.get("real_model") else "no",
            f"**{c.doc['verdict']}**",
            _cases_passed(c.doc),
            checks_text(c.doc),
            _smallest_p(c.doc),
            minutes(c),
            versions(c),
            commit(c),
            flags(c),
        ]
        for c in certs
    ]
    return markdown_table(head, rows)


def _positions(doc: dict) -> tuple[int, int] | None:
    """The positions the certificate covers (`ruled_out.positions`; contract 1.3 stated them per case)."""
    ruled = (doc.get("engine") or {}).get("ruled_out") or {}
    if ruled.get("positions"):
        return tuple(ruled["positions"])
    ends = [c["positions"] for c in doc.get("cases", []) if isinstance(c.get("positions"), int)]
    return (1, max(ends)) if ends else None


def coverage(doc: dict) -> str:
    """The coverage the certificate states: positions, and the candidate's load (measured, else asked)."""
    span = _positions(doc)
    per_prompt = ((doc.get("engine") or {}).get("ruled_out") or {}).get("per_prompt") or {}
    # T = 0: whole outputs compared
    if any(e.get("route") == "greedy" for e in per_prompt.values()):
        span = (1, int(_max_tokens(doc))) if _max_tokens(doc).isdigit() else span
    text = f"positions {span[0]}..{span[1]}" if span else "positions —"
    laws = {
        m.group(1)
        for e in ((doc.get("engine") or {}).get("ruled_out") or {}).get("per_prompt", {}).values()
        for r in e.get("routes", [])
        for m in [re.search(r"positions (\d+)\.\.m", r.get("quantity", ""))]
        if m
    }
    if span and laws - {"1"}:
        text += f" (law route {min(laws)}..{span[1]})"
    measured = (((doc.get("engine") or {}).get("load") or {}).get("candidate") or {}).get(
        "measured"
    ) or {}
    group = measured.get("loaded") or measured.get("all") or {}
    if group.get("mean_in_flight") is not None:
        return f"{text}; {group['mean_in_flight']:.1f} in flight (measured)"
    design = ((doc.get("engine") or {}).get("design") or {}).get("candidate") or {}
    return (
        f"{text}; {design['concurrency']} in flight (asked)" if design.get("concurrency") else text
    )


def _bounds(doc: dict) -> tuple[str, str]:
    """The largest over the prompts of the best any-shape bound (with its route) and of the monotone bound."""
    per_prompt = ((doc.get("engine") or {}).get("ruled_out") or {}).get("per_prompt") or {}
    if any(e.get("route") == "greedy" for e in per_prompt.values()):
        equal = all(e.get("reached") for e in per_prompt.values() if e.get("route") == "greedy")
        return ("equal outputs" if equal else "nothing (outputs differ)"), "—"
    best = [e.get("best_any_shape") for e in per_prompt.values()]
    if not best or None in best:  # contract 1.3: no any-shape law route; its coupling route is one
        best = [
            min(
                (r for r in e.get("routes", []) if r["route"] == "coupling"),
                key=lambda r: r["bound"],
                default=None,
            )
            for e in per_prompt.values()
        ]
    monotone = [
        r["bound"]
        for e in per_prompt.values()
        for r in e.get("routes", [])
        if r["route"] in ("law_monotone", "law")
    ]
    shape = (
        "—"
        if not best or None in best
        else (lambda worst: f"{worst['bound']:.3g} ({worst['route']})")(
            max(best, key=lambda b: b["bound"])
        )
    )
    return shape, f"{max(monotone):.3g}" if monotone else "—"


def _prompts(doc: dict) -> list[dict]:
    """The cases of single prompts (a pooled run's pooled case left out)."""
    return [c for c in doc.get("cases", []) if not c.get("pooled")]


def _completions(doc: dict) -> str:
    counts: list[int] = [
        c["n_candidate"] for c in _prompts(doc) if c.get("n_candidate") is not None
    ]
    if not counts:
        return "—"
    return "/".join(map(str, counts)) if len(counts) <= 4 else f"{min(counts)}-{max(counts)}"


def _law(cert: Certificate) -> str:
    run = cert.doc.get("certificate_run") or {}
    defaults = (cert.doc.get("engine") or {}).get("request_defaults") or {}
    pick = lambda key: run.get(key, defaults.get(key, "—"))  # noqa: E731
    return f"{pick('temperature')} / {pick('top_k')} / {pick('top_p')}"


def _max_tokens(doc: dict) -> str:
    run = doc.get("certificate_run") or {}
    defaults = (doc.get("engine") or {}).get("request_defaults") or {}
    return str(
        run.get("max_tokens") or defaults.get("max_tokens") or defaults.get("n_predict") or "—"
    )


def engine_table(certs: list[Certificate], base: str = "engine") -> str:
    """Engine-level certificates: law, prompts, n, max tokens, coverage, bounds, checks, verdict, minutes, flags."""
    head = [
        "config",
        "contract / schema",
        "T / top_k / top_p",
        "prompts",
        "completions per prompt",
        "max tokens",
        "coverage",
        "any shape (route)",
        "monotone",
        "checks (failed); statistical (failed)",
        "verdict",
        "minutes",
        "with servers",
        "flags",
    ]
    rows = []
    for c in certs:
        pooled = (c.doc.get("engine") or {}).get("pooled")
        prompts = len(_prompts(c.doc))
        shape, monotone = _bounds(c.doc)
        campaign, run = c.doc.get("campaign") or {}, c.doc.get("certificate_run") or {}
        rows.append(
            [
                _link(c, base),
                versions(c),
                _law(c),
                f"{prompts} pooled" if pooled else str(prompts),
                _completions(c.doc),
                _max_tokens(c.doc),
                coverage(c.doc),
                shape,
                monotone,
                checks_text(c.doc),
                f"**{c.doc['verdict']}**",
                f"{campaign['minutes']:.1f}" if campaign.get("minutes") else "—",
                f"{run['runtime_s'] / 60:.1f}" if run.get("runtime_s") else "—",
                flags(c),
            ]
        )
    return markdown_table(head, rows)


def reasons_list(certs: list[Certificate], base: str = "engine") -> str:
    """Each certificate that is not CERTIFIED, with its first reasons."""
    lines = [
        f"- **{c.name[len(base) :].lstrip('/')}: {c.doc['verdict']}** (contract {c.doc.get('contract_version')}): "
        + "; ".join((c.doc.get("reasons") or [])[:4] or ["see its certificate"])
        for c in certs
        if c.doc["verdict"] != "CERTIFIED"
    ]
    return "\n".join(lines or ["None: every configuration certified."]) + "\n"


def verdict_counts(certs: list[Certificate]) -> str:
    """e.g. "10 CERTIFIED, 2 NOT_EXACT" (most frequent first)."""
    counts: dict[str, int] = {}
    for c in certs:
        counts[c.doc["verdict"]] = counts.get(c.doc["verdict"], 0) + 1
    return ", ".join(
        f"{n} {v}" for v, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    )


def kill_table_rows(repo: Path, names: list[str]) -> str:
    """Each committed kill table's summary: level, profile, mutants rejected, valid variants as expected, minutes."""
    head = [
        "kill table",
        "level",
        "profile",
        "mutants rejected",
        "valid variants as expected",
        "minutes",
    ]
    rows = []
    for name in names:
        summary = json.loads(
            (repo / "docs/certificates/kill-tables" / name / "kill-table.json").read_text()
        )["summary"]
        rows.append(
            [
                f"[{name}](kill-tables/{name}/kill-table.md)",
                summary["level"],
                summary["profile"],
                f"{summary['mutants_rejected']}/{summary['mutants']} {summary['level']}-level mutants",
                f"{summary['valid_variants_as_expected']}/{summary['valid_variants']} {summary['level']}-level "
                "valid variants",
                f"{summary['seconds'] / 60:.1f}",
            ]
        )
    return markdown_table(head, rows)


def flagged_list(certs: list[Certificate]) -> str:
    """The flagged certificates, each with the command that regenerates it and its expected minutes."""
    lines = []
    for c in certs:
        if c.flags:
            expected = expected_minutes(c)
            when = f"~{expected:.0f} min" if expected is not None else "minutes unknown"
            lines.append(f"- `{c.name}` ({'; '.join(c.flags)}; {when}): `{rerun_command(c)}`")
    return "\n".join(lines or ["None."]) + "\n"


def _predicted(doc: dict) -> dict[str, float]:
    """The exact first-token TVs the adapter's note predicts ("Predicted exact TV(first token, p_1) per case: ...")."""
    note = next((n for n in doc.get("notes", []) if "Predicted exact TV(first token" in n), "")
    return {
        m.group(1): float(m.group(2))
        for m in re.finditer(r"([\w.-]+) (\d+\.\d+)", note.split(":", 1)[-1])
    }


def deviation_table(cert: Certificate, cases: tuple[str, ...]) -> str:
    """A lossy rule's first-token deviation per case: predicted (the adapter's note), measured and its mean under
    exactness (`measured_deviations`), and its mean tokens per round against the standard rule's."""
    doc, predicted = cert.doc, _predicted(cert.doc)
    measured = doc.get("measured_deviations") or {}
    rounds = {
        c["case"]: c.get("details") or {}
        for c in doc.get("checks", [])
        if c["check"] == "tokens_per_round"
    }
    rows = []
    for case in cases:
        seen = measured.get(f"{case}/position_1") or {}
        per_round = rounds.get(case, {})
        mean = per_round.get("mean_tokens_observed"), per_round.get("mean_tokens_standard_rule")
        rows.append(
            [
                case,
                f"{predicted[case]:.4f}" if case in predicted else "—",
                f"{seen['observed_tv_binned']:.4f}" if seen else "— (passes)",
                f"{seen['null_mean']:.4f}" if seen.get("null_mean") else "—",
                f"{mean[0]:.3f} vs {mean[1]:.3f}" if None not in mean else "—",
            ]
        )
    return markdown_table(
        [
            "case",
            "predicted TV(first token, p_1)",
            "measured binned TV",
            "its mean under exactness",
            "mean tokens/round vs standard",
        ],
        rows,
    )


__all__ = [
    "coverage",
    "deviation_table",
    "engine_table",
    "flagged_list",
    "kill_table_rows",
    "reasons_list",
    "round_level_table",
    "sequence_table",
    "verdict_counts",
    "versions",
]
