"""Rule-level certificate rendering: Markdown (human-readable), PNG plots (observed vs expected
distributions, tokens per round, p-value calibration) and `format_summary`, the text both `exactspec
certify` and `pytest conformance` print at the end. The JSON document and the file layout are the core's
(`exactspec.conformance.core.report`), the same for both levels."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .. import CONTRACT_VERSION
from .cases import Case
from ..core import report as core_report
from ..core.mechanism import markdown_lines
from ..core.records import STATISTICAL_CATEGORIES, VERDICT_TEXT, CheckRecord
from ..core.report import SuiteResult

__all__ = ["VERDICT_TEXT", "format_summary", "to_markdown", "write_report"]


def _fmt(x, spec=".3g"):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return format(x, spec)


def format_summary(result: SuiteResult, max_rows: int = 12) -> str:
    b, rule = result.budget, result.profile.rule
    lines = [
        f"exactspec conformance: {result.impl} [profile {result.profile.name}] -> {result.verdict}",
        f"  {VERDICT_TEXT[result.verdict]}",
        f"  total false-fail rate <= {rule.total_false_fail:g} over {b.get('n_checks', '?')} statistical "
        f"checks ({b.get('per_check_false_fail_rate', float('nan')):.3g} each); per case, a deviation of binned "
        f"TV >= {rule.target_tv:g} is detected w.p. >= {1 - result.profile.false_pass_rate:g}; "
        f"{len(result.records)} checks in {result.seconds:.1f}s",
    ]
    failed, found = result.failed, result.extra.get("findings") or []
    if failed:
        lines.append(
            f"  {len(found)} finding(s) from {len(failed)} failed check(s), grouped by root cause:"
        )
        for f in found[:max_rows]:
            lines.append(
                f"    [{f['kind']}] {', '.join(f['cases'][:4])}: {f['summary'][:200]} "
                f"(checks: {', '.join(f['checks'][:5])}{' ...' if len(f['checks']) > 5 else ''})"
            )
        if len(found) > max_rows:
            lines.append(f"    ... {len(found) - max_rows} more in the report")
    diagnosis = result.extra.get("diagnosis")
    if diagnosis:
        lines.append(f"  diagnosis: {diagnosis['mechanism']['text'][:300]}")
    for reason in result.inconclusive[:max_rows]:
        lines.append(f"  inconclusive: {reason[:300]}")
    reach_info = result.extra.get("adversarial_reach")
    if reach_info:
        lines.append(f"  {reach_info['message'][:300]}")
    lines.append(
        f"  {'case':34s} {'n':>8s} {'bins':>5s} {'detect TV':>9s} {'min p':>9s}  (large-V cases: "
        f"looser target, see CONTRACT.md)"
    )
    by_case: dict[str, list] = {}
    for r in result.records:
        by_case.setdefault(r.case, []).append(r)
    for name, plan in result.plan.items():
        recs = [r for r in by_case.get(name, []) if r.statistical]
        primary = [r for r in recs if r.check == plan["primary"]]
        tv = primary[0].result.detectable_tv if primary else float("nan")
        pmin = min((r.result.p_value for r in recs), default=float("nan"))
        lines.append(
            f"  {name:34s} {plan['n']:8d} {plan['bins']:5d} {_fmt(tv, '9.3g')} {_fmt(pmin, '9.2g')}"
        )
    return "\n".join(lines)


def _plots(result: SuiteResult, out: Path) -> list[str]:
    # matplotlib takes seconds to import: only the report's plots need it
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after use("Agg"): no display needed

    files = []
    by = {(r.case, r.check): r for r in result.records}
    case_names = list(result.plan)
    worst: dict[str, CheckRecord] = {}
    for r in result.records:
        if r.category == "exactness" and r.plot and r.result.n > 0:
            if r.case not in worst or r.result.p_value < worst[r.case].result.p_value:
                worst[r.case] = r
    for check, fname, title in (
        (
            "worst",
            "exactness_observed_vs_expected.png",
            "per case, the exactness check with the smallest p-value: observed vs expected",
        ),
        ("position_1", "first_token.png", "first emitted token: observed vs expected (p_1)"),
        (
            "tokens_per_round",
            "tokens_per_round.png",
            "tokens per round N: observed vs the standard rule's exact law",
        ),
    ):
        if check == "worst":
            by_check = {(c, "worst"): r for c, r in worst.items()}
        else:
            by_check = by
        names = [c for c in case_names if (c, check) in by_check and by_check[(c, check)].plot]
        if not names:
            continue
        cols = 4
        rows = int(math.ceil(len(names) / cols))
        fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.6 * rows), squeeze=False)
        for ax in axes.flat:
            ax.axis("off")
        for ax, name in zip(axes.flat, names):
            rec = by_check[(name, check)]
            ax.axis("on")
            obs, exp = np.asarray(rec.plot["observed"]), np.asarray(rec.plot["expected"])
            idx = np.arange(obs.size)
            ax.bar(idx - 0.2, exp, width=0.4, label="expected", color="#9ecae1")
            ax.bar(
                idx + 0.2,
                obs,
                width=0.4,
                label="observed",
                color="#de2d26" if not rec.passed else "#31a354",
            )
            ax.set_title(
                f"{name[:30]} / {rec.check}\np={rec.result.p_value:.2g} {'PASS' if rec.passed else 'FAIL'}",
                fontsize=8,
            )
            ax.tick_params(labelsize=6)
        axes.flat[0].legend(fontsize=6)
        fig.suptitle(f"{result.impl}: {title} (bins from p only, largest 40)", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / fname, dpi=90)
        plt.close(fig)
        files.append(fname)
    files += _pvalue_plot(result, out, plt)
    return files


def _pvalue_plot(result: SuiteResult, out: Path, plt) -> list[str]:
    """Sorted p-values of the statistical checks against uniform quantiles (calibration under exactness)."""
    pv = np.array(
        [
            r.result.p_value
            for r in result.records
            if r.category in STATISTICAL_CATEGORIES
            and r.result.n > 0
            and r.result.details.get("n_bins", 0) >= 2
        ]
    )
    if pv.size:
        pv = np.sort(np.clip(pv, 1e-20, 1))  # display floor: smaller p-values are drawn at 1e-20
        expected = (np.arange(1, pv.size + 1) - 0.5) / pv.size
        fig, ax = plt.subplots(figsize=(4.5, 4.5))
        ax.loglog(expected, pv, "o", ms=3, label="checks")
        ax.loglog([expected[0], 1], [expected[0], 1], "k--", lw=0.8, label="uniform (exact impl.)")
        rate = result.budget.get("per_check_false_fail_rate")
        if rate:
            ax.axhline(rate, color="r", lw=0.8, label=f"per-check false-fail rate {rate:.2g}")
        ax.set_xlabel("uniform quantile")
        ax.set_ylabel("observed p-value")
        ax.set_title(f"p-value calibration ({pv.size} checks)", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "pvalue_calibration.png", dpi=90)
        plt.close(fig)
        return ["pvalue_calibration.png"]
    return []


def _environment_line(data: dict) -> str:
    prov = data.get("provenance", {})
    libs = prov.get("libraries") or prov.get("environment") or {}
    return ", ".join(f"{k} {v}" for k, v in libs.items() if k != "platform" and v)


def to_markdown(result: SuiteResult, data: dict, plots: list[str]) -> str:
    """The rule-level CERTIFICATE.md, from the result and its JSON document."""
    prof, rule = result.profile, result.profile.rule
    b = result.budget
    md = [
        f"# Conformance certificate: `{result.impl}`",
        "",
        f"**Verdict: {result.verdict}** -- {VERDICT_TEXT[result.verdict]}.",
        "",
        f"Produced by `exactspec certify` (contract {CONTRACT_VERSION}, profile `{prof.name}`) on "
        f"{data['generated']} in {result.seconds:.1f} s. Environment: {_environment_line(data)}.",
        "",
        "## Stated error rates",
        "",
        f"- False-fail: P(any statistical check fails | implementation exact) <= **{rule.total_false_fail:g}** "
        f"(Bonferroni over {b.get('n_checks')} checks, {b.get('per_check_false_fail_rate', 0):.3g} each; "
        f"actually spent {b.get('false_fail_rate_spent', 0):.3g}). Hard checks (contract, invariants) have "
        f"false-fail 0.",
        f"- False-pass: on every case, a deviation of binned total variation >= **{rule.target_tv:g}** in the "
        f"primary law is detected with probability >= {1 - prof.false_pass_rate:g} (large-vocabulary cases: 2.5 x looser, "
        f"they cost O(V) per round); n per case was computed from this target with "
        f"`stat_tests.min_num_samples_chisquare_gof`. Each check's own detectable TV is listed below.",
        "- Seeds are fixed (CRC32 of the case name): the run is deterministic.",
        "",
    ]
    if data.get("measured_deviations"):
        md += [
            "## Measured deviations (failed statistical checks)",
            "",
            "| case/check | observed binned TV | its mean under exactness | p-value |",
            "|---|---|---|---|",
        ]
        for k, v in data["measured_deviations"].items():
            md.append(
                f"| {k} | {_fmt(v['observed_tv_binned'], '.4f')} | {_fmt(v['null_mean'], '.4f')} | "
                f"{_fmt(v['p_value'], '.3g')} |"
            )
        md.append("")
    md += _findings_markdown(result)
    failed = result.failed
    if failed:
        md += ["## Failed checks", ""]
        for r in failed[:40]:
            md.append(f"- **{r.case} / {r.check}** ({r.category}): {r.result.message}")
        md.append("")
    md += [
        "## Cases and sample sizes",
        "",
        "| case | k | V | rounds n | primary check | bins | detectable TV | why |",
        "|---|---|---|---|---|---|---|---|",
    ]
    by = {(r.case, r.check): r for r in result.records}
    for c in data["cases"]:
        plan = result.plan[c["name"]]
        rec = by.get((c["name"], plan["primary"]))
        md.append(
            f"| {c['name']} | {c['k']} | {c['V']} | {plan['n']} | {plan['primary']} | {plan['bins']} | "
            f"{_fmt(rec.result.detectable_tv if rec else None)} | {c['why']} |"
        )
    md += ["", "## Plots", ""]
    for f in plots:
        md.append(f"![{f}]({f})")
    md += [
        "",
        "## Every check",
        "",
        "| case | check | category | n | p-value | false-fail rate | detectable TV | observed TV | result |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result.records:
        t = r.result
        md.append(
            f"| {r.case} | {r.check} | {r.category} | {t.n} | {_fmt(t.p_value)} | {_fmt(t.false_fail_rate)} | "
            f"{_fmt(t.detectable_tv)} | {_fmt(t.details.get('observed_tv_binned'), '.4f')} | "
            f"{'PASS' if t.passed else 'FAIL'} |"
        )
    if result.notes:
        md += ["", "## Notes", ""] + [f"- {n}" for n in result.notes]
    md.append("")
    return "\n".join(md)


def _findings_markdown(result: SuiteResult) -> list[str]:
    """Findings grouped by root cause, what would settle an inconclusive run, and the adversarial RNG's reach."""
    md = []
    found = result.extra.get("findings") or []
    if found:
        md += ["## Findings (grouped by root cause)", ""]
        for f in found:
            md.append(
                f"- **{f['kind']}** on {', '.join(f['cases'])}: {f['summary']} -- checks touched: "
                f"{', '.join(f['checks'])}"
            )
        md.append("")
    diagnosis = result.extra.get("diagnosis")
    if diagnosis:
        md += markdown_lines(diagnosis)
    if result.inconclusive:
        md += ["## Why the run is inconclusive (and what would settle it)", ""]
        md += [f"- {reason}" for reason in result.inconclusive] + [""]
    hashed = [r for r in result.records if r.check == "hashed_position_1"]
    if hashed:
        md += [
            "## Large vocabularies: token-level vs binned detectability",
            "",
            "| case | position_1 detectable binned TV | p mass in pooled p-sorted bins (token-level deviations "
            "there are invisible to it) | hash-bin check: bins, detectable TV | result |",
            "|---|---|---|---|---|",
        ]
        by = {(r.case, r.check): r for r in result.records}
        for r in hashed:
            first = by.get((r.case, "position_1"))
            md.append(
                f"| {r.case} | {_fmt(first.result.detectable_tv if first else None)} | "
                f"{_fmt(r.result.details.get('pooled_mass_p_sorted_bins'))} | {r.result.details.get('hash_bins')}, "
                f"{_fmt(r.result.detectable_tv)} | {'PASS' if r.passed else 'FAIL'} |"
            )
        md.append("")
    reach_info = result.extra.get("adversarial_reach")
    if reach_info:
        md += [
            "## Adversarial RNG reach",
            "",
            f"{reach_info['message']} (reached on {reach_info['cases_reached']} of "
            f"{reach_info['cases']} cases; Generator methods called: {reach_info['generator_methods_called']}).",
            "",
        ]
    return md


def write_report(
    result: SuiteResult,
    out_dir: str | Path,
    cases: list[Case] | None = None,
    extra_notes: list[str] | None = None,
    impl_spec: str | None = None,
) -> dict:
    """certificate.json (the core's versioned document), CERTIFICATE.md and the plots, into `out_dir`."""
    if cases is not None:
        names = {c.name for c in cases}
        result.cases = [c for c in result.cases if c["name"] in names]
    if extra_notes:
        result.notes.extend(extra_notes)
    return core_report.write_report(result, out_dir, to_markdown, _plots, impl_spec)
