"""The diagnosis as the certificate's Markdown section (`diagnosis_lines`) and as `exactspec engine explain`
prints it: the mechanism, then where (first and peak position, positions, strata, prompts, load), then the worst
recurring prefixes as small tables of the reported law against the candidate's frequencies."""

from __future__ import annotations

from .families import INTERVAL_DROP


def _fit_cell(group: dict) -> str:
    best = group.get("best")
    if not best:
        return "—"
    return (
        f"{best['family']} {best['parameter']} {best['value']:.3g} (+{best['gain_nats']:.3g} nats)"
    )


def _temperature_cell(group: dict, temperature: float | None) -> str:
    fitted = group.get("temperature")
    if not fitted:
        return "—"
    theta = fitted["value"]
    return f"T ~ {temperature / theta:.3g}" if temperature else f"theta {theta:.3g}"


def _breakdown(
    title: str, column: str, entries: list[dict], temperature: float | None
) -> list[str]:
    intro = (
        f"**By {title}** (candidate: tokens, best family and its gain over exact; the reference's own tokens "
        "as a control):"
    )
    lines = [
        "",
        intro,
        "",
        f"| {column} | tokens | best fit | temperature fit | reference: best fit |",
        "|---|---|---|---|---|",
    ]
    for entry in entries:
        cand, ref = entry["candidate"], entry["reference"]
        lines.append(
            f"| {entry[column]} | {cand['tokens']} | {_fit_cell(cand)} | "
            f"{_temperature_cell(cand, temperature)} | {_fit_cell(ref)} |"
        )
    return lines


def _prefix_lines(prefix: dict) -> list[str]:
    intro = (
        f"Prefix {prefix['prefix']} of {prefix['prompt']} (position {prefix['position']}; the candidate "
        f"visited it {prefix['visits']} times, the reference {prefix['reference_visits']}; excess "
        f"{prefix['excess_nats']:.3g} nats):"
    )
    lines = [
        "",
        intro,
        "",
        "| token | reported | candidate | candidate 95 % | reference |",
        "|---|---|---|---|---|",
    ]
    n = prefix["visits"]
    for row in prefix["categories"]:
        low, high = row["candidate_interval"]
        lines.append(
            f"| {row['token']} | {row['reported']:.3f} | {row['candidate'] / n:.3f} ({row['candidate']}) | "
            f"{low:.3f}-{high:.3f} | {row['reference']} |"
        )
    return lines


def diagnosis_lines(diagnosis: dict, temperature: float | None = None) -> list[str]:
    """The certificate's "Diagnosis" section."""
    lines = ["## Diagnosis", "", f"**Mechanism:** {diagnosis['mechanism']['text']}."]
    if not diagnosis.get("tokens"):
        return lines
    where, tail = diagnosis["where"], diagnosis["tail_share"]
    lines += [
        "",
        (
            f"**Where:** the evidence starts at position {where['first'] or '—'} and is densest at position "
            f"{where['peak'] or '—'} (positions whose best fit gains {where['threshold_nats']:.3g} nats or "
            "more, a likelihood ratio of 20 times the fits compared: "
            f"{', '.join(map(str, where['carrying'])) or 'none'}). {diagnosis['tokens']} candidate tokens read "
            f"(positions {diagnosis['positions'][0]}..{diagnosis['positions'][1]}; "
            f"{diagnosis['tail_tokens']} in reports' tails, not fitted: {tail['candidate']:.1%} of the "
            f"candidate's tokens against {tail['reference']:.1%} of the reference's own). The round position "
            "(first drafted, after an acceptance, bonus, after a rejection) is not known to a black-box "
            "reader."
        ),
    ]
    load = diagnosis.get("load")
    if load:
        verdict = (
            "depends on the load" if load["depends"] else "does not depend on the load measurably"
        )
        lines += [
            "",
            (
                f"**Load:** the deviation {verdict}: temperature fit theta {load['serial']['value']:.3g} serial "
                f"({load['serial']['tokens']} tokens) against {load['loaded']['value']:.3g} loaded "
                f"({load['loaded']['tokens']}); fitting them apart gains {load['split_gain_nats']:.3g} nats."
            ),
        ]
    fitted = diagnosis.get("fitted_positions") or []
    lines += [
        "",
        (
            f"**Families** (fitted on positions {', '.join(map(str, fitted))}; interval: the profile "
            "likelihood's, within "
            f"{INTERVAL_DROP:.3g} nats of the best, asymptotic 95 %):"
        ),
        "",
        "| family | parameter | fitted | interval | gain over exact (nats) | reference's own tokens |",
        "|---|---|---|---|---|---|",
    ]
    for fit in diagnosis["fits"]:
        ref = fit["reference"]
        lines.append(
            f"| {fit['family']} | {fit['parameter']} | {fit['value']:.3g} | {fit['interval'][0]:.3g}-"
            f"{fit['interval'][1]:.3g} | {fit['gain_nats']:.3g} | {ref['value']:.3g} "
            f"(+{ref['gain_nats']:.3g}) |"
        )
    lines += _breakdown("position", "position", diagnosis["by_position"], temperature)
    lines += _breakdown("confidence stratum", "stratum", diagnosis["by_stratum"], temperature)
    if len(diagnosis["by_prompt"]) > 1:
        lines += _breakdown("prompt", "prompt", diagnosis["by_prompt"], temperature)
    if diagnosis["prefixes"]:
        lines += [
            "",
            (
                "**Worst recurring prefixes** (the reference's reported law against the candidate's "
                "frequencies):"
            ),
        ]
        for prefix in diagnosis["prefixes"]:
            lines += _prefix_lines(prefix)
    return lines


__all__ = ["diagnosis_lines"]
