"""Dependence between the tokens of one completion: what a reused random stream leaves (a generator re-seeded at
every round, one uniform shared by two draws), beside what the per-prefix laws show.

Each token's randomized PIT is read under its prefix's report in token id order (the order of an inverse-CDF draw
over the vocabulary, where a reused uniform lands; the unlisted tail last; a token the report gives no mass is left
out), as normal scores z = Phi^-1(u), and per lag L the
scores of the tokens at positions t and t + L of one completion are correlated (Pearson, pooled over completions).
Under the target's reports (`target`) a reused stream shows where it moves the emitted tokens together; under the
draft's reports (`draft`, with a draft file) it shows more sharply, because drafts drawn from q with the same uniform
land at the same place of q's CDF. An exact candidate's completions have the reference's joint law, so the reference's
own completions, read the same way, are the control: per lag the Fisher statistic of the difference,
(atanh r_cand - atanh r_ref) / sqrt(1 / (n_cand - 3) + 1 / (n_ref - 3)), is about N(0, 1) when the two are alike,
and its square over 2 is the log-likelihood ratio of a difference of that size: the nats the mechanism is weighed in
beside the families' gains. Descriptive: no verdict and no rate depends on it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from ..law_stream import token_stream

#: Lags compared (at most; never beyond the positions read).
MAX_LAG = 8
#: Pairs needed at each end before a lag's correlation is read.
MIN_PAIRS = 30
#: The randomized PIT's draws: a fixed stream (the statistic is descriptive; a run's diagnosis is reproducible).
PIT_SEED = 20261206


def _scores(
    parts: Sequence[Any], role: str, positions: int, laws: Mapping[str, Mapping] | None
) -> np.ndarray:
    """(completions, positions) normal scores of the randomized PITs of `role`'s tokens ("cand" or "ref") under the
    reports `laws` (prompt id -> prefix -> report; None: the target's teacher-forced reports), NaN where unreported."""
    rng = np.random.default_rng(PIT_SEED)
    rows: list[np.ndarray] = []
    for part in parts:
        reports = part.reports if laws is None else laws.get(part.pid, {})
        completions = getattr(part, role)
        start = len(rows)
        rows += [np.full(positions, np.nan) for _ in completions]
        for tok in token_stream(
            part.pid,
            completions,
            reports,
            1,
            positions,
            {} if laws is not None else part.forced_cats,
        ):
            # the tail last
            ids, masses = (
                np.array(tok.cats.ids + (np.iinfo(np.int64).max,)),
                tok.cats.probs,
            )
            # a token the report gives no mass: its PIT is not defined
            if masses[tok.category] <= 0.0:
                continue
            below = float(masses[ids < ids[tok.category]].sum())
            u = below + rng.random() * float(masses[tok.category])
            rows[start + tok.index][tok.position - 1] = stats.norm.ppf(
                min(1.0 - 1e-12, max(1e-12, u))
            )
    return np.vstack(rows) if rows else np.zeros((0, positions))


def _correlation(scores: np.ndarray, lag: int) -> tuple[float, int]:
    """(correlation, pairs) of the scores `lag` positions apart."""
    if scores.shape[0] == 0 or lag >= scores.shape[1]:
        return 0.0, 0
    a, b = scores[:, :-lag].ravel(), scores[:, lag:].ravel()
    keep = np.isfinite(a) & np.isfinite(b)
    n = int(keep.sum())
    if n < MIN_PAIRS or np.std(a[keep]) == 0 or np.std(b[keep]) == 0:
        return 0.0, n
    return max(-0.999999, min(0.999999, float(np.corrcoef(a[keep], b[keep])[0, 1]))), n


def _lags(cand: np.ndarray, ref: np.ndarray, positions: int) -> list[dict]:
    out = []
    for lag in range(1, min(MAX_LAG, positions - 1) + 1):
        (cr, cn), (rr, rn) = _correlation(cand, lag), _correlation(ref, lag)
        statistic = 0.0
        if cn >= MIN_PAIRS and rn >= MIN_PAIRS:
            statistic = (math.atanh(cr) - math.atanh(rr)) / math.sqrt(
                1.0 / (cn - 3) + 1.0 / (rn - 3)
            )
        out.append(
            {
                "lag": lag,
                "candidate": {"correlation": round(cr, 4), "pairs": cn},
                "reference": {"correlation": round(rr, 4), "pairs": rn},
                "statistic": round(statistic, 3),
            }
        )
    return out


def dependence(
    parts: Sequence[Any], positions: int, draft: Mapping[str, Mapping] | None = None
) -> dict:
    """Per law read ("target"; "draft" with the draft's reports, prompt id -> prefix -> report) and lag
    1..min(MAX_LAG, positions - 1): both ends' correlations and the difference's statistic; the largest |statistic|,
    where it is, and its weight in nats (statistic^2 / 2)."""
    laws = {"target": None, **({"draft": draft} if draft else {})}
    by_law = {
        name: _lags(
            _scores(parts, "cand", positions, law), _scores(parts, "ref", positions, law), positions
        )
        for name, law in laws.items()
    }
    entries = [(name, entry) for name, lags in by_law.items() for entry in lags]
    if not entries:
        return {"by_law": by_law, "law": None, "lag": None, "nats": 0.0, "lags": 0}
    name, worst = max(entries, key=lambda item: abs(item[1]["statistic"]))
    return {
        "by_law": by_law,
        "law": name,
        "lag": worst["lag"],
        "nats": worst["statistic"] ** 2 / 2.0,
        "worst": worst,
        "lags": len(entries),
    }


__all__ = ["MAX_LAG", "MIN_PAIRS", "dependence"]
