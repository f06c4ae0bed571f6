"""Each served generator's mean per-token TV at the drafted positions, measured by direct simulation: the unit in
which a profile states its engine target (`EngineSettings.target_tv`), so the meta-test can say which mutants
lie above it.

N completions of the generator are drawn in-process (no HTTP; seeds disjoint from every collection). At each
position j = 2..m the completions are grouped by their prefix, and each group's empirical next-token law is
compared with the target's exact warped row at that prefix (teacher forcing); a position the completion never
reached counts 0, as in the PIT's pooling. With V the vocabulary and delta the confidence of each bound:

* estimate: the plug-in mean over groups (weights n_g / N) of TV(empirical, target), on all N completions;
* upper bound: estimate + sqrt(2 ln(1/delta) / N). By Jensen the plug-in's mean is >= the true value, and one
  completion moves the plug-in by <= 2 / N (McDiarmid);
* lower bound, by sample splitting: the first half fixes, per prefix, the set A of tokens the generator
  over-weights. The second half estimates mean_j E[q(A) - p(A)] (<= the mean per-token TV), each completion
  contributing one value in [-1, 1]; empirical Bernstein (Maurer & Pontil 2009) bounds its mean from below.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ...sequence.cases import PROMPT_A
from .mutant_server import sampling_from_request

SEED_BASE = 10**8  # above every seed a collection of the zoo uses


@dataclass(frozen=True)
class TokenDeviation:
    """Mean per-token TV at positions 2..m of one generator: estimate and one-sided bounds (each at 1 - delta)."""

    kind: str
    n_completions: int
    estimate: float
    lower_bound: float
    upper_bound: float
    delta: float

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "n_completions": self.n_completions,
            "estimate": round(self.estimate, 4),
            "lower_bound": round(self.lower_bound, 4),
            "upper_bound": round(self.upper_bound, 4),
            "delta": self.delta,
        }


class TargetRows:
    """The target's warped next-token row after each prefix (teacher forcing), cached by prefix."""

    def __init__(self, target: Any, prompt: Sequence[int], sampling: Any) -> None:
        self.target, self.prompt, self.sampling = target, list(prompt), sampling
        self._rows: dict[tuple[int, ...], np.ndarray] = {}

    def after(self, prefix: tuple[int, ...]) -> np.ndarray:
        if prefix not in self._rows:
            # torch: the synthetic engine's deviation tables read this module without it
            from ...sequence.models import target_rows

            self._rows[prefix] = target_rows(
                self.target, self.prompt, list(prefix) + [0], self.sampling
            )[-1]
        return self._rows[prefix]


def _groups(completions: Sequence[Sequence[int]], j: int) -> dict[tuple[int, ...], Counter]:
    """Next-token counts at position j (1-based) per prefix, over the completions that reach position j."""
    groups: dict[tuple[int, ...], Counter] = defaultdict(Counter)
    for tokens in completions:
        if len(tokens) >= j:
            groups[tuple(tokens[: j - 1])][int(tokens[j - 1])] += 1
    return groups


def plug_in_tv(completions: Sequence[Sequence[int]], rows: TargetRows, m: int) -> float:
    """Mean over positions 2..m and completions of TV(empirical next-token law at the prefix, target row)."""
    total = 0.0
    for j in range(2, m + 1):
        for prefix, counts in _groups(completions, j).items():
            n_g = sum(counts.values())
            empirical = np.zeros_like(rows.after(prefix))
            for token, c in counts.items():
                empirical[token] = c / n_g
            total += n_g * 0.5 * float(np.abs(empirical - rows.after(prefix)).sum())
    return total / (len(completions) * (m - 1))


def split_lower_bound(
    first: Sequence[Sequence[int]],
    second: Sequence[Sequence[int]],
    rows: TargetRows,
    m: int,
    delta: float,
) -> float:
    """Lower confidence bound on the mean per-token TV from over-weighted sets chosen on `first`, scored on `second`."""
    over: dict[tuple[int, tuple[int, ...]], set[int]] = {}
    for j in range(2, m + 1):
        for prefix, counts in _groups(first, j).items():
            n_g, p = sum(counts.values()), rows.after(prefix)
            over[(j, prefix)] = {t for t in range(len(p)) if counts.get(t, 0) / n_g > p[t]}
    values = []
    for tokens in second:
        value = 0.0
        for j in range(2, min(m, len(tokens)) + 1):
            prefix = tuple(tokens[: j - 1])
            chosen = over.get((j, prefix), set())
            value += float(int(tokens[j - 1]) in chosen) - float(
                sum(rows.after(prefix)[t] for t in chosen)
            )
        values.append(value / (m - 1))
    z = np.asarray(values)
    n, log_term = len(z), math.log(2.0 / delta)
    return float(
        z.mean()
        - math.sqrt(2.0 * z.var(ddof=1) * log_term / n)
        - 7.0 * 2.0 * log_term / (3.0 * (n - 1))
    )


def measure(kind: str, n_completions: int = 40_000, delta: float = 1e-3) -> TokenDeviation:
    """Mean per-token TV at the drafted positions 2..max_tokens of the zoo's generator `kind` (`mutants.backend`)."""
    # torch and the served zoo: only a measurement of the zoo needs them
    from ...sequence.models import tiny_pair
    from .mutants import CHAIN, EOS, backend

    if n_completions < 100 or not 0.0 < delta < 1.0:
        raise ValueError(
            f"n_completions must be >= 100 and delta in (0, 1), got {n_completions}, {delta}"
        )
    sampling, m = sampling_from_request(CHAIN.request()), CHAIN.max_tokens
    generator = backend(kind)
    completions = [
        generator.generate(PROMPT_A, m, sampling, SEED_BASE + i).tokens
        for i in range(n_completions)
    ]
    rows = TargetRows(tiny_pair(eos_token_id=EOS)[0], PROMPT_A, sampling)
    estimate = plug_in_tv(completions, rows, m)
    half = n_completions // 2
    return TokenDeviation(
        kind,
        n_completions,
        estimate,
        lower_bound=max(
            0.0, split_lower_bound(completions[:half], completions[half:], rows, m, delta)
        ),
        upper_bound=min(1.0, estimate + math.sqrt(2.0 * math.log(1.0 / delta) / n_completions)),
        delta=delta,
    )


__all__ = ["TokenDeviation", "measure", "plug_in_tv", "split_lower_bound"]
