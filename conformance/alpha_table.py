"""The per-check false-fail table of every level and profile (docs/alpha-table.md and .json).

Each statistical check runs at the per-check rate of its level's budget (`core.budget_for`: the profile's total
false-fail rate split over exactly the checks the registry plans). The table states, per check, that nominal rate,
the realised rate and why it holds:

* likelihood-ratio checks with <= 3 bins: the p-value is the exact tail, and the realised rate at the planned n is
  computed exactly here (every outcome of a window holding all but < 1e-19 of the mass, the rest added whole);
* likelihood-ratio checks with more bins: Agrawal's bound (`stat_tests.lr_tail`) is a theorem, so the realised
  rate is <= the nominal one, which is the value the table sums;
* PIT checks (rule level's varying-row cases, sequence level, tree positions whose rows differ by prefix, the
  engine level): KS with the exact finite-n law of its statistic (`scipy.stats.kstwo`) on continuous PIT
  values, i.i.d. uniform under exactness: realised = nominal. Their number never depends on the tokens: which
  positions are tested depends on earlier tokens only, and a sequence that stopped (EOS) or a position without
  a report gives a fresh uniform draw instead, so every sequence gives a fixed number of values;
* the acceptance-rate check: an exact two-sided binomial test: realised <= nominal;
* hard checks (contract, invariants, greedy equality, zero-probability tokens): false-fail rate 0;
* tree level: the rule level's LR test (`checks.gof_test`), and the PIT's exact KS at a position j >= 2 whose
  emitted prefixes have different target rows (a sum of draws from different rows is not a multinomial);
* engine level (`conformance.engine`, n is the sample files'; rows: one sampling prompt with every check, P
  prompts divide the per-check rate by P): the two-sample permutation tests and the
  reported-probability test are valid at any n (theorems); the PIT is the exact KS on `positions` values per
  candidate completion (padded as above).

The `guarantee` column says which: exact, proven bound, or asymptotic only (realised counted at nominal,
unproven).

Bins and the n of a position check are those at its expected n (rounds x P(N >= j)); the sum of the realised
column is <= the level's stated total whatever n turns out to be, since every entry is <= its nominal rate.
Usage: ``python -m exactspec.conformance.alpha_table [--out docs] [--levels rule sequence tree engine]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy import special, stats

from .core.profiles import PROFILE_NAMES, get_profile
from .core.registry import budget_for, planned_names
from ..stat_tests import min_discrepancy_multinomial_lr
from ..stat_tests.binning import pool_bins
from ..stat_tests.lr_tail import _window, lr_tail_bound

#: Checks whose p-value is exact by construction (realised <= nominal, counted at nominal).
EXACT_BY_CONSTRUCTION = {"ks": "exact (KS on continuous PIT values, finite-n law)",
                         "binomial": "exact two-sided binomial test (<= nominal)"}
#: Guarantee of a row's tail: "exact", "proven bound", "asymptotic only" (unproven at finite n), "hard (0)".
GUARANTEES = ("exact", "proven bound", "asymptotic only", "hard (0)")
#: Further check kinds whose guarantee is stated, not computed: kind -> (how, guarantee) (`alpha_table_levels`).
STATED_KINDS: dict[str, tuple[str, str]] = {"ks": (EXACT_BY_CONSTRUCTION["ks"], "exact"),
                                            "binomial": (EXACT_BY_CONSTRUCTION["binomial"], "proven bound"),
    # the engine level's checks (`engine.two_sample`, `engine.pit`), read from the code:
    "permutation": ("Hoeffding-Serfling bound at level/2 + sequential Monte-Carlo permutation p-value (Besag & "
                    "Clifford 1991) at level/2, Bonferroni; pooled-sample bins; valid at any n under exchangeability",
                    "proven bound"),
    "multinomial": ("exact multinomial test: enumeration (<= 200k outcomes) or Monte-Carlo p-value (1+e)/(1+B), "
                    "valid at any n (failure: INCONCLUSIVE, not NOT_EXACT)", "proven bound"),
    "pit_ks_engine": ("exact KS (kstwo) on `positions` randomized PIT values per candidate completion, a fresh "
                      "uniform where it ended or no prefix was reported: a fixed number of i.i.d. uniforms", "exact")}
#: Enumerated sequence laws by case name (tiny models: deterministic).
_LAWS: dict = {}
#: Largest window of outcomes enumerated for an exact realised rate (else the nominal rate is the bound).
MAX_OUTCOMES = 3_000_000


def _outcomes(bin_prob: np.ndarray, n: int):
    """(counts, probabilities, mass outside) of a window of Multinomial(n, p) outcomes, 2 or 3 bins."""
    lo, hi, out = _window(np.array([n]), np.array([bin_prob[0]]))
    x1 = np.arange(lo[0], hi[0] + 1)
    if bin_prob.size == 2:
        return np.stack([x1, n - x1], 1).astype(float), stats.binom.pmf(x1, n, bin_prob[0]), float(out[0])
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


def check_row(level: str, case: str, check: str, law: np.ndarray | None, n: float | None, min_expected: float,
              rate: float, false_pass_rate: float, kind: str = "lr") -> dict:
    """One row: nominal rate, bins, how the realised rate is known, its guarantee, the realised rate, the
    detectable binned TV; `n` None: set by the data (engine level)."""
    row = {"level": level, "case": case, "check": check, "n": None if n is None else int(round(n)), "nominal": rate}
    if kind != "lr" and kind not in STATED_KINDS:
        raise ValueError(f"kind must be 'lr' or one of {sorted(STATED_KINDS)}, got {kind!r}")
    if kind in STATED_KINDS:
        how, guarantee = STATED_KINDS[kind]
        return {**row, "bins": None, "how": how, "guarantee": guarantee, "realised": rate, "detectable_tv": None}
    bins = 0
    if law is not None and n >= 1:
        bins = pool_bins(np.asarray(law, float), float(n), min_expected)[1]
    if law is None or n < 1 or bins.size < 2:
        return {**row, "bins": int(getattr(bins, "size", 0)), "how": "no statistical test at this n (hard zero check)",
                "guarantee": "hard (0)", "realised": 0.0, "detectable_tv": None}
    exact = exact_realised_rate(bins, int(round(n)), rate)
    how = ("exact tail, rate computed exactly" if exact is not None else
           "exact tail (<= nominal)" if bins.size <= 3 else "Agrawal bound (<= nominal)")
    guarantee = "exact" if exact is not None or bins.size <= 3 else "proven bound"
    return {**row, "bins": int(bins.size), "how": how, "guarantee": guarantee,
            "realised": exact if exact is not None else rate,
            "detectable_tv": min_discrepancy_multinomial_lr(n, bins.size, rate, false_pass_rate)}


def _rule_laws(case, rounds: int, profile) -> dict:
    """check name -> (law or None, expected n, min expected, kind) for every rule-level check kind."""
    from .case_checks import hash_bins

    reach = np.cumsum(case.count_law[::-1])[::-1]  # P(N >= j)
    me = profile.rule.min_expected
    out = {}
    for j in range(1, case.k + 2):
        n_j = rounds * float(reach[j - 1])
        law = None if case.varying else case.target_probs[j - 1]
        out[f"position_{j}"] = (law, n_j, me(int(n_j)), "lr")
        out[f"pit_position_{j}"] = (None, n_j, 0.0, "ks")
    if case.V >= 1024 and not case.varying:  # as case_checks.hashed_position_check
        n_hash = int(max(2, min(profile.rule.max_bins, rounds // max(1.0, 2 * me(rounds)))))
        hashed = np.bincount(hash_bins(case.V, n_hash), weights=case.target_probs[0], minlength=n_hash)
        out["hashed_position_1"] = (hashed, rounds, me(rounds), "lr")
    if case.stream_enumerable:
        out["completed_stream"] = (case.stream_law, rounds, me(rounds), "lr")
    if case.enumerable:
        law = np.append(np.sort(case.tuple_law[1]), 0.0)
        out["tuple_law"] = (law / law.sum(), rounds, me(rounds), "lr")
    count = case.count_law.copy()
    count[count < 1e-12] = 0.0
    out["tokens_per_round"] = (count / count.sum(), rounds, me(rounds), "lr")
    out["acceptance_rate"] = (None, rounds, 0.0, "binomial")
    return out


def rule_rows(profile_name: str, cases=None) -> tuple[list[dict], float]:
    """Rows of every statistical check of the rule level at `profile_name`, and the level's stated total."""
    from .cases import SUITE_CASES
    from .profiles import plan_rounds

    prof = get_profile(profile_name)
    cases = list(cases or SUITE_CASES)
    rate = budget_for("rule", prof, cases).per_check_false_fail_rate
    rows = []
    for case in cases:
        laws = _rule_laws(case, plan_rounds(case, prof, rate)["n"], prof)
        for name in planned_names("rule", case):
            law, n, me, kind = laws[name]
            rows.append(check_row("rule", case.name, name, law, n, me, rate, prof.false_pass_rate, kind))
    return rows, prof.rule.total_false_fail


def sequence_rows(profile_name: str) -> tuple[list[dict], float]:
    """Rows of every statistical check of the sequence level at `profile_name` (default run: no real model)."""
    from .sequence.cases import planned_sequences
    from .sequence.exact_law import sequence_law
    from .sequence.suite import _models, select_cases

    prof = get_profile(profile_name)
    cases = select_cases(prof, False)
    rate = budget_for("sequence", prof, cases).per_check_false_fail_rate
    rows = []
    for case in cases:
        names = planned_names("sequence", case)
        if not names:  # greedy: hard equality only
            continue
        if case.level == "pit":
            n = prof.sequence.pit_sequences
            rows += [check_row("sequence", case.name, nm, None, n * case.max_new_tokens, 0, rate, prof.false_pass_rate, kind="ks")
                     for nm in names]  # padded after an EOS: max_new_tokens PIT values per sequence
            continue
        if case.name not in _LAWS:  # the same laws at every profile
            target, _, prompts = _models(case)
            _LAWS[case.name] = [sequence_law(target, p, case.max_new_tokens, case.sampling) for p in prompts[: case.batch]]
        laws = _LAWS[case.name]
        n = planned_sequences([law.probs for law in laws], prof.sequence, rate, prof.false_pass_rate)
        tags = [""] if case.batch == 1 else [f"_row{b}" for b in range(case.batch)]
        made = {}
        for law, tag in zip(laws, tags):
            made[f"sequence_chisquare{tag}"] = (law.probs_with_impossible(), prof.sequence.min_expected(n))
            made.update({f"position_{t}_chisquare{tag}": (law.position_law(t), 20.0) for t in range(case.max_new_tokens)})
        if set(made) != set(names):
            raise RuntimeError(f"alpha table out of date for {case.name}: registry plans {names}, table has {sorted(made)}")
        rows += [check_row("sequence", case.name, nm, made[nm][0], n, made[nm][1], rate, prof.false_pass_rate) for nm in names]
    return rows, prof.sequence.total_false_fail


LEVEL_NAMES = ("rule", "sequence", "tree", "engine")


def table(levels=LEVEL_NAMES, profiles=PROFILE_NAMES) -> dict:
    """{level: {profile: {rows, n_checks, total_stated, sum_nominal, sum_realised, within, asymptotic_only}}}
    (`within`: the sums are <= the stated total; `asymptotic_only`: checks whose size is not proven)."""
    from .alpha_table_levels import engine_rows, tree_confirm_excess, tree_rows

    makers = {"rule": rule_rows, "sequence": sequence_rows, "tree": tree_rows, "engine": engine_rows}
    extra = {"tree": lambda profile: {"confirm": tree_confirm_excess(profile)}}
    doc: dict = {}
    for level in levels:
        if level not in makers:
            raise ValueError(f"levels must be among {LEVEL_NAMES}, got {level!r}")
        for profile in profiles:
            rows, total = makers[level](profile)
            s_nom, s_real = sum(r["nominal"] for r in rows), sum(r["realised"] for r in rows)
            doc.setdefault(level, {})[profile] = {
                "rows": rows, "n_checks": len(rows), "total_stated": total, "sum_nominal": s_nom,
                "sum_realised": s_real, "within": s_real <= total * (1 + 1e-9) and s_nom <= total * (1 + 1e-9),
                "asymptotic_only": sum(r["guarantee"] == "asymptotic only" for r in rows),
                **extra.get(level, lambda _: {})(profile)}
    return doc


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v)


def to_markdown(doc: dict) -> str:
    """The table as Markdown: one summary line per level and profile, then every check."""
    out = ["# Per-check false-fail rates (generated by `python -m exactspec.conformance.alpha_table`)", "",
           __doc__.split("\n\n", 1)[1].split("Usage:")[0].strip(), "", "## Summary", "",
           "| level | profile | statistical checks | stated total | sum nominal | sum realised | within | "
           "asymptotic-only checks (size unproven) |", "|---|---|---|---|---|---|---|---|"]
    for level, profs in doc.items():
        for prof, t in profs.items():
            out.append(f"| {level} | {prof} | {t['n_checks']} | {t['total_stated']:g} | {t['sum_nominal']:.4g} | "
                       f"{t['sum_realised']:.4g} | {'yes' if t['within'] else 'NO'} | {t['asymptotic_only']} |")
    out.append("")
    for level, profs in doc.items():
        for prof, t in profs.items():
            if "confirm" in t:
                c = t["confirm"]
                out.append(f"* {level}/{prof}: confirmatory reruns (after a standard-rule failure) add "
                           f"{c['confirmatory_tests']} exactness tests at the per-check rate, outside the budget: an "
                           f"exact non-standard rule's false NOT_EXACT rate is <= {c['worst_case_exact_non_standard']:.4g}"
                           f" ({'within' if c['within_if_confirmed'] else 'ABOVE'} the stated total)")
    for level, profs in doc.items():
        for prof, t in profs.items():
            out += ["", f"## {level} level, {prof} profile", "",
                    "| case | check | n | bins | nominal | realised | guarantee | how | detectable binned TV |",
                    "|---|---|---|---|---|---|---|---|---|"]
            out += [f"| {r['case']} | {r['check']} | {_fmt(r['n'])} | {_fmt(r['bins'])} | {r['nominal']:.3g} | "
                    f"{r['realised']:.3g} | {r['guarantee']} | {r['how']} | {_fmt(r['detectable_tv'])} |"
                    for r in t["rows"]]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="write the per-check false-fail table (Markdown + JSON)")
    parser.add_argument("--out", default="docs", help="directory for alpha-table.md / alpha-table.json")
    parser.add_argument("--levels", nargs="+", default=list(LEVEL_NAMES), choices=list(LEVEL_NAMES))
    args = parser.parse_args(argv)
    doc = table(tuple(args.levels))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "alpha-table.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / "alpha-table.md").write_text(to_markdown(doc))
    for level, profs in doc.items():
        for prof, t in profs.items():
            print(f"{level:>8} {prof:>8}: {t['n_checks']} checks, sum realised {t['sum_realised']:.4g} "
                  f"<= stated {t['total_stated']:g}: {t['within']}; {t['asymptotic_only']} asymptotic only")
    return 0 if all(t["within"] for p in doc.values() for t in p.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
