"""The per-check false-fail table of every level and profile (docs/alpha-table.md and .json).

Each statistical check runs at the per-check rate of its level's budget (`core.budget_for`: the profile's total
false-fail rate split over exactly the checks the registry plans). The rows are derived from the checks' own
plans (`core.registry.CheckPlan`: the test's kind, its null law, the share of the case's n it sees) at the n the
planner gives (`core.planning`), never re-coded here. Per check: the nominal rate, the realised rate and why it
holds, by the test's kind:

* ``lr`` (likelihood ratio, bins pooled as the test pools them, with the test's two-bin fallback -- the mode
  against the rest -- where pooling leaves one bin): <= 3 bins: the p-value is the exact tail, and the realised
  rate at the planned n is computed exactly here (every outcome of a window holding all but < 1e-19 of the mass,
  the rest added whole); more bins: Agrawal's bound (`stat_tests.lr_tail`) is a theorem, so the realised rate is
  <= the nominal one, which is the value the table sums. A point-mass law is a hard check (every sample must hit
  it), and a test no observation reaches does not run: false-fail rate 0;
* ``ks`` (randomized PIT values: the rule level's varying-row cases, the sequence level, tree positions whose
  rows differ by prefix): KS with the exact finite-n law of its statistic (`scipy.stats.kstwo`)
  on continuous PIT values, i.i.d. uniform under exactness: realised = nominal. Their number never depends on the
  tokens: which positions are tested depends on earlier tokens only, and a sequence that stopped (EOS) or a
  position without a report gives a fresh uniform draw instead;
* ``sequential`` (the engine level's law checks): e-processes, each a nonnegative supermartingale under
  exactness; Ville's inequality bounds the chance one ever reaches 1/rate, so the rate holds at every look of a
  run that stops when it likes (proofs/ARGUMENT.md, C15); ``fisher``: Fisher's exact one-sided test;
* ``binomial`` (the acceptance-rate check): an exact two-sided binomial test: realised <= nominal;
* ``permutation`` and ``multinomial``: valid at any n (theorems). Engine level rows are for one sampling prompt
  with every check (n is the sample files'; P prompts divide the per-check rate by P);
* hard checks (contract, invariants, greedy equality, zero-probability tokens): false-fail rate 0, not listed.

Confirmatory tests (rule and tree levels, run only after a standard-rule check failed on a case) take the rate
of that case's standard-rule checks: the run's total stays the stated one.

The `guarantee` column says which: exact, proven bound, or asymptotic only (realised counted at nominal,
unproven). Bins and the n of a position check are those at its expected n (rounds x P(N >= j)); the sum of the
realised column is <= the level's stated total whatever n turns out to be, since every entry is <= its nominal
rate. Usage: ``python -m exactspec.conformance.alpha_table [--out docs] [--levels rule sequence tree engine]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence

import numpy as np
from scipy import special, stats

from ..stat_tests import min_discrepancy_multinomial_lr
from ..stat_tests.gof import gof_bins
from ..stat_tests.lr_tail import _window, lr_tail_bound
from .core.levels import check_level, get_level, level_names
from .core.planning import plan_case
from .core.profiles import PROFILE_NAMES, get_profile
from .core.registry import budget_for, planned_checks

#: Test kinds whose guarantee is stated, not computed: kind -> (how, guarantee).
STATED_KINDS: dict[str, tuple[str, str]] = {
    "ks": ("exact (KS on continuous PIT values, finite-n law)", "exact"),
    "binomial": ("exact two-sided binomial test (<= nominal)", "proven bound"),
    "binomial_upper": (
        "one-sided binomial tail at a dominating rate (events with conditional probability <= the "
        "rate: stochastic domination), valid at any n",
        "proven bound",
    ),
    "permutation": (
        "Hoeffding-Serfling bound at level/2 + sequential Monte-Carlo permutation p-value (Besag & "
        "Clifford 1991) at level/2, Bonferroni; pooled-sample bins; valid at any n under exchangeability",
        "proven bound",
    ),
    "multinomial": (
        "exact multinomial test: enumeration (<= 200k outcomes) or Monte-Carlo p-value (1+e)/(1+B), "
        "valid at any n (failure: INCONCLUSIVE, not NOT_EXACT)",
        "proven bound",
    ),
    "sequential": (
        "e-process (a nonnegative supermartingale under exactness) against 1/rate: Ville's inequality, "
        "valid at every look and under any stopping rule",
        "proven bound",
    ),
    "fisher": (
        "Fisher's exact test, one-sided (conditional on the margins, <= nominal)",
        "proven bound",
    ),
}
#: Guarantee of a row's tail: "exact", "proven bound", "asymptotic only" (unproven at finite n), "hard (0)".
GUARANTEES = ("exact", "proven bound", "asymptotic only", "hard (0)")
#: Largest window of outcomes enumerated for an exact realised rate (else the nominal rate is the bound).
MAX_OUTCOMES = 3_000_000


def _outcomes(bin_prob: np.ndarray, n: int):
    """(counts, probabilities, mass outside) of a window of Multinomial(n, p) outcomes, 2 or 3 bins."""
    lo, hi, out = _window(np.array([n]), np.array([bin_prob[0]]))
    x1 = np.arange(lo[0], hi[0] + 1)
    if bin_prob.size == 2:
        return (
            np.stack([x1, n - x1], 1).astype(float),
            stats.binom.pmf(x1, n, bin_prob[0]),
            float(out[0]),
        )
    r = bin_prob[1] / (bin_prob[1] + bin_prob[2])
    lo2, hi2, out2 = _window(n - x1, np.full(x1.shape, r))
    if x1.size * (int(hi2.max() - lo2.min()) + 1) > MAX_OUTCOMES:
        return None
    a, b = np.meshgrid(x1, np.arange(lo2.min(), hi2.max() + 1), indexing="ij")
    keep = (b >= lo2[:, None]) & (b <= hi2[:, None])
    x = np.stack([a[keep], b[keep], n - a[keep] - b[keep]], 1).astype(float)
    p1 = stats.binom.pmf(x1, n, bin_prob[0])
    logprob = special.gammaln(n + 1.0) - special.gammaln(x + 1.0).sum(axis=1) + x @ np.log(bin_prob)
    return x, np.exp(logprob), float(out[0] + np.sum(p1 * out2))


def exact_realised_rate(bin_prob: np.ndarray, n: int, rate: float) -> float | None:
    """P(p-value < rate) of the likelihood-ratio test on 2 or 3 bins at n samples (outside mass added whole)."""
    if bin_prob.size not in (2, 3):
        return None
    got = _outcomes(np.asarray(bin_prob, float), int(n))
    if got is None:
        return None
    x, prob, outside = got
    g = 2.0 * special.xlogy(x, x / (n * bin_prob)).sum(axis=1)
    order = np.argsort(-g, kind="stable")
    gs = g[order]
    tail = np.cumsum(prob[order])
    last_tie = np.searchsorted(-gs, -gs + 1e-9 * np.maximum(1.0, gs), side="right") - 1
    pval = np.minimum(tail[last_tie] + outside, lr_tail_bound(gs, bin_prob.size))
    return float(prob[order][pval < rate].sum() + outside)


def check_row(
    level: str,
    case: str,
    check: str,
    law: np.ndarray | None,
    n: float | None,
    min_expected: float,
    rate: float,
    false_pass_rate: float,
    kind: str = "lr",
) -> dict:
    """One row: nominal rate, bins, how the realised rate is known, its guarantee, the realised rate, the
    detectable binned TV; `n` None: set by the data (engine level)."""
    row = {
        "level": level,
        "case": case,
        "check": check,
        "n": None if n is None else int(round(n)),
        "nominal": rate,
    }
    if kind != "lr" and kind not in STATED_KINDS:
        raise ValueError(f"kind must be 'lr' or one of {sorted(STATED_KINDS)}, got {kind!r}")
    if kind in STATED_KINDS:
        how, guarantee = STATED_KINDS[kind]
        return {
            **row,
            "bins": None,
            "how": how,
            "guarantee": guarantee,
            "realised": rate,
            "detectable_tv": None,
        }
    law = None if law is None else np.asarray(law, float)
    if law is None or n is None or n < 1:
        return {
            **row,
            "bins": 0,
            "how": "no observation reaches this test: it does not run",
            "guarantee": "hard (0)",
            "realised": 0.0,
            "detectable_tv": None,
        }
    if np.count_nonzero(law) == 1:
        return {
            **row,
            "bins": 1,
            "how": "point-mass law: the hard zero-probability check (every sample must hit it)",
            "guarantee": "hard (0)",
            "realised": 0.0,
            "detectable_tv": None,
        }
    # as the test pools, fallback included
    bins = gof_bins(law / law.sum(), int(round(n)), min_expected, "lr")[1]
    exact = exact_realised_rate(bins, int(round(n)), rate)
    how = (
        "exact tail: no outcome at this n reaches the level (rate 0)"
        if exact == 0.0
        else "exact tail, rate computed exactly"
        if exact is not None
        else "exact tail (<= nominal)"
        if bins.size <= 3
        else "Agrawal bound (<= nominal)"
    )
    guarantee = "exact" if exact is not None or bins.size <= 3 else "proven bound"
    return {
        **row,
        "bins": int(bins.size),
        "how": how,
        "guarantee": guarantee,
        "realised": exact if exact is not None else rate,
        "detectable_tv": min_discrepancy_multinomial_lr(n, bins.size, rate, false_pass_rate),
    }


def level_rows(level_name: str, profile_name: str) -> tuple[list[dict], float]:
    """Rows of every statistical check of `level_name` at `profile_name`, from the checks' own plans."""
    level, prof = get_level(level_name), get_profile(profile_name)
    cases = level.representative_cases(prof)
    rate = budget_for(level, prof, cases).per_check_false_fail_rate
    settings = prof.settings(level_name)
    rows = []
    for case in cases:
        n = plan_case(level, case, prof, rate)["n"]
        for check, _ in planned_checks(level, case):
            for plan in check.plans(case, prof):
                n_test = None if n is None else n * plan.reach
                me = (
                    plan.min_expected
                    if plan.min_expected is not None
                    else (
                        settings.min_expected(int(n_test or 0))
                        if hasattr(settings, "min_expected")
                        else 0.0
                    )
                )
                law = plan.law_for(n_test) if n_test is not None else None
                rows.append(
                    check_row(
                        level_name,
                        case.name,
                        plan.name,
                        law,
                        n_test,
                        me,
                        rate,
                        prof.false_pass_rate,
                        plan.test,
                    )
                )
    return rows, prof.total_false_fail(level_name)


def confirm_share(level_name: str, profile_name: str) -> dict | None:
    """Levels with confirmatory tests (`Level.has_confirmation`: rule, tree): they run after a standard-rule failure on a case, together at
    the rate of that case's standard-rule checks, so for an exact non-standard rule (its standard-rule checks fail
    on every case) the false NOT_EXACT rate is at most the sum over every statistical check: the stated total."""
    level, prof = get_level(level_name), get_profile(profile_name)
    if not level.has_confirmation:
        return None
    cases = level.representative_cases(prof)
    rate = budget_for(level, prof, cases).per_check_false_fail_rate
    standard = sum(
        len(names)
        for case in cases
        for check, names in planned_checks(level, case)
        if check.category == "standard_rule"
    )
    total = sum(len(names) for case in cases for _, names in planned_checks(level, case))
    return {
        "standard_rule_tests": standard,
        "confirmatory_rate_at_most": rate * standard,
        "worst_case_exact_non_standard": rate * total,
        "within_if_confirmed": rate * total <= prof.total_false_fail(level_name) * (1 + 1e-9),
    }


def table(levels: Sequence[str] | None = None, profiles: Sequence[str] = PROFILE_NAMES) -> dict:
    """{level: {profile: {rows, n_checks, total_stated, sum_nominal, sum_realised, within, asymptotic_only}}}
    (`within`: the sums are <= the stated total; `asymptotic_only`: checks whose size is not proven)."""
    doc: dict = {}
    for level in level_names() if levels is None else levels:
        check_level(level)
        for profile in profiles:
            rows, total = level_rows(level, profile)
            s_nom, s_real = sum(r["nominal"] for r in rows), sum(r["realised"] for r in rows)
            entry = {
                "rows": rows,
                "n_checks": len(rows),
                "total_stated": total,
                "sum_nominal": s_nom,
                "sum_realised": s_real,
                "within": s_real <= total * (1 + 1e-9) and s_nom <= total * (1 + 1e-9),
                "asymptotic_only": sum(r["guarantee"] == "asymptotic only" for r in rows),
            }
            confirm = confirm_share(level, profile)
            if confirm is not None:
                entry["confirm"] = confirm
            doc.setdefault(level, {})[profile] = entry
    return doc


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v)


def to_markdown(doc: dict) -> str:
    """The table as Markdown: one summary line per level and profile, then every check."""
    out = [
        "# Per-check false-fail rates (generated by `python -m exactspec.conformance.alpha_table`)",
        "",
        __doc__.split("\n\n", 1)[1].split("Usage:")[0].strip(),
        "",
        "## Summary",
        "",
        "| level | profile | statistical checks | stated total | sum nominal | sum realised | within | "
        "asymptotic-only checks (size unproven) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for level, profs in doc.items():
        for prof, t in profs.items():
            out.append(
                f"| {level} | {prof} | {t['n_checks']} | {t['total_stated']:g} | {t['sum_nominal']:.4g} | "
                f"{t['sum_realised']:.4g} | {'yes' if t['within'] else 'NO'} | {t['asymptotic_only']} |"
            )
    out.append("")
    for level, profs in doc.items():
        for prof, t in profs.items():
            if "confirm" in t:
                c = t["confirm"]
                out.append(
                    f"* {level}/{prof}: confirmatory tests (after a standard-rule failure on a case) take that "
                    f"case's standard-rule share, inside the budget (at most {c['confirmatory_rate_at_most']:.4g} "
                    f"over {c['standard_rule_tests']} standard-rule tests): an exact non-standard rule's false "
                    f"NOT_EXACT rate is <= {c['worst_case_exact_non_standard']:.4g} "
                    f"({'within' if c['within_if_confirmed'] else 'ABOVE'} the stated total)"
                )
    for level, profs in doc.items():
        for prof, t in profs.items():
            out += [
                "",
                f"## {level} level, {prof} profile",
                "",
                "| case | check | n | bins | nominal | realised | guarantee | how | detectable binned TV |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            out += [
                f"| {r['case']} | {r['check']} | {_fmt(r['n'])} | {_fmt(r['bins'])} | {r['nominal']:.3g} | "
                f"{r['realised']:.3g} | {r['guarantee']} | {r['how']} | {_fmt(r['detectable_tv'])} |"
                for r in t["rows"]
            ]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="write the per-check false-fail table (Markdown + JSON)"
    )
    parser.add_argument(
        "--out", default="docs", help="directory for alpha-table.md / alpha-table.json"
    )
    parser.add_argument(
        "--levels", nargs="+", default=list(level_names()), choices=list(level_names())
    )
    args = parser.parse_args(argv)
    doc = table(tuple(args.levels))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "alpha-table.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / "alpha-table.md").write_text(to_markdown(doc))
    for level, profs in doc.items():
        for prof, t in profs.items():
            print(
                f"{level:>8} {prof:>8}: {t['n_checks']} checks, sum realised {t['sum_realised']:.4g} "
                f"<= stated {t['total_stated']:g}: {t['within']}; {t['asymptotic_only']} asymptotic only"
            )
    return 0 if all(t["within"] for p in doc.values() for t in p.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
