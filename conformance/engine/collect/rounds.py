"""The one command's rounds: how many completions each prompt gets next, when to stop, and the progress line.

Every check the engine level runs on a sampled prompt is anytime-valid (e-processes, and anytime bounds for what
a CERTIFIED rules out), so the run may certify after every round and stop at the first verdict without changing
any rate (proofs/ARGUMENT.md, C15, C16). A prompt that reached the target gets no more samples; the others grow
towards what their routes project (`routes`: the coupling route's seed count exactly, the law route's with a
margin, its bound shrinking as 1/sqrt(n)), by at least `first` and at most 4x per round.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Verdicts that end a run at once.
FINAL = ("CERTIFIED", "NOT_EXACT", "CONTRACT_VIOLATION")


@dataclass(frozen=True)
class RoundPlan:
    """Completions per prompt for the next round (None: stop), and why."""

    counts: dict[str, int] | None
    why: str


#: The law route's projection assumes the bound shrinks as 1/sqrt(n): ask this much more. The coupling route's is
#: exact (the seeds at which its current mismatches certify).
LAW_MARGIN = 1.2


def projected(entry: dict) -> int | None:
    """The fewest completions one of a prompt's routes projects to reach the target (None: none projects it)."""
    needs = [math.ceil(r["needed"] * (LAW_MARGIN if r["route"] == "law" else 1.0))
             for r in entry.get("routes", []) if r.get("needed")]
    return min(needs) if needs else None


#: Completions per prompt after which a candidate that never drafted is taken not to speculate on these prompts.
UNOBSERVED_AFTER = 128


def next_counts(result, counts: dict[str, int], first: int, cap: int) -> RoundPlan:
    """What the next round asks of each prompt after a look at `result` (an EngineResult)."""
    if result.verdict in FINAL:
        return RoundPlan(None, f"verdict {result.verdict}")
    structural = list(result.input_reasons) + [f"{pid}: {why}" for pid, why in result.invalid.items()]
    if structural:
        return RoundPlan(None, "more samples cannot help: " + "; ".join(structural[:3]))
    if not result.speculation_observed and min(counts.values()) >= UNOBSERVED_AFTER:
        return RoundPlan(None, f"the candidate never drafted in {min(counts.values())} or more completions per prompt")
    per_prompt = result.extra.get("engine", {}).get("ruled_out", {}).get("per_prompt", {})
    grown, short = dict(counts), []
    for pid, n in counts.items():
        entry = per_prompt.get(pid, {})
        if entry.get("reached") and (result.speculation_observed or n >= UNOBSERVED_AFTER):
            continue
        want = projected(entry)
        grown[pid] = min(cap, max(n + first, min(4 * n, 2 * n if want is None else want)))
        if grown[pid] > n:
            short.append(pid)
    if not short:
        return RoundPlan(None, f"every prompt short of the target is at the cap of {cap} completions")
    return RoundPlan(grown, "short of the target: " + ", ".join(short))


def _route_text(entry: dict) -> str:
    if entry.get("route") == "greedy":
        return "greedy"
    parts = [f"{r['route']} {r['bound']:.3g}" for r in entry.get("routes", [])]
    return (", ".join(parts) or "no route") + (" ✓" if entry.get("reached") else "")


def progress_line(round_no: int, elapsed_s: float, result, counts: dict[str, int], target: float,
                  rate_per_s: float | None, plan: RoundPlan) -> str:
    """One line: the round, each prompt's completions and what its routes rule out, the time and an ETA."""
    per_prompt = result.extra.get("engine", {}).get("ruled_out", {}).get("per_prompt", {})
    prompts = " | ".join(f"{pid} {counts.get(pid, 0)}: {_route_text(per_prompt.get(pid, {}))}" for pid in counts)
    eta = ""
    if plan.counts and rate_per_s:
        more = sum(max(0, plan.counts[p] - counts[p]) for p in counts)
        eta = f"; next round {more} more completions per end, ~{more / rate_per_s / 60:.1f} min"
        wanted = {p: projected(per_prompt.get(p, {})) for p in counts if not per_prompt.get(p, {}).get("reached")}
        if wanted and None not in wanted.values():
            left = sum(max(0, int(w or 0) - counts[p]) for p, w in wanted.items())
            eta += f"; ETA to the target ~{left / rate_per_s / 60:.1f} min"
    return (f"round {round_no} ({elapsed_s / 60:.1f} min): {result.verdict}; rules out (target {target:g}): "
            f"{prompts}{eta}")


__all__ = ["FINAL", "RoundPlan", "next_counts", "progress_line", "projected"]
