"""Expected tokens per round, the law of the number of emitted tokens, and the walltime model.

With acceptance rate alpha_i at draft position i (alpha = sum min(p, q)), one round emits N tokens with
P(N = n) = (prod_{i<n} alpha_i)(1 - alpha_n) for n <= k and P(N = k+1) = prod_{i<=k} alpha_i
(Leviathan et al. 2023, section 3.1, for constant alpha; the per-position form treats the alpha_i as
the acceptance rates of successive positions). The walltime improvement factor of Leviathan et al.
(Theorem 3.8) is E[N] / (c k + 1), c = draft cost / target cost; `improvement_factor` generalises the
1 to a measured verification cost v(k+1) = time(target scores k+1 tokens) / time(target scores 1).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .validation import check_k

#: Acceptance rates computed in float64 as sum(min(p, q)) can exceed 1 by rounding; up to this much
#: above 1 is accepted and clipped to 1.
RATE_ROUNDING_TOL = 1e-9


def _check_acceptance_rate(acceptance_rate: Any, name: str = "acceptance_rate") -> float:
    if isinstance(acceptance_rate, bool) or not isinstance(
        acceptance_rate, (int, float, np.floating, np.integer)
    ):
        raise ValueError(f"{name} must be a number in [0, 1], got {acceptance_rate!r}")
    if not np.isfinite(acceptance_rate) or not (0 <= acceptance_rate <= 1 + RATE_ROUNDING_TOL):
        raise ValueError(f"{name} must be in [0, 1], got {acceptance_rate!r}")
    return min(float(acceptance_rate), 1.0)


def _check_acceptance_rates(acceptance_rates: Any) -> np.ndarray:
    array = np.asarray(acceptance_rates, dtype=np.float64)
    if array.ndim != 1 or array.size < 1:
        raise ValueError(
            f"acceptance_rates must be a non-empty 1-D sequence of per-position acceptance rates, got shape {array.shape}"
        )
    if np.isnan(array).any() or (array < 0).any() or (array > 1 + RATE_ROUNDING_TOL).any():
        raise ValueError(f"acceptance_rates must all lie in [0, 1], got {array.tolist()}")
    return np.minimum(array, 1.0)


def tokens_law_per_position(acceptance_rates: Sequence[float] | np.ndarray) -> np.ndarray:
    """P(N = n), n = 1..k+1, for per-position acceptance rates alpha_1..alpha_k."""
    a = _check_acceptance_rates(acceptance_rates)
    survive = np.concatenate([[1.0], np.cumprod(a)])  # P(N > n - 1) = prod_{i<n} alpha_i
    law = survive.copy()
    law[:-1] *= 1.0 - a
    return law


def tokens_law(acceptance_rate: float, k: int) -> np.ndarray:
    """P(N = n), n = 1..k+1: a^(n-1)(1 - a) for n <= k and a^k for n = k+1 (a = acceptance_rate)."""
    return tokens_law_per_position([_check_acceptance_rate(acceptance_rate)] * check_k(k))


def expected_tokens_per_position(acceptance_rates: Sequence[float] | np.ndarray) -> float:
    """E[N] = 1 + sum_j prod_{i<=j} alpha_i for per-position acceptance rates."""
    return float(expected_tokens_every_k(acceptance_rates)[-1])


def expected_tokens_every_k(acceptance_rates: Sequence[float] | np.ndarray) -> np.ndarray:
    """E[N] when drafting k = 0, 1, ..., len(acceptance_rates) tokens (positions alpha_1..alpha_k), in one pass:
    a k policy compares every k each round."""
    return np.asarray(
        expected_tokens_every_k_unchecked(_check_acceptance_rates(acceptance_rates).tolist())
    )


def expected_tokens_every_k_unchecked(acceptance_rates: list[float]) -> list[float]:
    """`expected_tokens_every_k` on rates the caller guarantees lie in [0, 1], as a plain list: a k policy
    calls it twice per decoding round, where the checks and NumPy's per-call overhead cost more than the sum."""
    tokens, survive, total = [1.0], 1.0, 1.0
    for rate in acceptance_rates:
        survive *= rate
        total += survive
        tokens.append(total)
    return tokens


def expected_tokens(acceptance_rate: float, k: int) -> float:
    """E[N] = (1 - a^(k+1)) / (1 - a) for a = acceptance_rate, and k + 1 at a = 1."""
    acceptance_rate, k = _check_acceptance_rate(acceptance_rate), check_k(k)
    if acceptance_rate == 1.0:
        return float(k + 1)
    return (1.0 - acceptance_rate ** (k + 1)) / (1.0 - acceptance_rate)


def tokens_mean_variance(law: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Mean and variance of N from its law over n = 1..len(law)."""
    probs = np.asarray(law, dtype=np.float64)
    n = np.arange(1, probs.size + 1)
    mean = float((n * probs).sum())
    return mean, float((n**2 * probs).sum() - mean**2)


def tokens_variance(acceptance_rate: float, k: int) -> float:
    """Var[N] for a constant acceptance rate and k draft tokens."""
    return tokens_mean_variance(tokens_law(acceptance_rate, k))[1]


VerifyCost = Callable[[int], float] | Mapping[int, float] | Sequence[float] | None


def verification_cost(verify_cost: VerifyCost, n_tokens: int) -> float:
    """v(n): cost of the target scoring n tokens relative to 1; None means Leviathan's v = 1.

    `verify_cost` may be a callable n -> v(n), a mapping {n: v(n)}, or a sequence indexed by n.
    """
    if verify_cost is None:
        return 1.0
    try:
        value = verify_cost(n_tokens) if callable(verify_cost) else verify_cost[n_tokens]
    except (KeyError, IndexError):
        raise ValueError(f"verify_cost has no entry for {n_tokens} tokens") from None
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"verify_cost({n_tokens}) must be a positive number, got {value!r}")
    return value


def improvement_factor(
    acceptance_rate: float, k: int, c: float, verify_cost: VerifyCost = None
) -> float:
    """Expected speedup over plain decoding: E[N] / (c k + v(k+1)) (Leviathan et al. Thm 3.8 when v = 1)."""
    if (
        isinstance(c, bool)
        or not isinstance(c, (int, float, np.floating))
        or not np.isfinite(c)
        or c < 0
    ):
        raise ValueError(f"c (draft cost / target cost) must be a finite number >= 0, got {c!r}")
    k = check_k(k)
    return expected_tokens(acceptance_rate, k) / (c * k + verification_cost(verify_cost, k + 1))


def optimal_k(
    acceptance_rate: float, c: float, verify_cost: VerifyCost = None, k_max: int = 32
) -> tuple[int, float]:
    """The k in 1..k_max maximising the improvement factor, and that factor.

    A factor below 1 means speculative decoding does not pay at these (acceptance_rate, c, v): decode plainly.
    """
    k_max = check_k(k_max, "k_max")
    best = max(
        range(1, k_max + 1), key=lambda k: improvement_factor(acceptance_rate, k, c, verify_cost)
    )
    return best, improvement_factor(acceptance_rate, best, c, verify_cost)
