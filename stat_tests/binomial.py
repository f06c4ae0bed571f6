"""Exact intervals for a binomial proportion (how often a test rejected, how often a check passed)."""

from __future__ import annotations

import numpy as np
from scipy import stats


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval for k successes in n trials at `confidence`."""
    if not (isinstance(n, int) and n >= 1 and isinstance(k, int) and 0 <= k <= n):
        raise ValueError(f"k and n must be integers with 0 <= k <= n and n >= 1, got k={k!r}, n={n!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def rejection_rate(p_values: object, level: float, confidence: float = 0.95) -> tuple[int, int, float, tuple[float, float]]:
    """(rejections, trials, rate, Clopper-Pearson interval at `confidence`) of tests whose p-values fall below
    `level`: how often a calibrated test rejected."""
    pv = np.asarray(p_values, dtype=np.float64)
    k = int(np.count_nonzero(pv < level))
    return k, int(pv.size), k / pv.size, clopper_pearson(k, int(pv.size), confidence)
