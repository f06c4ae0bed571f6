"""The token stream the engine level's law checks read: each sampled token with the reference's report of its
prefix, read as categories, its mid-PIT value and the envelope of the law the report allows.

**Reports as categories.** A report is the engine's top-N (id, p') pairs; it is read as N + 1 categories, the
listed tokens in descending p' (ties by id), then a tail holding every unlisted token, of mass max(0, 1 - sum p').

**Tolerance.** Each reported probability is taken to be within the report tolerance of the engine's true one:
|p'(x) - p(x)| <= rho p'(x) + a (`samples.TOLERANCE_RELATIVE`, `TOLERANCE_ABSOLUTE`; CONTRACT.md "Report tolerance"). Then the true law is
at most the envelope p_bar (listed: p'(1 + rho) + a; tail: max(0, 1 - sum p') + rho sum p' + N a), and the PIT
value computed from the report is within eta = rho + N a of the exact one (proofs C14). The premise is measured
on every run (`premise`): where the reference reported a prefix both while sampling and when teacher-forced, the
two reports may differ by at most twice the tolerance.

**Mid-PIT.** A token of category c gets F(c-) + p(c) / 2: the randomized PIT F(c-) + W p(c) at W = 1/2, its
conditional mean given the token. Its mean under any law is the randomized PIT's (E W = 1/2), which is all the drift
and its bound read (C14 (b)), and it drops W's noise (variance (1 - sum p^3) / 12 against 1/12: three times less at
a top-1 probability of 0.9), so the same bound takes fewer tokens.

**Order.** Tokens are taken completion by completion in the design's seed order (`checks.design_order`: by the
completions' index in the seed list), positions in order; a token whose prefix has no report is skipped (a choice
made by its prefix alone, so the stream stays a martingale stream): every look at the growing files sees the same
stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np

from .samples import TOLERANCE_ABSOLUTE, TOLERANCE_RELATIVE, Completion, TopProbs

#: A token is "near zero" when it falls in the last categories (the tail first) whose reported mass sums to <= this.
NEAR_ZERO_MASS = 1e-4
#: Strata of the drift check: the report's top-1 probability below 0.5, in [0.5, 0.9), at least 0.9.
STRATA_EDGES = (0.5, 0.9)


@dataclass(frozen=True)
class Categories:
    """One report as categories: listed ids in order, their reported masses and the tail's (last entry)."""

    ids: tuple[int, ...]
    probs: np.ndarray  # N + 1 reported masses, not renormalised
    envelope: np.ndarray  # N + 1 upper bounds on the true masses (the tolerance)
    eta: float  # bound on |PIT from the report - exact PIT|
    stratum: int

    def index(self, token: int) -> int:
        """The category of `token` (N for the tail)."""
        try:
            return self.ids.index(token)
        except ValueError:
            return len(self.ids)

    def near_zero_set(self) -> tuple[int, ...]:
        """The longest run of least probable categories (tail first, then the listed from the bottom) whose reported
        masses sum to at most NEAR_ZERO_MASS."""
        total, chosen = 0.0, []
        for c in range(self.probs.size - 1, -1, -1):
            total += float(self.probs[c])
            if total > NEAR_ZERO_MASS:
                break
            chosen.append(c)
        return tuple(chosen)


def categories(
    top: TopProbs, relative: float = TOLERANCE_RELATIVE, absolute: float = TOLERANCE_ABSOLUTE
) -> Categories:
    """`top` as categories with its envelope, PIT slack and stratum."""
    ordered = sorted(top, key=lambda pair: (-pair[1], pair[0]))
    listed = np.array([p for _, p in ordered], dtype=np.float64)
    listed_sum = float(listed.sum())
    probs = np.append(listed, max(0.0, 1.0 - listed_sum))
    envelope = np.append(
        np.minimum(1.0, listed * (1.0 + relative) + absolute),
        min(1.0, max(0.0, 1.0 - listed_sum) + relative * listed_sum + len(listed) * absolute),
    )
    top1 = float(listed[0]) if listed.size else 0.0
    stratum = int(np.searchsorted(STRATA_EDGES, top1, side="right"))
    return Categories(
        tuple(i for i, _ in ordered), probs, envelope, relative + len(listed) * absolute, stratum
    )


#: The PIT's W: the mid-PIT (module docstring).
MID = 0.5


def pit_value(cats: Categories, token: int, draw: float = MID) -> tuple[int, float]:
    """(category, PIT value) of `token` under the report read as `cats`: F(c-) + W p(c) on the reported masses as they
    are (never renormalised), clipped to [0, 1], W = `draw` (the mid-PIT by default); within cats.eta of the exact
    value (C14)."""
    k = cats.index(token)
    value = float(cats.probs[:k].sum()) + draw * float(cats.probs[k])
    return k, min(1.0, max(0.0, value))


@dataclass(frozen=True)
class StreamToken:
    """One token of the stream: where it is, its report's categories, its category and its PIT value."""

    index: int  # completion's place in the stream
    seed: int
    position: int  # 1-based
    prefix: tuple[int, ...]
    token: int
    cats: Categories
    category: int
    pit: float  # the mid-PIT value, in [0, 1], within cats.eta of the exact one
    prompt: str = ""

    @property
    def key(self) -> tuple[str, tuple[int, ...]]:
        """The prefix as a key unique across prompts (the statistics that group by prefix read this)."""
        return self.prompt, self.prefix


def token_stream(
    prompt_id: str,
    completions: Sequence[Completion],
    reports: Mapping,
    first: int,
    last: int,
    cache: dict | None = None,
) -> list[StreamToken]:
    """The stream of `completions`' tokens at positions first..last (1-based) whose prefix has a report in
    `reports` (prefix -> report with `.top_probs`); `cache` memoises categories per prefix."""
    cache = {} if cache is None else cache
    out: list[StreamToken] = []
    for index, c in enumerate(completions):
        for t in range(first - 1, min(last, len(c.tokens))):
            prefix = c.tokens[:t]
            report = reports.get(prefix)
            if report is None:
                continue
            if prefix not in cache:
                cache[prefix] = categories(report.top_probs)
            cats = cache[prefix]
            k, value = pit_value(cats, c.tokens[t])
            out.append(
                StreamToken(index, c.seed, t + 1, prefix, c.tokens[t], cats, k, value, prompt_id)
            )
    return out


@dataclass(frozen=True)
class PremiseCheck:
    """Decode-time against teacher-forced reports of the same prefixes: the largest excess over twice the
    tolerance (<= 0: consistent) and where it is."""

    pairs: int
    largest_difference: float
    largest_excess: float
    where: dict | None

    @property
    def holds(self) -> bool:
        return self.largest_excess <= 0.0


def premise(
    completions: Iterable[Completion],
    reports: dict,
    last: int,
    relative: float = TOLERANCE_RELATIVE,
    absolute: float = TOLERANCE_ABSOLUTE,
) -> PremiseCheck:
    """Compare every decode-time report (a completion's own top_probs, positions 1..last) with the teacher-forced
    report of the same prefix: each listed probability may differ by at most 2 (rho p + a)."""
    pairs, worst, excess, where = 0, 0.0, -np.inf, None
    for c in completions:
        if not c.top_probs:
            continue
        for t in range(min(last, len(c.tokens))):
            forced = reports.get(c.tokens[:t])
            if forced is None or getattr(forced, "decode_time", False):
                continue
            pairs += 1
            a, b = dict(c.top_probs[t]), dict(forced.top_probs)
            for token in set(a) & set(b):
                diff = abs(a[token] - b[token])
                allowed = 2.0 * (relative * max(a[token], b[token]) + absolute)
                worst = max(worst, diff)
                if diff - allowed > excess:
                    excess, where = (
                        diff - allowed,
                        {
                            "seed": c.seed,
                            "position": t + 1,
                            "token": token,
                            "decode_time": a[token],
                            "teacher_forced": b[token],
                        },
                    )
    return PremiseCheck(pairs, worst, float(excess) if pairs else 0.0, where)


__all__ = [
    "Categories",
    "NEAR_ZERO_MASS",
    "PremiseCheck",
    "STRATA_EDGES",
    "StreamToken",
    "TOLERANCE_ABSOLUTE",
    "TOLERANCE_RELATIVE",
    "MID",
    "categories",
    "pit_value",
    "premise",
    "token_stream",
]
