"""Anytime-valid bounds on a running sum of conditional means, and the sequential tests built on them.

Setting: a stream of values X_1, X_2, ... with predictions X_hat_t fixed before X_t is seen (functions of the
past) and |X_t - X_hat_t| <= 1; m_t = E[X_t | past] is the t-th conditional mean. For lam in [0, 1) and
psi(lam) = -log(1 - lam) - lam,

    L_n(lam) = exp(lam * sum_t (X_t - m_t) - psi(lam) * sum_t (X_t - X_hat_t)^2)

is a nonnegative supermartingale: Fan's inequality exp(lam xi - psi(lam) xi^2) <= 1 + lam xi for xi >= -1,
applied to xi = X_t - X_hat_t, gives E[exp(lam (X_t - X_hat_t) - psi xi^2) | past] <= 1 + lam (m_t - X_hat_t)
<= exp(lam (m_t - X_hat_t)) (Howard, Ramdas, McAuliffe & Sekhon 2021, "empirical Bernstein"). Ville's
inequality bounds P(exists n: L_n(lam) >= 1/delta) by delta. Taking a union over the grid `LAMBDAS`,
with probability >= 1 - delta, at every n at once,

    sum_t m_t >= S_n - radius(V_n, delta),   radius(V, delta) = min_lam (log(|grid| / delta) + psi(lam) V) / lam,

where S_n = sum X_t and V_n = sum (X_t - X_hat_t)^2 (the same with -X for the upper side). The radius adapts
to the observed variance, and the statement holds at every n, so a run may look after every batch and stop
when it likes (optional stopping) without changing any rate. proofs/ARGUMENT.md, C15, states and checks it.

`assert_drift` is the test of "every |m_t| <= eta_t" on strata with a free sign per stratum; `drift_bound` the
matching anytime upper bound; `log_e_process_reject` the rejection rule of any log e-process (Ville).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..reference.validation import check_error_rates
from .result import TestResult
from .search import fewest_samples

#: The lam grid of every bound: 0.9 * 2**(-k/2), k = 0..17 (0.9 down to ~0.0028): optimal lam is about
#: sqrt(2 log(1/delta) / V), so the grid covers V from a few values to ~2e6 within a factor sqrt(2).
LAMBDAS = 0.9 * 2.0 ** (-np.arange(18) / 2.0)


def psi(lam: np.ndarray | float) -> np.ndarray:
    """psi_E(lam) = -log(1 - lam) - lam, the empirical-Bernstein cumulant bound (lam in [0, 1))."""
    lam = np.asarray(lam, dtype=np.float64)
    return -np.log1p(-lam) - lam


def radius(variance_sum: float, delta: float, multiplicity: int = 1) -> float:
    """The half-width of the anytime bound on sum m_t: min over the grid of (log(|grid| k / delta) + psi V) / lam,
    with k = `multiplicity` statements sharing delta (sides, witnesses) by a union bound."""
    if (
        not (0.0 < delta < 1.0)
        or variance_sum < 0
        or not (isinstance(multiplicity, int) and multiplicity >= 1)
    ):
        raise ValueError(
            f"need 0 < delta < 1, variance_sum >= 0, multiplicity >= 1; got {delta}, {variance_sum}, "
            f"{multiplicity}"
        )
    log_term = math.log(LAMBDAS.size * multiplicity / delta)
    return float(np.min((log_term + psi(LAMBDAS) * variance_sum) / LAMBDAS))


@dataclass(frozen=True)
class DriftStream:
    """The sums of one stratified stream: per stratum, S_s = sum of the values; one variance sum V = sum of the
    squared prediction errors; `slack` = sum of the per-value bounds eta_t on |m_t| under the null; `count` values."""

    sums: tuple[float, ...]
    variance_sum: float
    slack: float
    count: int

    @property
    def signed_total(self) -> float:
        """max over sign patterns of sum_s sign_s S_s = sum_s |S_s|: the witnessed drift's observed value."""
        return float(sum(abs(s) for s in self.sums))


def _patterns(strata: int) -> int:
    """Statements in the union: 2**(strata - 1) sign patterns (a pattern and its negation are the two sides)."""
    return 2 ** max(0, strata - 1)


def drift_log_e(stream: DriftStream) -> float:
    """log of the e-process against "every |m_t| <= eta_t": the equal-weight mixture, over sign patterns, sides and
    the lam grid, of exp(lam (pattern sum - slack) - psi(lam) V) (each a supermartingale under the null)."""
    strata = len(stream.sums)
    signs = np.array(
        [[1.0 if (j >> s) & 1 else -1.0 for s in range(strata)] for j in range(2**strata)]
    )
    totals = signs @ np.asarray(stream.sums, dtype=np.float64) if strata else np.zeros(1)
    exponents = (
        LAMBDAS[None, :] * (totals[:, None] - stream.slack)
        - psi(LAMBDAS)[None, :] * stream.variance_sum
    )
    return mixture_log(exponents.ravel())


def assert_drift(stream: DriftStream, false_fail_rate: float, name: str = "drift") -> TestResult:
    """Reject "every |m_t| <= eta_t" once the drift e-process (`drift_log_e`) reaches 1/false_fail_rate (Ville):
    anytime-valid, so the rate holds at every look and under optional stopping. Its power functions,
    `min_discrepancy_drift` / `min_num_samples_drift`, state what a run of that size rules out (`drift_bound`)."""
    a, _ = check_error_rates(false_fail_rate, 0.001)
    log_e = drift_log_e(stream) if stream.count else 0.0
    passed = not log_e_process_reject(log_e, a)
    per = max(1, stream.count)
    message = (
        f"{name}: {'PASS' if passed else 'FAIL'}: witnessed drift {stream.signed_total / per:.4g} per value "
        f"over {stream.count} values in {len(stream.sums)} strata (slack {stream.slack / per:.2g}); e-value "
        f"{_fmt_e(log_e)} against 1/{a:.3g} (anytime-valid, Ville)"
    )
    return TestResult(
        name,
        stream.signed_total,
        float(min(1.0, math.exp(-log_e))),
        stream.count,
        a,
        float("nan"),
        float("nan"),
        passed,
        message,
        {
            "strata_sums": list(stream.sums),
            "variance_sum": stream.variance_sum,
            "slack": stream.slack,
            "log_e_value": log_e,
            "sequential": "anytime-valid e-process (empirical Bernstein)",
        },
    )


def _fmt_e(log_e: float) -> str:
    return f"{math.exp(log_e):.3g}" if log_e < 700 else f"e^{log_e:.0f}"


def drift_bound(stream: DriftStream, false_pass_rate: float) -> float:
    """Anytime upper bound, holding with probability >= 1 - false_pass_rate at every look, on
    max over sign patterns of |sum_s sign_s sum_{t in s} m_t| / count, with the slack added (so it bounds the
    exact values' drift, not only the reported ones'); inf with no values."""
    _, be = check_error_rates(0.01, false_pass_rate)
    if stream.count == 0:
        return math.inf
    r = radius(stream.variance_sum, be, 2 * _patterns(len(stream.sums)))
    return (stream.signed_total + r + stream.slack) / stream.count


def min_discrepancy_drift(
    count: int, false_pass_rate: float, strata: int = 1, variance: float = 1.0 / 12.0
) -> float:
    """The per-value drift bound that `count` values of an exact stream reach (observed sums at 0, V = count *
    `variance`; U(0,1) PIT values centred have variance 1/12): what a run of that size can rule out."""
    if not (isinstance(count, int) and count >= 1):
        raise ValueError(f"count must be an integer >= 1, got {count!r}")
    _, be = check_error_rates(0.01, false_pass_rate)
    return radius(count * variance, be, 2 * _patterns(strata)) / count


def min_num_samples_drift(
    target: float,
    false_pass_rate: float,
    strata: int = 1,
    variance: float = 1.0 / 12.0,
    limit: int = 10**9,
) -> int | None:
    """Fewest values at which `min_discrepancy_drift` <= target (None past `limit`)."""
    if not 0.0 < target <= 1.0:
        raise ValueError(f"target must be in (0, 1], got {target!r}")
    return fewest_samples(
        lambda n: min_discrepancy_drift(n, false_pass_rate, strata, variance) <= target, 1, limit
    )


def log_e_process_reject(log_e: float, false_fail_rate: float) -> bool:
    """Ville's inequality: an e-process (a nonnegative supermartingale started at 1) ever reaches 1/a with
    probability <= a under the null; reject when its log reaches log(1/a)."""
    a, _ = check_error_rates(false_fail_rate, 0.001)
    return log_e >= math.log(1.0 / a)


def mixture_log(values: Sequence[float] | np.ndarray) -> float:
    """log of the mean of exp(values): the log of an equal-weight mixture of e-processes (itself one)."""
    arr = np.asarray(values, dtype=np.float64)
    top = float(arr.max())
    return top + math.log(float(np.mean(np.exp(arr - top))))


__all__ = [
    "LAMBDAS",
    "DriftStream",
    "assert_drift",
    "drift_bound",
    "drift_log_e",
    "log_e_process_reject",
    "min_discrepancy_drift",
    "min_num_samples_drift",
    "mixture_log",
    "psi",
    "radius",
]
