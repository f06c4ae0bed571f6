"""The one command's rounds: how many completions each prompt gets next, when to stop, and the progress line.

Every check the engine level runs on a sampled prompt is anytime-valid (e-processes, and anytime bounds for what
a CERTIFIED rules out), so the run may certify after every round and stop at the first verdict without changing
any rate (proofs/ARGUMENT.md, C15-C18). A prompt that reached the target for any shape gets no more samples; the
others grow towards what their routes project (`routes`: the coupling route's seed count exactly, the law routes'
with a margin), by at least `first` and at most 4x per round. A prompt at the target for the monotone class only
(QUALIFIED, not a final verdict) grows towards the any-shape projection, or, when none is in reach, 4x per round:
the run spends its budget (`--max-per-prompt`, `--time-limit-s`) looking for a deviation, and ends QUALIFIED at
the budget if it finds none. While a declared seed coupling holds, teacher forcing waits (`forcing_can_wait`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ....outcomes import Verdict

#: Verdicts that end a run at once.
FINAL = (Verdict.CERTIFIED, Verdict.NOT_EXACT, Verdict.CONTRACT_VIOLATION)


@dataclass(frozen=True)
class RoundPlan:
    """Completions per prompt for the next round (None: stop), and why."""

    counts: dict[str, int] | None
    why: str


#: The law route's projection assumes the bound shrinks as 1/sqrt(n): ask this much more. The coupling route's is
#: exact (the seeds at which its current mismatches certify).
LAW_MARGIN = 1.2


def projected(entry: dict, any_shape: bool = False) -> int | None:
    """The fewest completions one of a prompt's routes (its any-shape routes with `any_shape`) projects to reach the
    target (None: none projects it)."""
    needs = [
        math.ceil(r["needed"] * (LAW_MARGIN if r["route"] != "coupling" else 1.0))
        for r in entry.get("routes", [])
        if r.get("needed") and (r.get("shape") == "any" or not any_shape)
    ]
    return min(needs) if needs else None


def forcing_can_wait(result, declared_coupled: bool) -> bool:
    """Whether the next round may skip teacher forcing: the candidate declared seed coupling, and no look so far
    (`result`, None before the first) disproved it: every sampled prompt has a coupling route with no mismatched
    seed. The coupling route needs no report, and a CERTIFIED by it rules out any shape; the first mismatch (or a
    prompt without a coupling route) ends the wait, and the next round teacher-forces every prefix sampled so far."""
    if not declared_coupled:
        return False
    if result is None:
        return True
    per_prompt = result.extra.get("engine", {}).get("ruled_out", {}).get("per_prompt", {})
    return all(
        entry.get("route") == "greedy"
        or any(r["route"] == "coupling" and not r["mismatches"] for r in entry.get("routes", []))
        for entry in per_prompt.values()
    )


#: Completions per prompt after which a candidate that never drafted is taken not to speculate on these prompts.
UNOBSERVED_AFTER = 128


def next_counts(result, counts: dict[str, int], first: int, cap: int) -> RoundPlan:
    """What the next round asks of each prompt after a look at `result` (an EngineResult)."""
    if result.verdict in FINAL:
        return RoundPlan(None, f"verdict {result.verdict}")
    structural = list(result.input_reasons) + [
        f"{pid}: {why}" for pid, why in result.invalid.items()
    ]
    if structural:
        return RoundPlan(None, "more samples cannot help: " + "; ".join(structural[:3]))
    if not result.speculation_observed and min(counts.values()) >= UNOBSERVED_AFTER:
        return RoundPlan(
            None,
            f"the candidate never drafted in {min(counts.values())} or more completions per prompt",
        )
    per_prompt = _entries(result, counts)
    grown, short = dict(counts), []
    for pid, n in counts.items():
        entry = per_prompt.get(pid, {})
        if entry.get("any_shape_reached") and (
            result.speculation_observed or n >= UNOBSERVED_AFTER
        ):
            continue
        qualified = bool(entry.get("reached")) and result.speculation_observed
        want = projected(entry, any_shape=qualified)
        if qualified and (want is None or want > cap):
            # no any-shape route in reach: the run spends its budget looking for a deviation
            want = 4 * n
        grown[pid] = min(cap, max(n + first, min(4 * n, 2 * n if want is None else want)))
        if grown[pid] > n:
            short.append(pid)
    if not short:
        return RoundPlan(
            None, f"every prompt short of the any-shape target is at the cap of {cap} completions"
        )
    return RoundPlan(grown, "short of the target: " + ", ".join(short))


def _entries(result, counts: dict[str, int]) -> dict[str, dict]:
    """Each prompt's routes; in a pooled run, the pooled entry for every prompt, its projections (completions of
    the whole set) shared out in proportion to each prompt's completions."""
    per_prompt = result.extra.get("engine", {}).get("ruled_out", {}).get("per_prompt", {})
    if not result.extra.get("engine", {}).get("pooled") or len(per_prompt) != 1:
        return per_prompt
    entry = next(iter(per_prompt.values()))
    total = max(1, sum(counts.values()))
    out = {}
    for pid, n in counts.items():
        routes = [
            {
                **r,
                "needed": math.ceil(r["needed"] * n / total)
                if r.get("needed")
                else r.get("needed"),
            }
            for r in entry.get("routes", [])
        ]
        out[pid] = {**entry, "routes": routes}
    return out


def _route_text(entry: dict) -> str:
    if entry.get("route") == "greedy":
        return "greedy"
    parts = [f"{r['route']} {r['bound']:.3g}" for r in entry.get("routes", [])]
    mark = (
        " ✓"
        if entry.get("any_shape_reached")
        else " ✓ (monotone only)"
        if entry.get("reached")
        else ""
    )
    return (", ".join(parts) or "no route") + mark


def progress_line(
    round_no: int,
    elapsed_s: float,
    result,
    counts: dict[str, int],
    target: float,
    rate_per_s: float | None,
    plan: RoundPlan,
) -> str:
    """One line: the round, each prompt's completions (a pooled run's: the set's) and what its routes rule out, the
    time and an ETA."""
    raw = result.extra.get("engine", {}).get("ruled_out", {}).get("per_prompt", {})
    per_prompt = _entries(result, counts)
    if result.extra.get("engine", {}).get("pooled") and len(raw) == 1:
        ((name, entry),) = raw.items()
        prompts = f"{name} {sum(counts.values())}: {_route_text(entry)}"
    else:
        prompts = " | ".join(
            f"{pid} {counts.get(pid, 0)}: {_route_text(per_prompt.get(pid, {}))}" for pid in counts
        )
    eta = ""
    if plan.counts and rate_per_s:
        more = sum(max(0, plan.counts[p] - counts[p]) for p in counts)
        eta = f"; next round {more} more completions per end, ~{more / rate_per_s / 60:.1f} min"
        wanted = {
            p: projected(per_prompt.get(p, {}))
            for p in counts
            if not per_prompt.get(p, {}).get("any_shape_reached")
        }
        if wanted and None not in wanted.values():
            left = sum(max(0, int(w or 0) - counts[p]) for p, w in wanted.items())
            eta += f"; ETA to the target ~{left / rate_per_s / 60:.1f} min"
    return (
        f"round {round_no} ({elapsed_s / 60:.1f} min): {result.verdict}; rules out (target {target:g}): "
        f"{prompts}{eta}"
    )


__all__ = ["FINAL", "RoundPlan", "next_counts", "progress_line", "projected"]
