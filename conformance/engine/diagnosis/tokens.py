"""The tokens a diagnosis reads: each end's sampled tokens at positions 1..m with the reference's teacher-forced
report of their prefix, as padded arrays (one row a token), so that every family and breakdown is a few array
operations.

A row holds the report's listed masses in the report's order (the categories of `law_stream.categories`), the
token's category (the tail is dropped: a family's law over the tail's many tokens is not known, so every fit is
conditional on the token being listed), and where the token was: prompt, position, confidence stratum, load label,
prefix. `previous` holds, for the same listed ids, the report of the prefix one token shorter (the law one row
back: what a stale or shifted row would sample), zero where that report does not list the id. `draft` holds, where
a draft file was given (`drafts`: the draft model served plain, its reports of the same prefixes), the draft's
reported mass q of the same ids (zero where the draft's report does not list an id): what the families of a rule
that reads q are built from (`draft_families`); `draft_raw` the draft's raw law (temperature 1, nothing truncated) of
the same ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..law_stream import StreamToken, categories, token_stream

#: Tokens outside the reported support kept as examples.
OUTSIDE_EXAMPLES = 5


@dataclass(frozen=True)
class TokenTable:
    """One end's listed tokens as arrays (n rows, width the longest report)."""

    probs: np.ndarray  # (n, width) reported masses of the listed categories, zero-padded
    ids: np.ndarray  # (n, width) int: the listed categories' token ids, -1 padded
    listed: np.ndarray  # (n, width) bool: a listed category
    # (n, width) the shorter prefix's reported mass of the same ids (0: not listed there)
    previous: np.ndarray
    has_previous: np.ndarray  # (n,) bool: the shorter prefix has a report (positions >= 2)
    category: np.ndarray  # (n,) int: the token's category (always listed)
    position: np.ndarray  # (n,) int, 1-based
    stratum: np.ndarray  # (n,) int: the report's confidence stratum (top-1 < 0.5, 0.5-0.9, >= 0.9)
    prompt: np.ndarray  # (n,) str
    load: np.ndarray  # (n,) str: "serial", "loaded" or "" (not labelled)
    prefix: list  # n (prompt, prefix tokens) keys
    token: np.ndarray  # (n,) int: the token id
    tail_tokens: int  # tokens in the tail category (not in the table)
    # (n, width) the draft's reported mass q of the same ids (0: not listed there, or no report)
    draft: np.ndarray
    has_draft: np.ndarray  # (n,) bool: the draft reported this prefix
    # (n, width) the draft's raw law (its softmax at T = 1) of the same ids, 0 where unreported
    draft_raw: np.ndarray
    # tokens the report gives mass 0 (a zero tail, or a listed 0): outside the support
    outside_tokens: int = 0
    outside_examples: tuple = ()  # the first few of them: where, and the report's smallest listed mass there
    outside_keys: tuple = ()  # every one of them as (prompt, prefix, token): what `neighbours` looks up

    @property
    def size(self) -> int:
        return int(self.category.size)

    def normalised(self, weights: np.ndarray) -> np.ndarray:
        """(n, width) rows of `weights` over the listed categories, summing to 1 (a row of zeros stays zero): every
        family's law is conditional on the token being listed."""
        weights = np.where(self.listed, weights, 0.0)
        total = weights.sum(axis=1, keepdims=True)
        return np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)

    @cached_property
    def reported(self) -> np.ndarray:
        """(n, width) p: the report's masses renormalised over the listed categories (computed once)."""
        return self.normalised(self.probs)

    @cached_property
    def drafted(self) -> np.ndarray:
        """(n, width) q: the draft's reported masses renormalised over the listed ids; p where the draft reported
        nothing or lists none of them (every family that reads q is exact there). Computed once."""
        q = self.normalised(np.where(self.has_draft[:, None], self.draft, 0.0))
        return np.where(q.sum(axis=1, keepdims=True) > 0, q, self.reported)

    def mixed(self, base: np.ndarray, alternative: np.ndarray, eps: float) -> np.ndarray:
        """(n, width) the law normalised((1 - eps) base + eps alternative): every mixture family's law."""
        return self.normalised((1.0 - eps) * base + eps * alternative)

    def subset(self, keep: np.ndarray) -> TokenTable:
        """The rows where `keep` (a boolean mask) is true."""
        index = np.flatnonzero(keep)
        return TokenTable(
            self.probs[index],
            self.ids[index],
            self.listed[index],
            self.previous[index],
            self.has_previous[index],
            self.category[index],
            self.position[index],
            self.stratum[index],
            self.prompt[index],
            self.load[index],
            [self.prefix[i] for i in index],
            self.token[index],
            0,
            self.draft[index],
            self.has_draft[index],
            self.draft_raw[index],
        )


def _rows(
    tokens: Sequence[StreamToken],
    loads: Sequence[str],
    reports: dict,
    cache: dict,
    drafts: Mapping[str, Mapping[tuple[int, ...], Any]] | None = None,
) -> dict:
    """The table's columns, as lists, of the listed tokens among `tokens` (`drafts`: the draft's reports of this
    prompt's prefixes, by kind, "post_sampling" or "raw", then prefix)."""
    cols: dict[str, Any] = {
        name: []
        for name in (
            "probs",
            "ids",
            "previous",
            "has_previous",
            "category",
            "position",
            "stratum",
            "prompt",
            "load",
            "prefix",
            "token",
            "draft",
            "has_draft",
            "draft_raw",
        )
    }
    tail = outside = 0
    examples: list[dict] = []
    keys: list[tuple] = []
    for tok, load in zip(tokens, loads):
        listed = len(tok.cats.ids)
        if tok.cats.probs[tok.category] <= 0.0:
            outside += 1
            keys.append((tok.prompt, tuple(tok.prefix), int(tok.token)))
            if len(examples) < OUTSIDE_EXAMPLES:
                examples.append(
                    {
                        "prompt": tok.prompt,
                        "prefix": list(tok.prefix),
                        "position": tok.position,
                        "token": tok.token,
                        "listed": listed,
                        "smallest_listed": float(
                            tok.cats.probs[:listed][tok.cats.probs[:listed] > 0].min(initial=1.0)
                        ),
                    }
                )
        if tok.category >= listed:
            tail += 1
            continue
        before = reports.get(tok.prefix[:-1]) if tok.prefix else None
        if before is not None and tok.prefix[:-1] not in cache:
            cache[tok.prefix[:-1]] = categories(before.top_probs)
        shorter = cache.get(tok.prefix[:-1]) if before is not None else None
        masses = dict(zip(shorter.ids, shorter.probs)) if shorter is not None else {}
        cols["probs"].append(tok.cats.probs[:listed])
        cols["ids"].append(np.array(tok.cats.ids, dtype=int))
        cols["previous"].append(np.array([masses.get(i, 0.0) for i in tok.cats.ids]))
        cols["has_previous"].append(shorter is not None)
        for column, kind in (("draft", "post_sampling"), ("draft_raw", "raw")):
            draft = (drafts or {}).get(kind, {}).get(tok.prefix)
            masses = (
                dict((int(i), float(q)) for i, q in draft.top_probs) if draft is not None else {}
            )
            cols[column].append(np.array([masses.get(i, 0.0) for i in tok.cats.ids]))
        cols["has_draft"].append(tok.prefix in (drafts or {}).get("post_sampling", {}))
        for name, value in (
            ("category", tok.category),
            ("position", tok.position),
            ("stratum", tok.cats.stratum),
            ("prompt", tok.prompt),
            ("load", load or ""),
            ("prefix", tok.key),
            ("token", tok.token),
        ):
            cols[name].append(value)
    cols["tail"], cols["outside"], cols["examples"], cols["outside_keys"] = (
        tail,
        outside,
        examples,
        keys,
    )
    return cols


def _table(cols: dict) -> TokenTable:
    width = max((row.size for row in cols["probs"]), default=1)
    n = len(cols["probs"])
    probs, previous, listed = (
        np.zeros((n, width)),
        np.zeros((n, width)),
        np.zeros((n, width), dtype=bool),
    )
    draft, draft_raw, ids = (
        np.zeros((n, width)),
        np.zeros((n, width)),
        np.full((n, width), -1, dtype=int),
    )
    for i, (row, prev, row_ids, q, q_raw) in enumerate(
        zip(cols["probs"], cols["previous"], cols["ids"], cols["draft"], cols["draft_raw"])
    ):
        probs[i, : row.size], previous[i, : row.size], listed[i, : row.size], ids[i, : row.size] = (
            row,
            prev,
            True,
            row_ids,
        )
        draft[i, : row.size], draft_raw[i, : row.size] = q, q_raw
    return TokenTable(
        probs,
        ids,
        listed,
        previous,
        np.array(cols["has_previous"], dtype=bool),
        np.array(cols["category"], dtype=int),
        np.array(cols["position"], dtype=int),
        np.array(cols["stratum"], dtype=int),
        np.array(cols["prompt"], dtype=object),
        np.array(cols["load"], dtype=object),
        list(cols["prefix"]),
        np.array(cols["token"], dtype=int),
        int(cols["tail"]),
        draft,
        np.array(cols["has_draft"], dtype=bool),
        draft_raw,
        int(cols["outside"]),
        tuple(cols["examples"][:OUTSIDE_EXAMPLES]),
        tuple(cols["outside_keys"]),
    )


def draft_reports(draft: Any) -> dict[str, dict[str, dict[tuple[int, ...], Any]]]:
    """A draft file's reports (`samples.SampleFile` of role "draft", or None), prompt id -> kind ("post_sampling": the
    law drafts are drawn from; "raw": the draft's softmax) -> prefix -> report."""
    out: dict[str, dict[str, dict[tuple[int, ...], Any]]] = {}
    for record in draft.prefix_probs if draft is not None else ():
        kinds = out.setdefault(record.prompt_id, {})
        kinds.setdefault(record.probs_kind, {}).setdefault(tuple(record.prefix_tokens), record)
    return out


def token_tables(
    parts: Sequence[Any],
    positions: int,
    drafts: Mapping[str, Mapping[str, Mapping[tuple[int, ...], Any]]] | None = None,
) -> tuple[TokenTable, TokenTable]:
    """(candidate, reference): every prompt's tokens at positions 1..`positions` whose prefix has a teacher-forced
    report (`parts`: `checks.PromptData`), the reference's own tokens read against the same reports; `drafts`: the
    draft's reports (`draft_reports`), when a draft file was given."""
    merged: dict[str, dict] = {}
    for role in ("cand", "ref"):
        columns: dict[str, Any] = {}
        for part in parts:
            cache = part.forced_cats
            completions = getattr(part, role)
            stream = token_stream(part.pid, completions, part.reports, 1, positions, cache)
            loads = [completions[tok.index].load for tok in stream]
            cols = _rows(stream, loads, part.reports, cache, (drafts or {}).get(part.pid))
            for name, values in cols.items():
                columns[name] = columns.get(name, 0 if name in ("tail", "outside") else []) + values
        merged[role] = columns or _rows([], [], {}, {})
    return _table(merged["cand"]), _table(merged["ref"])


__all__ = ["TokenTable", "draft_reports", "token_tables"]
