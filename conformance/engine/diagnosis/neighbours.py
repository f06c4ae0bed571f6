"""Whose row a token outside the reference's support came from: the rows next to its prefix that list it.

A candidate token the reference gives probability 0 was drawn from some other law. Two neighbours of the prefix
h = g + [y] are looked up among the reference's teacher-forced reports:

* the previous row, h minus its last token: a bonus or correction drawn from the row one position back (`stale-row`);
* the rows of g + [x, y] for any x, the same prefix with one token inserted before its last: the law of a context
  that kept a rejected draft x before the correction y (a KV cache not rolled back, `shifted-context`).

A neighbour explains a token when its report lists the token with positive mass. Rows overlap (a model's frequent
tokens are listed almost everywhere), so chance is what the neighbour would explain of tokens drawn from outside the
support by how often the reference emits each token overall (its own tokens' frequencies, add-one smoothed over the
ids seen): the frequency mass of the ids it lists that the prefix's own report does not, over the frequency mass
outside the support. A neighbour is named only where it explains a majority of the outside tokens and twice what
chance would. Descriptive: no verdict and no rate depends on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: A neighbour is named when it explains at least this share of the outside tokens, and at least this count.
NEIGHBOUR_SHARE, NEIGHBOUR_MIN = 0.5, 2

NEIGHBOURS = {
    "stale-row": "drawn from the previous position's row (a bonus or correction from the wrong row)",
    "shifted-context": (
        "drawn from the row of the same prefix with a token inserted before its last (a rejected "
        "draft kept in the context: a KV cache not rolled back)"
    ),
}


def _support(report: Any) -> set[int]:
    """The ids a report lists with positive mass."""
    return {int(i) for i, q in report.top_probs if float(q) > 0.0}


def _neighbour_supports(prompt_reports: dict, inserted: dict, prefix: tuple) -> dict[str, set[int]]:
    """Per neighbour of `prefix`, the ids it lists (`inserted`: (g, y) -> the reports of g + [x, y])."""
    previous = prompt_reports.get(prefix[:-1]) if prefix else None
    shifted = inserted.get((prefix[:-1], prefix[-1]), ()) if prefix else ()
    return {
        "stale-row": _support(previous) if previous is not None else set(),
        "shifted-context": set().union(*(_support(report) for report in shifted)),
    }


def _frequencies(parts: Sequence[Any], outside_keys: Sequence[tuple]) -> np.ndarray:
    """(V,) how often the reference emits each id (its own completions' tokens), plus one, over the ids seen in the
    reports, the reference's tokens and the outside tokens."""
    ids = [
        int(i) for part in parts for report in part.reports.values() for i, _ in report.top_probs
    ]
    ids += [token for _, _, token in outside_keys]
    emitted = [token for part in parts for completion in part.ref for token in completion.tokens]
    frequency = np.ones(1 + max(ids + emitted, default=0))
    np.add.at(frequency, np.array(emitted, dtype=int), 1.0)
    return frequency


def _inserted_index(reports: dict) -> dict:
    """(g, y) -> the reports of the prefixes g + [x, y] (any x): the rows with a token inserted before y."""
    index: dict[tuple, list] = {}
    for prefix, report in reports.items():
        if len(prefix) >= 2:
            index.setdefault((prefix[:-2], prefix[-1]), []).append(report)
    return index


def neighbours(outside_keys: Sequence[tuple], parts: Sequence[Any]) -> dict | None:
    """The neighbour that explains the candidate's tokens outside the support (`outside_keys`: (prompt, prefix,
    token) each), or None: {"family", "explained", "outside", "text"}."""
    if not outside_keys:
        return None
    by_prompt = {part.pid: part for part in parts}
    indexes = {pid: _inserted_index(part.reports) for pid, part in by_prompt.items()}
    frequency = _frequencies(parts, outside_keys)
    total = float(frequency.sum())
    hits, chance = dict.fromkeys(NEIGHBOURS, 0), dict.fromkeys(NEIGHBOURS, 0.0)
    for prompt, prefix, token in outside_keys:
        part = by_prompt.get(prompt)
        if part is None or (report := part.reports.get(prefix)) is None:
            continue
        own = _support(report)
        outside_mass = total - float(frequency[list(own)].sum())
        for name, listed in _neighbour_supports(part.reports, indexes[prompt], prefix).items():
            hits[name] += token in listed
            chance[name] += float(frequency[list(listed - own)].sum()) / max(outside_mass, 1e-12)
    best = max(NEIGHBOURS, key=lambda name: hits[name])
    if (
        hits[best] < max(NEIGHBOUR_MIN, NEIGHBOUR_SHARE * len(outside_keys))
        or hits[best] < 2.0 * chance[best]
    ):
        return None
    return {
        "family": best,
        "explained": hits[best],
        "outside": len(outside_keys),
        "chance": round(chance[best], 2),
        "text": f"{hits[best]} of the {len(outside_keys)} tokens outside the support are listed by a neighbouring "
        f"row: {NEIGHBOURS[best]} (chance: {chance[best]:.2g})",
    }


__all__ = ["NEIGHBOURS", "NEIGHBOUR_MIN", "NEIGHBOUR_SHARE", "neighbours"]
