"""Where a deviation lives: the candidate's tokens broken down by position, confidence stratum, prompt and load,
each group with its best-fitting family (`families`) and its gain over exact, and the recurring prefixes where the
candidate's empirical law is furthest from the report.

Evidence is a gain in log-likelihood (nats) of the best family over exact on the group's tokens: a group "carries
evidence" from `EVIDENCE_NATS` on (a likelihood ratio of 20). The reference's own tokens, read against the same
reports, are fitted alike: a control that shows report errors (a gain there is the reports', not the candidate's).
The round position of a token (first drafted, after an acceptance, bonus, after a rejection) needs the engine's
per-token acceptance, which a black-box engine does not report: it is not localised here.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np

from .families import LOG_ZERO, family_named, fit, fit_all, fitted_families
from .tokens import TokenTable

#: A group carries evidence from this gain over exact (nats): a likelihood ratio of 20, times the number of fits
#: compared (`evidence_threshold`), so that scanning many groups and families does not find evidence in noise.
EVIDENCE_NATS = math.log(20.0)


def evidence_threshold(comparisons: int) -> float:
    """The gain (nats) at which the best of `comparisons` fits carries evidence: log(20 x comparisons)."""
    return EVIDENCE_NATS + math.log(max(1, comparisons))


#: A prefix is shown when the candidate visited it at least this often.
PREFIX_MIN_VISITS = 8
#: Prefixes shown, and categories shown at each.
PREFIXES_SHOWN, CATEGORIES_SHOWN = 3, 6
STRATUM_NAMES = ("top-1 < 0.5", "top-1 0.5-0.9", "top-1 >= 0.9")


def _group(table: TokenTable, keep: np.ndarray) -> dict:
    """The rows `keep` of `table`: their count and best fit (its dict), or only the count when empty."""
    part = table.subset(keep)
    if not part.size:
        return {"tokens": 0}
    fits = fit_all(part)
    temperature = next(f for f in fits if f.family == "temperature")
    return {"tokens": part.size, "best": fits[0].to_dict(), "temperature": temperature.to_dict()}


def by_key(cand: TokenTable, ref: TokenTable, column: str, names: dict | None = None) -> list[dict]:
    """One entry per value of `column` ("position", "stratum", "prompt", "load"): the candidate's group and the
    reference's (the control)."""
    values = sorted(set(getattr(cand, column).tolist()) | set(getattr(ref, column).tolist()))
    out = []
    for value in values:
        if column == "load" and value == "":
            continue
        entry = {column: (names or {}).get(value, value)}
        entry["candidate"] = _group(cand, getattr(cand, column) == value)
        entry["reference"] = _group(ref, getattr(ref, column) == value)
        out.append(entry)
    return out


def _gain(entry: dict) -> float:
    return entry["candidate"].get("best", {}).get("gain_nats", 0.0)


def first_and_peak(positions: list[dict], families: int) -> dict:
    """The first position whose candidate tokens carry evidence (`evidence_threshold` over every position and the
    `families` fitted), and the position of the most evidence per token."""
    threshold = evidence_threshold(families * len(positions))
    carrying = [e for e in positions if _gain(e) >= threshold]
    per_token = [
        (_gain(e) / max(1, e["candidate"]["tokens"]), e["position"])
        for e in positions
        if _gain(e) > 0
    ]
    return {
        "first": carrying[0]["position"] if carrying else None,
        "threshold_nats": round(threshold, 3),
        "peak": max(per_token)[1] if per_token else None,
        "carrying": [e["position"] for e in carrying],
    }


def load_dependence(cand: TokenTable) -> dict | None:
    """Serial against loaded candidate tokens: each group's temperature fit and the gain of fitting them apart
    over fitting them together (nats); None when the tokens carry no load labels of both kinds."""
    serial, loaded = cand.load == "serial", cand.load == "loaded"
    if not serial.any() or not loaded.any():
        return None
    family = family_named("temperature")
    apart = [fit(family, cand.subset(mask)) for mask in (serial, loaded)]
    together = fit(family, cand.subset(serial | loaded))
    split = sum(f.gain for f in apart) - together.gain
    return {
        "serial": apart[0].to_dict(),
        "loaded": apart[1].to_dict(),
        "split_gain_nats": round(split, 3),
        "depends": bool(split >= evidence_threshold(1)),
    }


def _wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p, d = k / n, 1 + z * z / n
    centre, half = (
        (p + z * z / (2 * n)) / d,
        z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d,
    )
    return max(0.0, centre - half), min(1.0, centre + half)


def prefix_scores(cand: TokenTable) -> list[tuple]:
    """(excess, key, rows, law, counts) per prefix the candidate visited at least PREFIX_MIN_VISITS times: the log
    likelihood ratio of its empirical law there against the report's (listed categories), less (categories seen - 1)
    / 2, its mean under exactness for many visits."""
    rows: dict = defaultdict(list)
    for i, key in enumerate(cand.prefix):
        rows[key].append(i)
    scored = []
    for key, index in rows.items():
        if len(index) < PREFIX_MIN_VISITS:
            continue
        first = index[0]
        law = np.where(cand.listed[first], cand.probs[first], 0.0)
        law = law / law.sum()
        counts = Counter(cand.category[index].tolist())
        n = len(index)
        g = sum(
            k * math.log(k / (n * law[c])) if law[c] > 0 else -k * LOG_ZERO
            for c, k in counts.items()
        )
        scored.append((g - (len(counts) - 1) / 2.0, key, index, law, counts))
    return scored


def worst_prefixes(cand: TokenTable, ref: TokenTable) -> list[dict]:
    """The recurring prefixes where the candidate's tokens are least likely under the report (`prefix_scores`),
    with the reported law, the candidate's frequencies (95 % Wilson intervals) and the reference's at the same
    prefix."""
    ref_rows: dict = defaultdict(list)
    for i, key in enumerate(ref.prefix):
        ref_rows[key].append(i)
    scored = prefix_scores(cand)
    out = []
    for excess, key, index, law, counts in sorted(scored, key=lambda s: -s[0])[:PREFIXES_SHOWN]:
        n, first = len(index), index[0]
        ref_counts = Counter(ref.category[ref_rows.get(key, [])].tolist())
        ref_n = len(ref_rows.get(key, []))
        shown = sorted(
            set(range(min(CATEGORIES_SHOWN, int(cand.listed[first].sum())))) | set(counts),
            key=lambda c: -law[c],
        )[: CATEGORIES_SHOWN + 2]
        table = [
            {
                "category": int(c),
                "token": int(cand.ids[first, c]),
                "reported": round(float(law[c]), 4),
                "candidate": counts.get(c, 0),
                "candidate_interval": [round(v, 4) for v in _wilson(counts.get(c, 0), n)],
                "reference": ref_counts.get(c, 0),
            }
            for c in shown
        ]
        out.append(
            {
                "prompt": key[0],
                "prefix": list(key[1]),
                "position": len(key[1]) + 1,
                "visits": n,
                "reference_visits": ref_n,
                "excess_nats": round(float(excess), 3),
                "categories": table,
            }
        )
    return out


def localise(cand: TokenTable, ref: TokenTable) -> dict:
    """Every breakdown of the candidate's deviation (and the reference's control)."""
    positions = by_key(cand, ref, "position")
    return {
        "by_position": positions,
        "where": first_and_peak(positions, len(fitted_families(cand))),
        "by_stratum": by_key(cand, ref, "stratum", dict(enumerate(STRATUM_NAMES))),
        "by_prompt": by_key(cand, ref, "prompt"),
        "load": load_dependence(cand),
        "prefixes": worst_prefixes(cand, ref),
    }


__all__ = [
    "EVIDENCE_NATS",
    "PREFIX_MIN_VISITS",
    "by_key",
    "evidence_threshold",
    "first_and_peak",
    "load_dependence",
    "localise",
    "prefix_scores",
    "worst_prefixes",
]
