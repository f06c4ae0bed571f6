"""`exactspec calibrate`: check the suite's false-fail claims yourself, on an implementation known to be exact.

A level's suite is run R times on the implementation (default: the level's exact reference), replicate r with
the run salt "calibrate-r" mixed into every case seed (`core.records.set_seed_salt`, the same salt as
`--exactspec-seed`), at the profile's planned sample sizes, its cases on any executor (`--workers`,
`--scheduler`). Each statistical check's p-value is compared with 1e-2 and 1e-3, and its empirical rejection
rate is reported with its Clopper-Pearson interval.

Levels: rule, tree and sequence (a replicate of the quick profile costs seconds, about a minute and a few
minutes on a 2-core CPU: see docs/calibration/README.md). Not the engine level: its data are a serving engine's
sample files, and a replicate would be a new collection from live servers (`tests/test_engine_meta.py` runs
that experiment for exactspec's own served generators).

An exact implementation is rejected by a check at most at the nominal rate: a check whose interval lies above
the nominal rate contradicts the suite's claim. Checks with an exact tail (<= 3 bins) reject at about the
nominal rate (a little below: their statistic is discrete); checks on Agrawal's bound reject far less often (the
bound is conservative), which the report states as such.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

from scipy import stats

from ..stat_tests import rejection_rate
from .api import resolve
from .core.driver import run_level
from .core.executor import case_executor
from .core.levels import get_level, level_names
from .core.profiles import PROFILE_NAMES, get_profile
from .core.records import set_seed_salt
from .provenance import collect

ALPHAS = (1e-2, 1e-3)
CONFIDENCE = 0.99


def tail_of(record) -> str:
    """How a record's p-value is obtained: "exact" / "bound" (likelihood ratio), "exact (KS)", "exact (binomial)"."""
    details = record.result.details
    if "tail" in details:
        return str(details["tail"])
    if details.get("method") == "ks":
        return "exact (KS)"
    if record.check == "acceptance_rate":
        return "exact (binomial)"
    return "none (one bin)"


def replicate_pvalues(
    impl_spec: str | None,
    profile_name: str,
    replicates: int,
    cases=None,
    on_replicate: Callable[[dict, int], None] | None = None,
    level: str = "rule",
    executor: Any = None,
) -> dict:
    """{(case, check): [p-values]} and the tails used, from `replicates` salted runs of `level`'s suite on
    `impl_spec` (None: the level's reference); `on_replicate(raw so far, replicates done)` after each one."""
    declared = get_level(level)
    if declared.reference_spec is None:
        raise ValueError(
            f"calibrate: the {level} level cannot be replicated offline (it has no exact reference to "
            "run: the engine level's data are sample files)"
        )
    profile = get_profile(profile_name)
    _, obj, name, spec = resolve(impl_spec or declared.reference_spec, level)
    # names (None: the profile's); else case objects
    if cases is None or all(isinstance(c, str) for c in cases):
        cases = declared.select_cases(profile, obj, cases)
    pvalues: dict = defaultdict(list)
    info: dict = {}
    raw = {"pvalues": pvalues, "info": info, "per_check_false_fail_rate": None, "rounds": None}
    old = set_seed_salt("")
    try:
        for r in range(replicates):
            set_seed_salt(f"calibrate-{r}")
            result = run_level(
                declared,
                obj,
                name,
                profile=profile,
                cases=cases,
                executor=executor,
                spec=spec,
                extras=False,
            )
            raw["per_check_false_fail_rate"] = result.budget["per_check_false_fail_rate"]
            raw["rounds"] = {case: plan["n"] for case, plan in result.plan.items()}
            for rec in result.records:
                if (
                    rec.statistical
                    and not rec.result.details.get("skipped")
                    and not rec.result.details.get("confirmatory")
                ):
                    pvalues[(rec.case, rec.check)].append(float(rec.result.p_value))
                    info[(rec.case, rec.check)] = (
                        rec.result.n,
                        rec.result.details.get("n_bins"),
                        tail_of(rec),
                    )
            if on_replicate is not None:
                on_replicate(raw, r + 1)
    finally:
        set_seed_salt(old)
    return raw


def _rates(pvals: list[float], n_tests: int = 1) -> dict:
    """Rejections at each alpha, their 99% interval, and `above_nominal`: a one-sided exact binomial test of
    rate <= alpha rejects at 1% family-wise over `n_tests` such tests (Bonferroni)."""
    out = {}
    for a in ALPHAS:
        k, n, rate, (lo, hi) = rejection_rate(pvals, a, CONFIDENCE)
        excess_p = float(stats.binom.sf(k - 1, n, a)) if k else 1.0
        out[f"{a:g}"] = {
            "rejections": k,
            "rate": rate,
            "ci": [lo, hi],
            "nominal_in_ci": lo <= a <= hi,
            "p_value_rate_above_nominal": excess_p,
            "above_nominal": excess_p < 0.01 / n_tests,
        }
    return out


def summarize(raw: dict) -> dict:
    """Per-check and per-tail rejection rates with Clopper-Pearson intervals."""
    checks: list[dict] = []
    pooled: defaultdict[str, list[float]] = defaultdict(list)
    n_tests = len(raw["pvalues"]) * len(ALPHAS)
    for key, pv in sorted(raw["pvalues"].items()):
        n, bins, tail = raw["info"][key]
        checks.append(
            {
                "case": key[0],
                "check": key[1],
                "n": n,
                "n_bins": bins,
                "tail": tail,
                "replicates": len(pv),
                "rates": _rates(pv, n_tests),
            }
        )
        pooled[tail] += pv
    by_tail = {tail: {"trials": len(pv), "rates": _rates(pv)} for tail, pv in pooled.items()}
    contradicted = [
        f"{c['case']}/{c['check']} at {a}"
        for c in checks
        for a, v in c["rates"].items()
        if v["above_nominal"]
    ]
    return {
        "checks": checks,
        "by_tail": by_tail,
        "checks_above_nominal": contradicted,
        "per_check_false_fail_rate": raw["per_check_false_fail_rate"],
        "rounds": raw["rounds"],
    }


def replicable_levels() -> list[str]:
    """The levels with an exact reference to replicate runs of (all but the engine level)."""
    return [name for name in level_names() if get_level(name).reference_spec is not None]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--impl",
        default=None,
        metavar="MODULE:NAME",
        help="a known-exact implementation of the level (default: the level's exact reference)",
    )
    parser.add_argument(
        "--replicates", type=int, default=200, help="salted runs of the suite (default 200)"
    )
    parser.add_argument(
        "--level",
        choices=replicable_levels(),
        default="rule",
        help="level to calibrate (default rule; not engine: see the module docstring)",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="local worker processes for each replicate's cases"
    )
    parser.add_argument(
        "--scheduler", default=None, metavar="ADDRESS", help="run the cases on this Dask cluster"
    )
    parser.add_argument(
        "--profile", choices=PROFILE_NAMES, default="quick", help="profile (default quick)"
    )
    parser.add_argument("--out", default=None, metavar="FILE", help="write the JSON result here")
    parser.add_argument("--progress", action="store_true", help="print one line per replicate")


def _document(args: argparse.Namespace, raw: dict, done: int, seconds: float) -> dict:
    return {
        "impl": args.impl or get_level(args.level).reference_spec,
        "level": args.level,
        "profile": args.profile,
        "replicates": done,
        "replicates_requested": args.replicates,
        "complete": done == args.replicates,
        "alphas": list(ALPHAS),
        "confidence": CONFIDENCE,
        **summarize(raw),
        "seconds": round(seconds, 1),
        "provenance": collect(args.impl or str(get_level(args.level).reference_spec)),
    }


def run(args: argparse.Namespace) -> int:
    if args.replicates < 1:
        raise ValueError(f"--replicates must be >= 1, got {args.replicates}")
    start = time.perf_counter()
    out = Path(args.out) if args.out else None

    def after(raw: dict, done: int) -> None:
        if args.progress:
            print(
                f"replicate {done}/{args.replicates} ({time.perf_counter() - start:.0f} s)",
                flush=True,
            )
        # written after every replicate: an interrupted run keeps what it measured
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(
                json.dumps(_document(args, raw, done, time.perf_counter() - start), indent=1) + "\n"
            )

    with case_executor(args.workers, args.scheduler) as executor:
        raw = replicate_pvalues(
            args.impl,
            args.profile,
            args.replicates,
            on_replicate=after,
            level=args.level,
            executor=executor,
        )
    result = _document(args, raw, args.replicates, time.perf_counter() - start)
    for tail, t in result["by_tail"].items():
        line = ", ".join(
            f"alpha {a}: {v['rate']:.4g} [{v['ci'][0]:.3g}, {v['ci'][1]:.3g}]"
            for a, v in t["rates"].items()
        )
        print(f"{tail:>16}: {t['trials']} trials; {line}")
    bad = result["checks_above_nominal"]
    print(
        f"{len(result['checks'])} checks x {args.replicates} replicates in {result['seconds']} s; "
        f"checks whose rejection rate is significantly above nominal: {bad or 'none'}"
    )
    if out is not None:
        out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {out}")
    return 1 if bad else 0
