"""Deviation families that read the draft's law q as well as the reference's p: the mechanisms of a rule that
verifies drafts, which no law built from p alone can name. They need a draft file (the draft model served plain,
its reports of the candidate's prefixes: `TokenTable.draft`); at a row without one each is exactly p.

At a drafted position the standard rule emits min(p, q) + (p - q)^+ = p. Each family is the law a known bug gives
there, mixed with p at weight 1 - eps (the bonus positions, and rows where it changes nothing):

* `resample-from-p`: at a rejection the correction is drawn from p instead of the residual:
  min(p, q) + beta p, beta = 1 - sum min(p, q);
* `draft-law-mismatch`: the drafts are drawn from another law than the q in the ratio (the draft at another
  temperature, or q taken from other logits than those sampled): drafts from q^theta (normalised), accepted with
  min(1, p / q), the residual (p - q)^+ otherwise; exact at theta = 1 (eps is 1: every drafted token);
* `ratio-law-mismatch`: the drafts are drawn from q but the ratio and the residual read q^theta (normalised): q
  taken from other logits than those sampled (raw logits where the drafts were warped), or at another temperature;
  exact at theta = 1;
* `q-from-raw-logits`: the drafts are drawn from q but the ratio and the residual read the draft's raw law (its
  softmax at temperature 1, nothing truncated: the raw reports of the draft file); eps is the share of tokens at
  drafted positions;
* `shared-uniform`: the acceptance uniform u is reused to draw the correction by inverse CDF of the residual in token
  id order: given a rejected draft x, u is uniform on [min(1, p(x) / q(x)), 1), so the correction falls in the
  residual's upper quantiles.

Every law is over the report's listed categories, with p and q each renormalised over them (q of an id the draft does
not list counts 0; drafts outside p's listed tokens are not modelled), so that each family is exactly the table's
conditional law at its exact value: a description of the mechanism, not a rate.
"""

from __future__ import annotations

import numpy as np

from .tokens import TokenTable


def _pq(table: TokenTable) -> tuple[np.ndarray, np.ndarray]:
    """(p, q), each (n, width) renormalised over the listed ids (`TokenTable.reported`, `TokenTable.drafted`)."""
    return table.reported, table.drafted


def _residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """(n, width) norm((p - q)^+), p where it is zero (q = p: no rejection)."""
    excess = np.clip(p - q, 0.0, None)
    total = excess.sum(axis=1, keepdims=True)
    return np.where(total > 0, excess / np.where(total > 0, total, 1.0), p)


def resample_from_p_parts(table: TokenTable) -> tuple[np.ndarray, np.ndarray]:
    """(p, min(p, q) + beta p), each (n, width): the mixture `resampled_from_p` weighs."""
    p, q = _pq(table)
    overlap = np.minimum(p, q)
    beta = np.clip(1.0 - overlap.sum(axis=1, keepdims=True), 0.0, 1.0)
    return p, overlap + beta * p


def resampled_from_p(table: TokenTable, eps: float) -> np.ndarray:
    """(n, width) (1 - eps) p + eps (min(p, q) + beta p)."""
    return table.mixed(*resample_from_p_parts(table), eps)


def _powered(table: TokenTable, q: np.ndarray, theta: float) -> np.ndarray:
    """(n, width) q^theta renormalised over the listed ids (zero where q is)."""
    positive = q > 0
    return table.normalised(np.where(positive, np.power(np.where(positive, q, 1.0), theta), 0.0))


def _verified(p: np.ndarray, drafted: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """(n, width) the law of the standard rule's output when drafts come from `drafted` and the ratio and the residual
    read `ratio` (both rows over the listed ids)."""
    positive = ratio > 0
    accept = np.where(positive, np.minimum(1.0, p / np.where(positive, ratio, 1.0)), 1.0)
    kept = drafted * accept
    return kept + np.clip(1.0 - kept.sum(axis=1, keepdims=True), 0.0, 1.0) * _residual(p, ratio)


def draft_law_mismatched(table: TokenTable, theta: float) -> np.ndarray:
    """(n, width) the standard rule's law when the drafts come from q^theta and the ratio reads q."""
    p, q = _pq(table)
    return table.normalised(_verified(p, _powered(table, q, theta), q))


def ratio_law_mismatched(table: TokenTable, theta: float) -> np.ndarray:
    """(n, width) the standard rule's law when the drafts come from q and the ratio reads q^theta."""
    p, q = _pq(table)
    return table.normalised(_verified(p, q, _powered(table, q, theta)))


def q_from_raw_parts(table: TokenTable) -> tuple[np.ndarray, np.ndarray]:
    """(p, the standard rule's law when the drafts come from q and the ratio reads the draft's raw law), each
    (n, width): the mixture `q_from_raw` weighs."""
    p, q = _pq(table)
    raw = table.normalised(np.where(table.has_draft[:, None], table.draft_raw, 0.0))
    raw = np.where(raw.sum(axis=1, keepdims=True) > 0, raw, q)
    return p, _verified(p, q, raw)


def q_from_raw(table: TokenTable, eps: float) -> np.ndarray:
    """(n, width) (1 - eps) p + eps (the standard rule's law when the drafts come from q and the ratio reads the
    draft's raw law)."""
    return table.mixed(*q_from_raw_parts(table), eps)


def shared_uniform_parts(table: TokenTable) -> tuple[np.ndarray, np.ndarray]:
    """(p, min(p, q) + the correction drawn by inverse CDF at the reused uniform), each (n, width): the mixture
    `shared_uniform` weighs."""
    p, q = _pq(table)
    order = np.argsort(
        np.where(table.listed, table.ids, np.iinfo(np.int64).max), axis=1, kind="stable"
    )
    rows = np.arange(p.shape[0])[:, None]
    residual = _residual(p, q)[rows, order]  # (n, width) in token id order
    high = np.cumsum(residual, axis=1)
    low = high - residual
    # (n, width) per draft x
    threshold = np.where(q > 0, np.minimum(1.0, p / np.where(q > 0, q, 1.0)), 1.0)
    # overlap[n, x, y] = |[low_y, high_y) and [threshold_x, 1)|: where the reused uniform puts correction y after x.
    overlap = np.clip(
        np.minimum(high[:, None, :], 1.0) - np.maximum(low[:, None, :], threshold[:, :, None]),
        0.0,
        None,
    )
    corrected = np.einsum("nx,nxy->ny", q * table.listed, overlap)  # (n, width) in id order
    law = np.minimum(p, q)
    law[rows, order] += corrected
    return p, law


def shared_uniform(table: TokenTable, eps: float) -> np.ndarray:
    """(n, width) (1 - eps) p + eps (min(p, q) + the correction drawn by inverse CDF at the reused uniform)."""
    return table.mixed(*shared_uniform_parts(table), eps)


__all__ = [
    "draft_law_mismatched",
    "q_from_raw",
    "q_from_raw_parts",
    "ratio_law_mismatched",
    "resample_from_p_parts",
    "resampled_from_p",
    "shared_uniform",
    "shared_uniform_parts",
]
