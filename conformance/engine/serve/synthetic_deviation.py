"""Each synthetic mode's mean per-token TV from the target at positions 1..m, measured in process by direct
simulation, with the zoo's estimator and bounds (`zoo_deviation`), vectorised over prefixes.

N completions of the mode are drawn (no HTTP; seeds from `zoo_deviation.SEED_BASE` on). At each position j the
completions are grouped by their prefix, and each group's empirical next-token law is compared with the model's
exact warped row after that prefix (teacher forcing). A position a completion never reached counts 0; a token
after an EOS (the reference has stopped: its law there is "end") counts as TV 1. With delta the confidence of
each bound:

* estimate: the plug-in mean over groups of TV(empirical, target) (`zoo_deviation.plug_in_tv`'s quantity);
* upper bound: estimate + sqrt(2 ln(1/delta) / N) (McDiarmid, as the zoo's);
* lower bound: the zoo's sample splitting (`zoo_deviation.split_lower_bound`): the first half fixes a set A per
  prefix, the second half estimates E[q(A) - p(A)] <= TV, bounded below by empirical Bernstein. Where a prefix
  has fewer than `min_group` first-half completions, A is the row's top token or its complement, the direction
  fitted on the first half per position and confidence stratum (top-1 probability < 0.5, < 0.9, >= 0.9), so
  that monotone deviations count at prefixes that never repeat. Any A fixed by the first half keeps the bound;
* exact floor: the plug-in's expectation had the mode been exact, given the same groups (binomial mean absolute
  deviations, De Moivre's formula): where prefixes rarely repeat the estimate sits near it, not near 0.

Load-dependent modes are measured under `SimulatedLoad` (an in-flight count of 2 and a companion context).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import gammaln

from ....reference.warping import SamplingParams
from .synthetic_engine import (
    DEFAULT_K,
    NO_LOAD,
    Load,
    Mode,
    SimulatedLoad,
    generate,
    mode_of,
)
from .synthetic_model import Chain, SyntheticModel
from .zoo_deviation import SEED_BASE, TokenDeviation

DEFAULT_PROMPT = (5, 9)
DEFAULT_TEMPERATURE = 0.7
#: The truncation a mode's bug needs to show, added to the default chain when that mode is measured.
PROBES: dict[str, dict[str, Any]] = {
    "truncation-skipped-verify": {"top_k": 8, "top_p": 0.9},
    "min-p-ignored-verify": {"min_p": 0.1},
}
STRATA = (0.5, 0.9)  # top-1 probability cut points of the confidence strata


@dataclass(frozen=True)
class ModeDeviation:
    """One mode's measured mean per-token TV at positions 1..m (`summary`), its exact floor, and per position."""

    summary: TokenDeviation
    exact_floor: float
    per_position: tuple[float, ...]
    per_position_floor: tuple[float, ...]
    settings: dict

    def as_dict(self) -> dict:
        return {
            **self.summary.as_dict(),
            "exact_floor": round(self.exact_floor, 4),
            "per_position": [round(x, 4) for x in self.per_position],
            "per_position_exact_floor": [round(x, 4) for x in self.per_position_floor],
            "settings": self.settings,
        }


def probe_chain(mode: str, temperature: float = DEFAULT_TEMPERATURE) -> Chain:
    """The chain a mode is measured with: `temperature`, plus the truncation its bug needs (`PROBES`)."""
    return Chain(SamplingParams(temperature, **PROBES.get(mode, {})))


def simulate(
    model: SyntheticModel,
    mode: Mode | str,
    prompt: tuple[int, ...],
    chain: Chain,
    m: int,
    n: int,
    k: int = DEFAULT_K,
    load: Load = NO_LOAD,
    seed_base: int = SEED_BASE,
) -> np.ndarray:
    """n completions (seeds seed_base, seed_base + 1, ...) as an (n, m) array of ids, -1 past each end."""
    out = np.full((n, m), -1, dtype=np.int64)
    for i in range(n):
        tokens = generate(model, mode, prompt, m, chain, seed_base + i, k=k, load=load).tokens
        out[i, : len(tokens)] = tokens
    return out


@dataclass(frozen=True)
class Prefixes:
    """Per completion and position: reached, prefix id (equal ids = equal prefixes), target row index, past EOS."""

    tokens: np.ndarray
    reached: np.ndarray
    prefix_id: np.ndarray
    row_index: np.ndarray
    ended: np.ndarray


def prefixes(model: SyntheticModel, prompt: tuple[int, ...], tokens: np.ndarray) -> Prefixes:
    """The prefix structure of `tokens` (n, m): row_index indexes `rows_of`'s table (class * V + last token)."""
    n, m = tokens.shape
    context = np.concatenate([np.tile(np.asarray(prompt, dtype=np.int64), (n, 1)), tokens], axis=1)
    last = context[:, len(prompt) - 1 : len(prompt) - 1 + m]
    before = context[:, len(prompt) - 2 : len(prompt) - 2 + m] if len(prompt) >= 2 else None
    if before is None:
        before = np.concatenate([np.full((n, 1), -1), context[:, : m - 1]], axis=1)
    classes = np.where(before >= 0, model.token_class[np.maximum(before, 0)], 0)
    row_index = classes * model.vocab + np.maximum(last, 0)
    prefix_id = np.zeros((n, m), dtype=np.int64)
    for j in range(1, m):
        _, prefix_id[:, j] = np.unique(
            prefix_id[:, j - 1] * (model.vocab + 1) + tokens[:, j - 1] + 1, return_inverse=True
        )
    ended = np.cumsum(tokens == model.eos, axis=1) - (tokens == model.eos) > 0
    return Prefixes(tokens, tokens >= 0, prefix_id, row_index, ended)


def rows_of(model: SyntheticModel, chain: Chain) -> np.ndarray:
    """The model's warped target rows, flattened to (classes * V, V) (`Prefixes.row_index` indexes them)."""
    return model.target_table(chain).reshape(-1, model.vocab)


def _position(pre: Prefixes, rows: np.ndarray, c: int, select: np.ndarray | None = None) -> dict:
    """Grouped data of column c (position c + 1) over the reached completions (and `select`)."""
    use = pre.reached[:, c] if select is None else pre.reached[:, c] & select
    group_ids, group = np.unique(pre.prefix_id[use, c], return_inverse=True)
    token, row, ended = pre.tokens[use, c], pre.row_index[use, c], pre.ended[use, c]
    return {
        "use": use,
        "group": group,
        "n_groups": len(group_ids),
        "token": token,
        "row": row,
        "ended": ended,
        "p": np.where(ended, 0.0, rows[row, token]),
    }


def plug_in_totals(pre: Prefixes, rows: np.ndarray) -> np.ndarray:
    """Per position: sum over prefix groups of n_g * TV(empirical next-token law, target row)."""
    totals = np.zeros(pre.tokens.shape[1])
    for c in range(len(totals)):
        d = _position(pre, rows, c)
        if not d["use"].any():
            continue
        sizes = np.bincount(d["group"], minlength=d["n_groups"])
        _, first, counts = np.unique(
            d["group"] * rows.shape[1] + d["token"], return_index=True, return_counts=True
        )
        pair_group, pair_p = d["group"][first], d["p"][first]
        observed_mass = np.bincount(pair_group, weights=pair_p, minlength=d["n_groups"])
        totals[c] = 0.5 * (
            np.abs(counts - sizes[pair_group] * pair_p).sum() + (sizes * (1 - observed_mass)).sum()
        )
    return totals


def binomial_mad(n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """E|X - n p| for X ~ Binomial(n, p) (De Moivre): 2 nu C(n, nu) p^nu (1 - p)^(n - nu + 1), nu = floor(np) + 1."""
    nu = np.floor(n * p) + 1
    inside = (nu <= n) & (p > 0) & (p < 1)
    p_safe, nu_safe = np.clip(p, 1e-300, 1 - 1e-16), np.minimum(nu, n)
    log_term = (
        np.log(2 * nu_safe)
        + gammaln(n + 1)
        - gammaln(nu_safe + 1)
        - gammaln(n - nu_safe + 1)
        + nu_safe * np.log(p_safe)
        + (n - nu_safe + 1) * np.log1p(-p_safe)
    )
    return np.where(inside, np.exp(log_term), 0.0)


def exact_floor_totals(pre: Prefixes, rows: np.ndarray) -> np.ndarray:
    """Per position: the plug-in total's expectation for an exact mode with the same prefix groups."""
    totals = np.zeros(pre.tokens.shape[1])
    for c in range(len(totals)):
        d = _position(pre, rows, c)
        if not d["use"].any():
            continue
        sizes = np.bincount(d["group"], minlength=d["n_groups"])
        _, first = np.unique(d["group"], return_index=True)
        live = ~d["ended"][first]
        n_g, row = sizes[live].astype(float), d["row"][first][live]
        totals[c] = 0.5 * binomial_mad(n_g[:, None], rows[row]).sum()
    return totals


def _top_token_terms(d: dict, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per completion of the column: 1[token is the row's top] - top probability, and the confidence stratum."""
    top, top_p = rows.argmax(axis=1), rows.max(axis=1)
    hit = (d["token"] == top[d["row"]]) - top_p[d["row"]]
    return hit, np.searchsorted(STRATA, top_p[d["row"]], side="right")


def _fallback(d: dict, rows: np.ndarray, in_first: np.ndarray) -> np.ndarray:
    """Per second-half completion of the column: sign * (1[top token] - top probability), the sign per
    confidence stratum fitted on the first half (+1 where it over-weights the top token)."""
    hit, stratum = _top_token_terms(d, rows)
    keep = in_first & ~d["ended"]
    drift = np.bincount(stratum[keep], weights=hit[keep], minlength=len(STRATA) + 1)
    signs = np.where(drift > 0, 1.0, -1.0)
    return (signs[stratum] * hit)[~in_first]


def split_values(
    pre: Prefixes, rows: np.ndarray, first: np.ndarray, min_group: int = 20, fallback: bool = True
) -> np.ndarray:
    """Per second-half completion: mean over positions of 1[token in A] - p(A), A fixed by the `first` half."""
    values = np.zeros(int((~first).sum()))
    second_index = np.cumsum(~first) - 1
    vocab = rows.shape[1]
    for c in range(pre.tokens.shape[1]):
        d = _position(pre, rows, c)
        in_first, keys = first[d["use"]], d["group"] * vocab + d["token"]
        sizes = np.bincount(d["group"][in_first], minlength=d["n_groups"])
        pair_keys, pair_first, counts = np.unique(
            keys[in_first], return_index=True, return_counts=True
        )
        pair_group, pair_p = d["group"][in_first][pair_first], d["p"][in_first][pair_first]
        over = counts > sizes[pair_group] * pair_p
        mass = np.bincount(pair_group[over], weights=pair_p[over], minlength=d["n_groups"])
        s = ~in_first
        g = d["group"][s]
        contribution = np.isin(keys[s], pair_keys[over]) - mass[g]
        if fallback:
            contribution = np.where(
                sizes[g] >= min_group, contribution, _fallback(d, rows, in_first)
            )
        contribution = np.where(d["ended"][s], 1.0, contribution)
        np.add.at(values, second_index[np.flatnonzero(d["use"])[s]], contribution)
    return values / pre.tokens.shape[1]


def bernstein_lower_bound(values: np.ndarray, delta: float) -> float:
    """Empirical Bernstein lower bound (Maurer & Pontil 2009) on the mean of values in [-1, 1], as the zoo's."""
    n, log_term = len(values), math.log(2.0 / delta)
    return float(
        values.mean()
        - math.sqrt(2.0 * values.var(ddof=1) * log_term / n)
        - 7.0 * 2.0 * log_term / (3.0 * (n - 1))
    )


def deviation_of(
    name: str,
    model: SyntheticModel,
    prompt: tuple[int, ...],
    chain: Chain,
    tokens: np.ndarray,
    delta: float,
    settings: dict,
) -> ModeDeviation:
    """The measured deviation of completions `tokens` (n, m) from the model's rows under `chain`."""
    n = tokens.shape[0]
    pre, rows = prefixes(model, prompt, tokens), rows_of(model, chain)
    per_position = plug_in_totals(pre, rows) / n
    floor = exact_floor_totals(pre, rows) / n
    first = np.arange(n) < n // 2
    lower = bernstein_lower_bound(split_values(pre, rows, first), delta)
    estimate, margin = float(per_position.mean()), math.sqrt(2.0 * math.log(1.0 / delta) / n)
    summary = TokenDeviation(
        name,
        n,
        estimate,
        lower_bound=max(0.0, lower),
        upper_bound=min(1.0, estimate + margin),
        delta=delta,
    )
    return ModeDeviation(
        summary, float(floor.mean()), tuple(per_position.tolist()), tuple(floor.tolist()), settings
    )


def measure_mode(
    mode: str,
    profile: str = "lm-like",
    n: int = 20_000,
    m: int = 16,
    k: int = DEFAULT_K,
    temperature: float = DEFAULT_TEMPERATURE,
    delta: float = 1e-3,
    load: Load | None = None,
    vocab: int = 256,
    model_seed: int = 0,
    prompt: tuple[int, ...] = DEFAULT_PROMPT,
    chain: Chain | None = None,
) -> ModeDeviation:
    """Mean per-token TV of `mode` at positions 1..m (under `SimulatedLoad` if it is load-dependent)."""
    if n < 100 or m < 1 or not 0.0 < delta < 1.0:
        raise ValueError(f"n must be >= 100, m >= 1 and delta in (0, 1), got {n}, {m}, {delta}")
    model, chosen = SyntheticModel(vocab, model_seed, profile), mode_of(mode)
    chain = chain or probe_chain(mode, temperature)
    load = load if load is not None else (SimulatedLoad() if chosen.load_dependent else NO_LOAD)
    tokens = simulate(model, chosen, prompt, chain, m, n, k, load)
    settings = {
        "profile": profile,
        "vocab": vocab,
        "model_seed": model_seed,
        "prompt": list(prompt),
        "m": m,
        "k": k,
        "chain": chain.describe(),
        "in_flight": load.in_flight(),
    }
    return deviation_of(mode, model, prompt, chain, tokens, delta, settings)


__all__ = [
    "PROBES",
    "ModeDeviation",
    "deviation_of",
    "measure_mode",
    "plug_in_totals",
    "probe_chain",
    "simulate",
    "split_values",
]
