"""How a sampled prompt reaches its profile's target: the certification routes, and what each rules out over the
coverage (positions 1..m, m the max_tokens asked; the prompt; the sampling settings; the load measured).

* **coupling** (`stat_tests.coupling`; any shape): seeds drawn at random from the engine's seed space, each asked
  at both ends; with k mismatches in n seeds the whole-completion TV is at most pi_hat and the expected per-token TV
  at every position at most 2 pi_hat (C16). Needs no report.
* **law, any shape** (`any_shape`): the realised mean per-token TV at positions 1..m from the reported law, for
  deviations of any shape, tokens at prefixes seen too rarely counted as TV 1 (C17).
* **law, monotone** (`law_checks.drift_stream`): the anytime bound of the stratified PIT drift; twice it bounds the
  realised mean per-token TV at positions 1..m for deviations monotone in the report's order at each prefix, with
  one direction per confidence stratum (C14 (b), C15 (c)); tokens without a report counted as TV 1.

The bare CERTIFIED needs an any-shape route at the target; the monotone route alone gives QUALIFIED. Each route
spends `ROUTE_SHARE` of the false-pass rate: a CERTIFIED's claim fails with probability <= beta / 2 + beta / 2.
"""

from __future__ import annotations

import math

from ..core.profiles import Profile
from .any_shape import any_shape_bound, prefix_weight_of
from .cases import EngineCase
from .hard import coupling_pairs
from .law_checks import drift_stream
from .law_stream import token_stream
from .stat_checks import ROUTE_SHARE
from ...stat_tests.coupling import coupling_bound, min_num_samples_coupled_within
from ...stat_tests.sequential import drift_bound

ANY_SHAPE = ("coupling", "law_any")
QUANTITY = {
    "coupling": "expected per-token TV at every position, in any direction (the candidate's next-token law at its "
    "own prefixes against the reference's)",
    "law_any": "realised mean per-token TV at positions 1..m, in any direction (the candidate's next-token law at "
    "the prefixes it sampled against the reference's reported law, on the reported top-N and the tail)",
    "law_monotone": "realised mean per-token TV at positions 1..m (as law_any), for deviations monotone in the "
    "reference's probability order at each prefix (temperature, truncation, a pull to the argmax, a "
    "residual too sharp or too flat), one direction per confidence stratum of the report (top-1 "
    "below 0.5, 0.5-0.9, 0.9 and above)",
}


def coupling_route(case: EngineCase, profile: Profile) -> dict | None:
    """The coupling route of a sampled prompt (or of a pooled run's prompts: the mismatches of every prompt's seeds
    counted together bound the mean over the prompts), or None when the seeds were not drawn at random (or none is
    shared)."""
    data = case.data
    if data.seed_space is None:
        return None
    shared, mismatches, first = 0, 0, None
    for part in data.parts:
        part_shared, part_mismatches, part_first = coupling_pairs(part.ref, part.cand)
        shared, mismatches, first = (
            shared + part_shared,
            mismatches + part_mismatches,
            first or part_first,
        )
    if not shared:
        return None
    beta = profile.false_pass_rate * ROUTE_SHARE
    bound = coupling_bound(mismatches, shared, beta, data.seed_space)
    # else more seeds will only add mismatches
    coupled = mismatches / shared < profile.engine.target_tv / 4.0
    needed = (
        min_num_samples_coupled_within(profile.engine.target_tv, beta, mismatches, data.seed_space)
        if coupled
        else None
    )
    return {
        "route": "coupling",
        "bound": bound.token_tv,
        "completion_tv": bound.completion_tv,
        "seeds": shared,
        "mismatches": mismatches,
        "first_mismatch": first,
        "needed": needed,
        "false_pass_rate": beta,
        "quantity": QUANTITY["coupling"],
        "kind": "expected",
        "shape": "any",
    }


def _unreported(case: EngineCase) -> int:
    """The candidate's tokens at positions 1..m whose prefix has no report (each counts as TV 1)."""
    return sum(
        1
        for part in case.data.parts
        for c in part.cand
        for t in range(min(case.positions, len(c.tokens)))
        if c.tokens[:t] not in part.reports
    )


def law_routes(case: EngineCase, profile: Profile) -> list[dict]:
    """The any-shape and the monotone law routes of a sampled prompt, or of a pooled run's prompts together (none
    when no candidate token is reported)."""
    data = case.data
    tokens = [
        tok
        for part in data.parts
        for tok in token_stream(
            part.pid, part.cand, part.reports, 1, case.positions, part.forced_cats
        )
    ]
    if not tokens:
        return []
    beta, unreported = profile.false_pass_rate * ROUTE_SHARE, _unreported(case)
    total = len(tokens) + unreported
    target = profile.engine.target_tv
    weights = prefix_weight_of({part.pid: part.reports for part in data.parts})
    shape = any_shape_bound(tokens, weights, case.positions, beta, unreported)
    half = _first_half_bound(case, weights, beta) if shape.bound > target else None
    stream = drift_stream(tokens)
    drift = drift_bound(stream, beta)
    monotone = min(1.0, (2.0 * drift * len(tokens) + unreported) / total)
    common = {
        "values": total,
        "completions": len(data.cand),
        "false_pass_rate": beta,
        "kind": "realised",
        "positions": [1, case.positions],
        "unreported_tokens": unreported,
    }
    return [
        {
            "route": "law_any",
            "bound": shape.bound,
            "covered_share": shape.covered_share,
            "visited_prefixes": shape.visited_prefixes,
            "needed": shape.needed(len(data.cand), target, half),
            "per_position": shape.per_position,
            "quantity": QUANTITY["law_any"],
            "shape": "any",
            **common,
        },
        {
            "route": "law_monotone",
            "bound": monotone,
            "needed": _monotone_needed(drift, stream, data, target),
            "quantity": QUANTITY["law_monotone"],
            "shape": "monotone",
            **common,
        },
    ]


def _first_half_bound(case: EngineCase, weights, beta: float):
    """The any-shape bound on the first half of each prompt's completions (in the design's order): how fast the bound
    shrinks with n, for the projection."""
    tokens, unreported = [], 0
    for part in case.data.parts:
        first = part.cand[: len(part.cand) // 2]
        tokens += token_stream(part.pid, first, part.reports, 1, case.positions, part.forced_cats)
        unreported += sum(
            1
            for c in first
            for t in range(min(case.positions, len(c.tokens)))
            if c.tokens[:t] not in part.reports
        )
    if not tokens:
        return None
    return any_shape_bound(tokens, weights, case.positions, beta, unreported)


def _monotone_needed(drift: float, stream, data, target: float) -> int | None:
    """Completions at which the monotone bound would reach `target` if it shrinks as 1/sqrt(n) around the slack."""
    slack, completions = stream.slack / max(1, stream.count), len(data.cand)
    if not math.isfinite(drift) or target / 2.0 <= slack or completions < 1:
        return None
    if drift <= target / 2.0:
        return completions
    return math.ceil(completions * ((drift - slack) / (target / 2.0 - slack)) ** 2)


def prompt_routes(case: EngineCase, profile: Profile, reports_valid: bool) -> dict:
    """Every route of a sampled prompt (the law routes only when its reports are valid); the best any-shape bound
    and the best bound of any route, and which the target reaches."""
    routes = [r for r in [coupling_route(case, profile)] if r is not None]
    if reports_valid:
        routes += law_routes(case, profile)
    target = profile.engine.target_tv
    best = min(routes, key=lambda r: r["bound"], default=None)
    best_any = min(
        (r for r in routes if r["shape"] == "any"), key=lambda r: r["bound"], default=None
    )
    return {
        "routes": routes,
        "best": best,
        "best_any_shape": best_any,
        "reached": best is not None and best["bound"] <= target,
        "any_shape_reached": best_any is not None and best_any["bound"] <= target,
    }


def shortfall(
    pid: str, entry: dict, target: float, profile_name: str, any_shape: bool = False
) -> str:
    """Why a prompt's routes fall short of the target (`any_shape`: its any-shape routes), and what would reach it."""
    routes = [r for r in entry["routes"] if r["shape"] == "any" or not any_shape]
    if not routes:
        return f"{pid}: no certification route ran (no random shared seeds, and no law route on valid reports)"
    parts = []
    for route in routes:
        more = route["needed"]
        unit = (
            "random seeds at both ends"
            if route["route"] == "coupling"
            else "completions of this prompt"
        )
        if more:
            reach = f"about {more} {unit} would reach it"
        elif route["route"] == "coupling":
            reach = "the engine is not seed-coupled: more seeds cannot reach it"
        elif route["route"] == "law_any":
            reach = (
                f"{1 - route['covered_share']:.0%} of the tokens sit at prefixes seen too rarely: a prompt set "
                "whose continuations repeat, or many more completions, would reach it"
            )
        else:
            reach = "the report tolerance alone exceeds it"
        extra = (
            f", {route['mismatches']} of {route['seeds']} seeds mismatched"
            if route["route"] == "coupling"
            else ""
        )
        parts.append(f"{route['route']} rules out {route['bound']:.3g}{extra} ({reach})")
    what = "any-shape bound" if any_shape else "target mean per-token TV"
    return f"{pid}: short of the {profile_name} profile's {what} {target:g}: " + "; ".join(parts)


__all__ = ["ANY_SHAPE", "QUANTITY", "coupling_route", "law_routes", "prompt_routes", "shortfall"]
