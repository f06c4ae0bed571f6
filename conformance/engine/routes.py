"""How a sampled prompt reaches its profile's target: the two certification routes, and what each rules out.

* **coupling** (`stat_tests.coupling`): seeds drawn at random from the engine's seed space, each asked at both
  ends; with k mismatches in n seeds the whole-completion TV is at most pi_hat and the expected per-token TV at
  every position at most 2 pi_hat (probability >= 1 - beta / 2, at every look). Needs no report: it holds for any
  deviation, in any direction. Sampler-match engines (llama.cpp's greedy and n-gram drafts) reach it in a few
  hundred seeds; an engine that is not seed-coupled never does, and the law route decides.
* **law** (`stat_checks.law_drift_check`): the anytime upper bound of the stratified PIT drift; twice it bounds the
  realised mean per-token TV at positions 2..m for deviations monotone in the report's order at each prefix, with
  one direction per confidence stratum (probability >= 1 - beta / 2, at every look).

A prompt is certified when one route's bound is at most the target; `needed` says how many more completions (law)
or seeds (coupling) would reach it.
"""

from __future__ import annotations

import math
from typing import Iterable

from ..core.profiles import Profile
from ..core.records import CheckRecord
from .cases import EngineCase
from .hard import coupling_pairs
from .stat_checks import LAW_ROUTE_SHARE
from ...stat_tests.coupling import coupling_bound, min_num_samples_coupled_within

COUPLING_QUANTITY = ("expected per-token TV at every position, in any direction (the candidate's next-token law at "
                     "its own prefixes against the reference's)")
LAW_QUANTITY = ("realised mean per-token TV at positions 2..m (the candidate's next-token law at the prefixes it "
                "sampled against the reference's, on the reported top-N and the tail)")
LAW_CLASS = ("deviations monotone in the reference's probability order at each prefix (temperature, truncation, a "
             "pull to the argmax, a residual too sharp or too flat), with one direction per confidence stratum of the "
             "report (top-1 below 0.5, 0.5-0.9, 0.9 and above); other deviations are tested (context_law, "
             "near_zero_tokens), not ruled out at a stated size")


def coupling_route(case: EngineCase, profile: Profile) -> dict | None:
    """The coupling route of a sampled prompt, or None when its seeds were not drawn at random (or none is shared)."""
    data = case.data
    if data.seed_space is None:
        return None
    shared, mismatches, first = coupling_pairs(data.ref, data.cand)
    if not shared:
        return None
    beta = profile.false_pass_rate * (1.0 - LAW_ROUTE_SHARE)
    bound = coupling_bound(mismatches, shared, beta, data.seed_space)
    coupled = mismatches / shared < profile.engine.target_tv / 4.0  # else more seeds will only add mismatches
    needed = min_num_samples_coupled_within(profile.engine.target_tv, beta, mismatches, data.seed_space) if coupled \
        else None
    return {"route": "coupling", "bound": bound.token_tv, "completion_tv": bound.completion_tv, "seeds": shared,
            "mismatches": mismatches, "first_mismatch": first, "needed": needed, "false_pass_rate": beta,
            "quantity": COUPLING_QUANTITY, "kind": "expected"}


def law_route(case: EngineCase, records: Iterable[CheckRecord], profile: Profile) -> dict | None:
    """The law route of a sampled prompt from its `law_drift` record, or None when that did not run."""
    record = next((r for r in records if r.case == case.name and r.check == "law_drift"), None)
    if record is None or not record.result.n:
        return None
    details = record.result.details
    bound = float(details["ruled_out_tv"])
    return {"route": "law", "bound": bound, "values": record.result.n, "completions": details["completions"],
            "needed": _law_needed(details, profile.engine.target_tv), "false_pass_rate": details["false_pass_rate"],
            "quantity": LAW_QUANTITY, "class": LAW_CLASS, "kind": "realised"}


def _law_needed(details: dict, target: float) -> int | None:
    """Completions at which the law bound would reach `target` if it shrinks as 1/sqrt(n) around the slack."""
    drift, slack, completions = float(details["drift_bound"]), float(details["mean_slack"]), int(details["completions"])
    if not math.isfinite(drift) or target / 2.0 <= slack or completions < 1:
        return None
    if drift <= target / 2.0:
        return completions
    return math.ceil(completions * ((drift - slack) / (target / 2.0 - slack)) ** 2)


def prompt_routes(case: EngineCase, records: list[CheckRecord], profile: Profile, reports_valid: bool) -> dict:
    """Both routes of a sampled prompt (the law route only when its reports are valid) and the best bound."""
    routes = [r for r in (coupling_route(case, profile), law_route(case, records, profile) if reports_valid else None)
              if r is not None]
    best = min(routes, key=lambda r: r["bound"], default=None)
    return {"routes": routes, "best": best, "reached": best is not None and best["bound"] <= profile.engine.target_tv}


def shortfall(pid: str, entry: dict, target: float, profile_name: str) -> str:
    """The reason a prompt's routes fall short of the target: each route's bound and what would reach it."""
    if not entry["routes"]:
        return f"{pid}: no certification route ran (no random shared seeds, and no law check on valid reports)"
    parts = []
    for route in entry["routes"]:
        more = route["needed"]
        unit = "completions of this prompt" if route["route"] == "law" else "random seeds at both ends"
        reach = (f"about {more} {unit} would reach it" if more else "the engine is not seed-coupled: more seeds "
                 "cannot reach it" if route["route"] == "coupling" else "the report tolerance alone exceeds it")
        extra = f", {route['mismatches']} of {route['seeds']} seeds mismatched" if route["route"] == "coupling" else ""
        parts.append(f"{route['route']} rules out {route['bound']:.3g}{extra} ({reach})")
    return (f"{pid}: underpowered: the {profile_name} profile's target mean per-token TV is {target:g}; "
            + "; ".join(parts))


__all__ = ["COUPLING_QUANTITY", "LAW_CLASS", "LAW_QUANTITY", "coupling_route", "law_route", "prompt_routes",
           "shortfall"]
