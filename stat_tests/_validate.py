"""Input validation shared by every test: fail early with a ValueError naming the argument."""
from __future__ import annotations

import numpy as np

PROB_SUM_TOL = 1e-6


def check_rate(value, name: str) -> float:
    """Return ``value`` as float if it lies strictly inside (0, 1)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}") from None
    if not np.isfinite(v) or not (0.0 < v < 1.0):
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return v


def check_alpha_beta(alpha, beta) -> tuple[float, float]:
    a = check_rate(alpha, "alpha")
    b = check_rate(beta, "beta")
    if a + b >= 1.0:
        raise ValueError(f"alpha + beta must be < 1 (alpha={a}, beta={b})")
    return a, b


def check_probs(p, name: str = "p") -> np.ndarray:
    """A 1-D probability vector: finite, non-negative, summing to 1 within 1e-6; returned renormalised."""
    if p is None:
        raise ValueError(f"{name} is required")
    arr = np.asarray(p, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size < 1:
        raise ValueError(f"{name} must not be empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if np.any(arr < 0):
        raise ValueError(f"{name} contains negative probabilities (min {arr.min()!r})")
    s = arr.sum()
    if abs(s - 1.0) > PROB_SUM_TOL:
        raise ValueError(f"{name} must sum to 1 within {PROB_SUM_TOL}, sums to {s!r}")
    return arr / s


def check_prob_rows(probs, name: str = "probs") -> np.ndarray:
    """A 2-D (n, V) array whose rows are probability vectors; returned row-renormalised."""
    arr = np.asarray(probs, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n, V), got shape {arr.shape}")
    if arr.shape[1] < 1:
        raise ValueError(f"{name} must have at least one column")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if np.any(arr < 0):
        raise ValueError(f"{name} contains negative probabilities")
    s = arr.sum(axis=1)
    bad = np.flatnonzero(np.abs(s - 1.0) > PROB_SUM_TOL)
    if bad.size:
        raise ValueError(f"{name} row {bad[0]} sums to {s[bad[0]]!r}, not 1 within {PROB_SUM_TOL}")
    return arr / s[:, None]


def check_int_array(x, name: str, lo: int = 0, hi: int | None = None) -> np.ndarray:
    """1-D integer array with values in [lo, hi) (hi=None: unbounded above)."""
    if x is None:
        raise ValueError(f"{name} is required")
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.dtype.kind == "b":
        raise ValueError(f"{name} must be integers, got booleans")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contains NaN or infinite values")
        if np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must contain integers")
        arr = arr.astype(np.int64)
    elif arr.dtype.kind not in "iu":
        if arr.size == 0:
            arr = arr.astype(np.int64)
        else:
            raise ValueError(f"{name} must be an integer array, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size:
        mn, mx = int(arr.min()), int(arr.max())
        if mn < lo:
            raise ValueError(f"{name} contains {mn}, below the allowed minimum {lo}")
        if hi is not None and mx >= hi:
            raise ValueError(f"{name} contains {mx}, out of range (must be < {hi})")
    return arr


def check_counts(counts, size: int, name: str = "counts") -> np.ndarray:
    """Per-category counts: 1-D, length ``size``, non-negative integers."""
    arr = check_int_array(counts, name, lo=0)
    if arr.size != size:
        raise ValueError(f"{name} must have length {size} (one per category), got {arr.size}")
    return arr
