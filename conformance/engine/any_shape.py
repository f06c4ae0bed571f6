"""The law route's any-shape bound: the realised mean per-token TV of the candidate from the reference's reported
law, at positions 1..m, for deviations of any shape (proofs/ARGUMENT.md, C17).

No sample can bound a deviation of any shape at a prefix seen once, so the bound counts every token at such a prefix
as TV 1 and bounds the others from the prefixes' empirical laws. At a prefix h visited n_h times, the report's
categories are grouped into bins by one of the partitions `PARTITIONS` (the top j categories one by one, the rest
merged; chosen from the report alone), and

    TV_h <= max_A [c_h(A) - p_h(A)] + p_h(rest) <= D_hat_h + tol_h + p_bar_h(rest) + (c_h(A*) - c_hat_h(A*)),

with D_hat the empirical excess over the report, tol the report tolerance on a set of categories and p_bar the
envelope (C14 (a), C17 (a, b)). The last term is what the tokens at h tell about c_h(A*): for every set A of bins,
exp(lam n_h (c(A) - c_hat(A)) - phi(lam) n_h c(A)(1 - c(A))) is a supermartingale (Bennett, phi(lam) = e^lam - 1 -
lam), and c(A)(1 - c(A)) <= v_hat + (c(A) - c_hat(A)) with v_hat the largest c_hat(A)(1 - c_hat(A)) over the unions
of bins. Per position, the product over the prefixes visited of (1 - eps_h) + eps_h * mean over partitions and sets
of that supermartingale is one too (eps_h: THETA times the reference's probability of the prefix, a prior fixed
before the prefix's tokens are seen; an unvisited prefix's factor is 1); Ville's inequality over positions and the
lam grid gives, with probability >= 1 - beta at every look, for every choice of the prefixes used U, their partitions
and sets at once (C17 (e)),

    sum_{h in U} n_h TV_h <= sum_U n_h (D_hat + tol + p_bar(rest))
        + (log(G m / beta) + sum_U (cost_h + phi n_h v_hat_h) + sum_{visited, not U} -log(1 - eps_h)) / (lam - phi),

cost_h = log(1 / eps_h) + log |PARTITIONS| + K_h log 2. The bound chooses U, the partitions and lam per position to
make the total smallest; tokens outside U (and tokens whose prefix has no report) count 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from .law_stream import Categories, StreamToken, categories

#: Partitions of a report's categories: the top j by reported mass one by one, the rest merged (None: all apart).
PARTITIONS = (1, 2, 4, 8, 16, None)
#: Bennett's lam grid: 2**(k/2), k = -24..0 (lam - phi(lam) > 0 needs lam < 1.25).
LAMBDA_GRID = 2.0 ** (np.arange(-24, 1) / 2.0)
#: Prior weight of a prefix: THETA times the reference's probability of it (capped at 1/2).
THETA = 0.5
#: Unlisted tokens share a report's tail in the prefix prior as 1/V_BOUND each: a vocabulary is at most this large.
V_BOUND = 2**20
#: Projections beyond this many completions are reported as out of reach.
PROJECTION_LIMIT = 10**7


@dataclass(frozen=True)
class PrefixCounts:
    """The candidate's tokens at one prefix: the report's categories and the count in each."""

    cats: Categories
    counts: np.ndarray  # (N + 1,)
    weight: float  # the reference's probability of the prefix (the prior), 0 when unknown

    @property
    def n(self) -> int:
        return int(self.counts.sum())


def _partition_terms(prefix: PrefixCounts) -> list[tuple[float, float, int, float]]:
    """Per partition: (empirical excess over the report D_hat, envelope mass of the merged rest, bins K, the largest
    c_hat(A)(1 - c_hat(A)) over unions A of its bins)."""
    order = np.argsort(-prefix.cats.probs, kind="stable")
    probs, envelope = prefix.cats.probs[order], prefix.cats.envelope[order]
    empirical = prefix.counts[order] / prefix.n
    out = []
    for top in PARTITIONS:
        size = probs.size
        if top is None or top + 1 >= size:
            bins_r, bins_c, rest, k = probs, empirical, 0.0, size
        else:
            bins_r = np.append(probs[:top], probs[top:].sum())
            bins_c = np.append(empirical[:top], empirical[top:].sum())
            rest, k = float(min(1.0, envelope[top:].sum())), top + 1
        largest = float(bins_c.max())
        variance = largest * (1.0 - largest) if largest > 0.5 else 0.25
        out.append((float(np.clip(bins_c - bins_r, 0.0, None).sum()), rest, k, variance))
    return out


def _tolerance(cats: Categories) -> float:
    """2 (rho S' + N a): the most the report's mass of any set of categories can differ from the true law's."""
    return 2.0 * cats.eta * max(1.0, float(cats.probs[:-1].sum()))


def _options(prefix: PrefixCounts, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per partition: the cost of using the prefix (nats), its bound per token before the deviation term, and the
    variance proxy of that term."""
    tol = _tolerance(prefix.cats)
    terms = _partition_terms(prefix)
    cost = [
        math.log(1.0 / eps) + math.log(len(PARTITIONS)) + k * math.log(2.0) if eps > 0 else math.inf
        for _, _, k, _ in terms
    ]
    return (
        np.array(cost),
        np.minimum(1.0, np.array([d + tol + rest for d, rest, _, _ in terms])),
        np.array([v for _, _, _, v in terms]),
    )


def _position_bound(prefixes: Sequence[PrefixCounts], log_term: float) -> tuple[float, int]:
    """The smallest bound on sum_h n_h TV_h over one position's prefixes, and the tokens at prefixes it uses.

    For each lam, phi = e^lam - 1 - lam (Bennett): a prefix used with a partition adds n (D_hat + tol + rest) and
    (cost + phi n v) / (lam - phi) to the bound, one not used adds n and -log(1 - eps) / (lam - phi)."""
    n = np.array([p.n for p in prefixes], dtype=np.float64)
    eps = np.array([min(0.5, THETA * p.weight) for p in prefixes])
    unused_cost = -np.log1p(-eps)
    options = [_options(p, e) for p, e in zip(prefixes, eps)]
    best, best_used = math.inf, 0
    for lam in LAMBDA_GRID:
        phi = math.expm1(lam) - lam
        slope = lam - phi
        total, nats, used = 0.0, log_term, 0
        for i, (cost, per_token, variance) in enumerate(options):
            use = n[i] * per_token + (cost + phi * n[i] * variance) / slope
            j = int(np.argmin(use))
            if use[j] < n[i] + unused_cost[i] / slope:
                total += n[i] * per_token[j] + phi * n[i] * variance[j] / slope
                nats += cost[j]
                used += int(n[i])
            else:
                total += n[i]
                nats += unused_cost[i]
        value = min(float(n.sum()), total + nats / slope)
        if value < best:
            best, best_used = value, used
    return best, best_used


@dataclass(frozen=True)
class AnyShapeBound:
    """What the any-shape bound rules out: the realised mean per-token TV at positions 1..m is <= `bound`."""

    bound: float
    tokens: int  # candidate tokens at positions 1..m (those without a report count TV 1)
    covered_share: float  # share of them at prefixes the bound used
    visited_prefixes: int
    false_pass_rate: float
    per_position: dict[int, dict] = field(default_factory=dict)

    def needed(
        self, completions: int, target: float, half: "AnyShapeBound | None" = None
    ) -> int | None:
        """Completions at which the bound would reach `target`, extrapolating its power law in n from `half` (the
        bound on the first half of the completions): b(n) = a n^-g with g = log2(b(n / 2) / b(n)). None when it
        shrinks too slowly (g < 0.05: the tokens sit at prefixes that do not come back), when the projection is beyond
        PROJECTION_LIMIT, or with nothing to compare."""
        if self.bound <= target:
            return completions
        if half is None or completions < 2 or not 0.0 < self.bound < half.bound:
            return None
        slope = math.log2(half.bound / self.bound)
        if slope < 0.05:
            return None
        projection = completions * (self.bound / target) ** (1.0 / slope)
        return math.ceil(projection) if projection <= PROJECTION_LIMIT else None


def prefix_counts(
    tokens: Sequence[StreamToken], weight: Callable[[str, tuple], float]
) -> dict[int, list[PrefixCounts]]:
    """The stream's tokens grouped per position and prefix (of its prompt: `StreamToken.key`), with
    `weight(prompt, prefix)` the reference's probability of each prefix."""
    grouped: dict[tuple[int, tuple], tuple[Categories, np.ndarray]] = {}
    for tok in tokens:
        key = (tok.position, tok.key)
        if key not in grouped:
            grouped[key] = (tok.cats, np.zeros(tok.cats.probs.size))
        grouped[key][1][tok.category] += 1.0
    out: dict[int, list[PrefixCounts]] = {}
    for (position, (prompt, prefix)), (cats, counts) in grouped.items():
        out.setdefault(position, []).append(PrefixCounts(cats, counts, weight(prompt, prefix)))
    return out


def any_shape_bound(
    tokens: Sequence[StreamToken],
    weight: Callable[[str, tuple], float],
    positions: int,
    false_pass_rate: float,
    unreported: int = 0,
) -> AnyShapeBound:
    """The any-shape bound of a candidate stream at positions 1..`positions` (module docstring), probability
    >= 1 - false_pass_rate at every look; `unreported` tokens (no report at their prefix) count TV 1."""
    if (
        not (isinstance(positions, int) and positions >= 1)
        or not 0.0 < false_pass_rate < 1.0
        or unreported < 0
    ):
        raise ValueError(
            f"need positions >= 1, 0 < false_pass_rate < 1, unreported >= 0; got {positions}, "
            f"{false_pass_rate}, {unreported}"
        )
    log_term = math.log(LAMBDA_GRID.size * positions / false_pass_rate)
    grouped = prefix_counts(tokens, weight)
    total, used, per_position = float(unreported), 0, {}
    for position in sorted(grouped):
        bound, covered = _position_bound(grouped[position], log_term)
        count = sum(p.n for p in grouped[position])
        per_position[position] = {
            "tokens": count,
            "covered": covered,
            "bound": bound / count,
            "prefixes": len(grouped[position]),
        }
        total, used = total + bound, used + covered
    count = len(tokens) + unreported
    return AnyShapeBound(
        min(1.0, total / count) if count else math.inf,
        count,
        used / count if count else 0.0,
        sum(len(v) for v in grouped.values()),
        false_pass_rate,
        per_position,
    )


def prefix_weight_of(reports: dict[str, dict]) -> Callable[[str, tuple], float]:
    """weight(prompt, prefix): the reference's probability of a generated prefix of a prompt, from its reports along
    it (`reports`: prompt -> prefix -> report; each listed token its reported probability, an unlisted one the
    tail's over V_BOUND, each step divided by max(1, the listed sum) so the weights of one position's prefixes of a
    prompt sum to <= 1); 0 where a report on the way is missing. A pooled run's prompts share one product per
    position: each prompt's weights are divided by the number of prompts, so they still sum to <= 1."""
    cache: dict[tuple, float] = {(prompt, ()): 1.0 / len(reports) for prompt in reports}

    def weight(prompt: str, prefix: tuple) -> float:
        key = (prompt, tuple(prefix))
        if key in cache:
            return cache[key]
        parent = weight(prompt, key[1][:-1]) if key[1] else 0.0
        report = reports.get(prompt, {}).get(key[1][:-1])
        if parent == 0.0 or report is None:
            cache[key] = 0.0
            return 0.0
        cats = categories(report.top_probs)
        scale = max(1.0, float(cats.probs[:-1].sum()))
        k = cats.index(key[1][-1])
        step = cats.probs[k] / scale if k < len(cats.ids) else cats.probs[-1] / scale / V_BOUND
        cache[key] = parent * float(step)
        return cache[key]

    return weight


__all__ = [
    "AnyShapeBound",
    "LAMBDA_GRID",
    "PARTITIONS",
    "PrefixCounts",
    "THETA",
    "V_BOUND",
    "any_shape_bound",
    "prefix_counts",
    "prefix_weight_of",
]
