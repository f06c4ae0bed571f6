"""Which member of a level's mutant zoo a failing candidate behaves like, where the level knows the draft's law
(rule and tree levels): the candidate's outcomes and every member's, run on the same case with the same drafts,
compared as outcome laws. The levels supply the runs (`rule.mechanism`, `tree.mechanism`); this is the comparison.

An outcome law is read as counts: how many tokens a round emitted (one bin per count), and at each position the
token emitted there among the rounds that reach it (V bins). A member's law is its counts smoothed by half a count
per outcome; the candidate's counts are scored under each, and a member's gain is its log-likelihood over the
exact reference's. The best gain names the mechanism from `named_from(members)` nats, a likelihood ratio of 20 per
member compared. Descriptive: a diagnosis runs after the verdict and never changes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np


def outcome_counts(tokens: np.ndarray, lengths: np.ndarray, vocab: int) -> np.ndarray:
    """One vector of counts from rounds' emitted `tokens` (n, L), -1 past each round's end, and their `lengths`."""
    positions = tokens.shape[1]
    out = [np.bincount(np.clip(lengths, 0, positions), minlength=positions + 1)[: positions + 1]]
    for j in range(positions):
        emitted = tokens[:, j]
        out.append(np.bincount(emitted[emitted >= 0], minlength=vocab)[:vocab])
    return np.concatenate(out).astype(float)


def _log_law(features: np.ndarray, positions: int, vocab: int) -> np.ndarray:
    logs, start = [], 0
    for size in [positions + 1] + [vocab] * positions:
        block = features[start : start + size] + 0.5
        logs.append(np.log(block / block.sum()))
        start += size
    return np.concatenate(logs)


def named_from(members: int) -> float:
    """The gain over exact (nats) from which the best of `members` is named."""
    return math.log(20.0 * max(1, members))


def rank_members(
    observed: np.ndarray, members: Mapping[str, np.ndarray], exact: str, positions: int, vocab: int
) -> dict:
    """The members best first by their gain over `exact` at explaining `observed` (`outcome_counts`), the one named
    (or None) and those tied with it (the same law on this case)."""
    scores = {
        name: float(observed @ _log_law(features, positions, vocab))
        for name, features in members.items()
    }
    ranked = sorted(
        ((name, score - scores[exact]) for name, score in scores.items()), key=lambda item: -item[1]
    )
    best, gain = ranked[0]
    named = best if gain >= named_from(len(members)) and best != exact else None
    tied = [name for name, g in ranked[1:] if named and abs(g - gain) <= 1e-6 * max(1.0, abs(gain))]
    return {
        "named": named,
        "tied": tied,
        "ranking": [{"member": n, "gain_nats": round(g, 2)} for n, g in ranked[:5]],
    }


def summarize(per_case: list[dict], models: Mapping[str, str]) -> dict:
    """The member most failing cases name, in words (`per_case`: `rank_members` entries with their case)."""
    named = [entry["named"] for entry in per_case if entry["named"]]
    best = max(set(named), key=named.count) if named else None
    if best is None:
        return {
            "mechanism": {
                "family": None,
                "text": "none of the zoo's mechanisms explains the failing cases "
                "better than the exact rule",
            },
            "cases": per_case,
        }
    tied = sorted({t for entry in per_case if entry["named"] == best for t in entry["tied"]})
    also = f"; tied with {', '.join(tied)}: the same law on these cases" if tied else ""
    text = f"{best}: {models.get(best)} (the best fit on {named.count(best)} of {len(per_case)} failing cases{also})"
    return {"mechanism": {"family": best, "text": text}, "cases": per_case}


def guarded(make: Callable[[], dict | None]) -> dict | None:
    """`make()`, or, when it raises, a diagnosis that says so: a diagnosis runs after the verdict, and a failure of
    it must never cost the run its verdict (the error is stated, not hidden)."""
    try:
        return make()
    except Exception as error:  # noqa: BLE001 -- any failure here is reported in the certificate, never raised
        return {
            "mechanism": {
                "family": None,
                "text": f"the diagnosis could not be made ({type(error).__name__}: "
                f"{error}); the verdict above stands",
            },
            "cases": [],
        }


def markdown_lines(diagnosis: dict) -> list[str]:
    """The certificate's section: the mechanism, then each diagnosed case's best fits."""
    lines = [
        "## Diagnosis (which mechanism of the mutant zoo fits)",
        "",
        f"**Mechanism:** {diagnosis['mechanism']['text']}",
        "",
        "| case | best fits (gain over the exact rule, nats) |",
        "|---|---|",
    ]
    for entry in diagnosis["cases"]:
        fits = ", ".join(f"{r['member']} {r['gain_nats']:.3g}" for r in entry["ranking"][:3])
        lines.append(f"| {entry['case']} | {fits} |")
    return lines + [""]


__all__ = ["guarded", "markdown_lines", "named_from", "outcome_counts", "rank_members", "summarize"]
