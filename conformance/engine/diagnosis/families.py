"""Named families of deviation, each a small parametric law built from the reference's reports, and their fit to
a table of tokens (`tokens.TokenTable`): the fitted parameter, a likelihood-ratio interval for it and the gain in
log-likelihood over "exact" (the report itself).

Every law is conditional on the token being one of the report's listed categories (the tail's many tokens have no
known law of their own), over those categories in the report's order (category 0 the most probable); a mixture
mixes the reported masses before it is conditioned, as the engine's full laws would be:

* `temperature`: q proportional to p^theta (a temperature T / theta where T was asked): the wrong temperature on one
  side, a residual too sharp or too flat; exact at theta = 1;
* `pull-to-argmax`: (1 - eps) p + eps [the top category]; exact at eps = 0;
* `flattening`: (1 - eps) p + eps uniform over the listed categories; exact at eps = 0;
* `top-k`: p restricted to its k most probable categories (a truncation applied on one side only); exact at k = N;
* `min-p`: p restricted to the categories with p >= m p_max (min-p on one side only); exact at m = 0;
* `stale-row`: (1 - eps) p + eps p_prev, p_prev the report of the prefix one token shorter (a bonus drawn from the
  wrong row, a row not advanced after a rejection, a context shifted by one); exact at eps = 0;
* with a draft file, the families of `draft_families` that read the draft's law q too: `resample-from-p`,
  `draft-law-mismatch`, `ratio-law-mismatch`, `q-from-raw-logits`, `shared-uniform`.

A fit is descriptive: it never changes a verdict or a rate. The interval is the profile-likelihood one (the grid
values within chi2(1, 0.95) / 2 nats of the best), an asymptotic 95 % interval, stated as such.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .draft_families import (
    draft_law_mismatched,
    q_from_raw_parts,
    ratio_law_mismatched,
    resample_from_p_parts,
    shared_uniform_parts,
)
from .tokens import TokenTable

#: Half the 95 % quantile of chi-square with one degree of freedom: the profile interval's drop in log-likelihood.
INTERVAL_DROP = 1.920729
#: The log of a probability 0 (a token a family gives no mass): a large finite penalty keeps sums comparable.
LOG_ZERO = -50.0


def _tempered(table: TokenTable, theta: float) -> np.ndarray:
    positive = table.listed & (table.probs > 0)
    powered = np.power(np.where(positive, table.probs, 1.0), theta)
    return table.normalised(np.where(positive, powered, 0.0))


def _pulled_parts(table: TokenTable) -> tuple[np.ndarray, np.ndarray]:
    top = np.zeros_like(table.probs)
    top[:, 0] = 1.0
    return table.probs, top


def _flattened_parts(table: TokenTable) -> tuple[np.ndarray, np.ndarray]:
    return table.probs, table.listed / table.listed.sum(axis=1, keepdims=True)


def _top_k(table: TokenTable, k: float) -> np.ndarray:
    ranks = np.arange(table.probs.shape[1])[None, :]
    return table.normalised(table.probs * (ranks < k))


def _min_p(table: TokenTable, m: float) -> np.ndarray:
    return table.normalised(table.probs * (table.probs >= m * table.probs[:, :1]))


def _stale_parts(table: TokenTable) -> tuple[np.ndarray, np.ndarray]:
    usable = (table.has_previous & (table.previous.sum(axis=1) > 0))[:, None]
    return table.probs, np.where(usable, table.previous, table.probs)


def _summed(chosen: np.ndarray) -> np.ndarray:
    """(grid,) the log-likelihood of each column of `chosen` (n, grid): the law's mass at each token, LOG_ZERO where
    it is 0 (as `log_likelihood`)."""
    return np.where(chosen > 0, np.log(np.maximum(chosen, 1e-300)), LOG_ZERO).sum(axis=0)


def _at_tokens(table: TokenTable, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """((n,), (n,)) `weights` over the listed categories at each row's token, and their row totals."""
    listed = np.where(table.listed, weights, 0.0)
    return listed[np.arange(table.size), table.category], listed.sum(axis=1)


def _mixture_grid(parts: Callable[[TokenTable], tuple[np.ndarray, np.ndarray]]):
    """The grid evaluator of the mixture family normalised((1 - eps) base + eps alternative): its log-likelihood at
    every eps at once, from each row's two masses at its token and their totals (the law itself is
    `TokenTable.mixed`)."""

    def grid_log_likelihoods(table: TokenTable, grid: np.ndarray) -> np.ndarray:
        (base, base_total), (alt, alt_total) = (_at_tokens(table, w) for w in parts(table))
        eps = grid[None, :]
        chosen = (1.0 - eps) * base[:, None] + eps * alt[:, None]  # (n, grid)
        total = (1.0 - eps) * base_total[:, None] + eps * alt_total[:, None]  # (n, grid)
        return _summed(np.divide(chosen, total, out=np.zeros_like(chosen), where=total > 0))

    return grid_log_likelihoods


def _mixture_law(parts: Callable[[TokenTable], tuple[np.ndarray, np.ndarray]]):
    """The law of the mixture family `parts` at eps (`TokenTable.mixed`)."""
    return lambda table, eps: table.mixed(*parts(table), eps)


def _mixture(
    name: str,
    parts: Callable[[TokenTable], tuple[np.ndarray, np.ndarray]],
    grid: Callable[[TokenTable], np.ndarray],
    meaning: str,
    needs_draft: bool = False,
) -> Family:
    """A mixture family normalised((1 - eps) base + eps alternative), (base, alternative) = `parts`: exact at
    eps = 0, its law and its grid evaluator both built from `parts`."""
    return Family(
        name,
        "eps",
        _mixture_law(parts),
        grid,
        lambda t: 0.0,
        meaning,
        needs_draft,
        _mixture_grid(parts),
    )


def _top_k_grid(table: TokenTable, grid: np.ndarray) -> np.ndarray:
    """(grid,) `_top_k`'s log-likelihood at every k of `grid`, from the running totals of the report's masses."""
    listed = np.where(table.listed, table.probs, 0.0)
    running = np.cumsum(listed, axis=1)  # (n, width)
    ks = grid.astype(int)
    total = running[:, np.clip(ks, 1, listed.shape[1]) - 1]  # (n, grid)
    inside = table.category[:, None] < ks[None, :]
    chosen = np.where(inside, listed[np.arange(table.size), table.category][:, None], 0.0)
    return _summed(np.divide(chosen, total, out=np.zeros_like(chosen), where=total > 0))


@dataclass(frozen=True)
class Family:
    """One named deviation: its law at a parameter value, the grid fitted over, the exact value, what it means."""

    name: str
    parameter: str
    law: Callable[[TokenTable, float], np.ndarray]
    grid: Callable[[TokenTable], np.ndarray]
    exact: Callable[[TokenTable], float]
    meaning: str
    needs_draft: bool = False  # reads the draft's law q (`TokenTable.draft`): fitted only where a draft file is given
    # the log-likelihood at every grid value at once, equal to `law`'s (a test checks it); None: `law` per value
    grid_log_likelihoods: Callable[[TokenTable, np.ndarray], np.ndarray] | None = None


FAMILIES = (
    Family(
        "temperature",
        "theta",
        _tempered,
        lambda t: np.exp(np.linspace(np.log(1 / 3), np.log(3.0), 221)),
        lambda t: 1.0,
        "the law at another temperature (q ~ p^theta): temperature applied with the wrong value",
    ),
    _mixture(
        "pull-to-argmax",
        _pulled_parts,
        lambda t: np.linspace(0.0, 0.95, 96),
        "a pull toward the most probable token",
    ),
    _mixture(
        "flattening",
        _flattened_parts,
        lambda t: np.linspace(0.0, 0.95, 96),
        "a share of uniform draws over the listed tokens",
    ),
    Family(
        "top-k",
        "k",
        _top_k,
        lambda t: np.arange(1, t.probs.shape[1] + 1, dtype=float),
        lambda t: float(t.probs.shape[1]),
        "truncation to the k most probable tokens on one side only",
        grid_log_likelihoods=_top_k_grid,
    ),
    Family(
        "min-p",
        "m",
        _min_p,
        lambda t: np.linspace(0.0, 0.5, 51),
        lambda t: 0.0,
        "min-p truncation (p >= m p_max) on one side only",
    ),
    _mixture(
        "stale-row",
        _stale_parts,
        lambda t: np.linspace(0.0, 1.0, 101),
        "a share of tokens drawn from the previous position's law (a bonus or correction from the wrong row, a "
        "context shifted by one)",
    ),
    _mixture(
        "resample-from-p",
        resample_from_p_parts,
        lambda t: np.linspace(0.0, 1.0, 101),
        "at a rejection the correction drawn from p instead of the residual norm(max(0, p - q)) (eps: the share "
        "of tokens at drafted positions)",
        needs_draft=True,
    ),
    Family(
        "draft-law-mismatch",
        "theta",
        draft_law_mismatched,
        lambda t: np.exp(np.linspace(np.log(1 / 3), np.log(3.0), 121)),
        lambda t: 1.0,
        "drafts drawn from another law than the q in the acceptance ratio (q^theta: the draft at another "
        "temperature, or q from other logits than those sampled)",
        needs_draft=True,
    ),
    Family(
        "ratio-law-mismatch",
        "theta",
        ratio_law_mismatched,
        lambda t: np.exp(np.linspace(np.log(1 / 3), np.log(3.0), 121)),
        lambda t: 1.0,
        "drafts drawn from q but the acceptance ratio and the residual read q^theta (q taken from other logits "
        "than those sampled, such as the raw logits where the drafts were warped)",
        needs_draft=True,
    ),
    _mixture(
        "q-from-raw-logits",
        q_from_raw_parts,
        lambda t: np.linspace(0.0, 1.0, 101),
        "drafts drawn from the warped q but the acceptance ratio and the residual reading the draft's raw "
        "softmax (eps: the share of tokens at drafted positions)",
        needs_draft=True,
    ),
    _mixture(
        "shared-uniform",
        shared_uniform_parts,
        lambda t: np.linspace(0.0, 1.0, 101),
        "the acceptance uniform reused to draw the correction by inverse CDF (eps: the share of tokens at "
        "drafted positions)",
        needs_draft=True,
    ),
)


def log_likelihood(table: TokenTable, law: np.ndarray) -> float:
    """Sum over the table's tokens of log law[token's category] (LOG_ZERO where the law gives 0)."""
    if not table.size:
        return 0.0
    chosen = law[np.arange(table.size), table.category]
    return float(np.where(chosen > 0, np.log(np.maximum(chosen, 1e-300)), LOG_ZERO).sum())


@dataclass(frozen=True)
class Fit:
    """A family fitted to a table: the best grid value, its profile interval and the gain over exact (nats)."""

    family: str
    parameter: str
    value: float
    low: float
    high: float
    exact: float
    gain: float  # log-likelihood at the best value minus at the exact one (>= 0)
    tokens: int

    def to_dict(self) -> dict:
        return {
            "family": self.family,
            "parameter": self.parameter,
            "value": self.value,
            "interval": [self.low, self.high],
            "exact": self.exact,
            "gain_nats": round(self.gain, 3),
            "tokens": self.tokens,
        }


def grid_log_likelihoods(family: Family, table: TokenTable, grid: np.ndarray) -> np.ndarray:
    """(grid,) the log-likelihood of `table`'s tokens under the family's law at each value of `grid` (its grid
    evaluator where it has one, else its law at each value)."""
    if family.grid_log_likelihoods is not None:
        return family.grid_log_likelihoods(table, np.asarray(grid, dtype=float))
    return np.array([log_likelihood(table, family.law(table, float(v))) for v in grid])


def fit(family: Family, table: TokenTable) -> Fit:
    """The family's maximum-likelihood grid value on `table`, its profile interval and its gain over exact."""
    grid, exact = family.grid(table), family.exact(table)
    if not table.size:
        return Fit(family.name, family.parameter, exact, exact, exact, exact, 0.0, 0)
    # the grid and the exact value in one evaluation (a family's parts are built once)
    evaluated = grid_log_likelihoods(family, table, np.append(grid, exact))
    values, at_exact = evaluated[:-1], float(evaluated[-1])
    best = int(np.argmax(values))
    inside = grid[values >= values[best] - INTERVAL_DROP]
    return Fit(
        family.name,
        family.parameter,
        float(grid[best]),
        float(inside.min()),
        float(inside.max()),
        exact,
        max(0.0, float(values[best] - at_exact)),
        table.size,
    )


def fitted_families(table: TokenTable) -> tuple[Family, ...]:
    """The families `table` can be fitted to: those that read q only when a row has the draft's report."""
    has_draft = bool(table.has_draft.any())
    return tuple(family for family in FAMILIES if has_draft or not family.needs_draft)


def fit_all(table: TokenTable) -> list[Fit]:
    """Every family `table` can be fitted to (`fitted_families`), best gain first."""
    return sorted((fit(family, table) for family in fitted_families(table)), key=lambda f: -f.gain)


def family_named(name: str) -> Family:
    """The family called `name` (ValueError listing the names otherwise)."""
    for family in FAMILIES:
        if family.name == name:
            return family
    raise ValueError(f"no deviation family {name!r}; known: {', '.join(f.name for f in FAMILIES)}")


__all__ = [
    "FAMILIES",
    "INTERVAL_DROP",
    "Family",
    "Fit",
    "family_named",
    "fit",
    "fit_all",
    "fitted_families",
    "grid_log_likelihoods",
    "log_likelihood",
]
