"""Input checks shared by the oracle and stat_tests: every bad input becomes a ValueError naming the argument.

Why: an oracle that crashes deep inside NumPy on a malformed row teaches the user nothing; one that
silently renormalises hides the very bugs exactspec exists to find.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

#: Largest |sum(row) - 1| accepted for a float64 probability row. Rows computed in float32 and cast
#: to float64 typically sum to 1 within ~1e-7 for V <= 150,000; rational rows must sum to exactly 1.
PROB_SUM_TOL = 1e-6


def is_rational(values: Any) -> bool:
    """True if `values` (nested sequences or an object array) holds `fractions.Fraction` entries."""
    if isinstance(values, np.ndarray):
        return values.dtype == object and values.size > 0 and isinstance(values.flat[0], Fraction)
    if isinstance(values, Fraction):
        return True
    if isinstance(values, (list, tuple)) and values:
        return is_rational(values[0])
    return False


def as_prob_array(probs: Any, name: str, ndim: int | tuple[int, ...]) -> np.ndarray:
    """Return `probs` as a float64 array of probability rows along the last axis, or raise ValueError."""
    try:
        array = np.asarray(probs, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be an array of probabilities: {error}") from None
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if array.ndim not in allowed:
        raise ValueError(
            f"{name} must have {' or '.join(map(str, allowed))} dimensions, got shape {array.shape}"
        )
    if array.shape[-1] < 1:
        raise ValueError(f"{name} must have a non-empty vocabulary axis, got shape {array.shape}")
    if array.size and array.min() >= 0 and np.abs(array.sum(axis=-1) - 1.0).max() <= PROB_SUM_TOL:
        return array  # well-formed, in two passes: a NaN or -inf fails the min test, +inf or NaN the sum test
    if np.isnan(array).any():
        raise ValueError(f"{name} contains NaN")
    if np.isinf(array).any():
        raise ValueError(f"{name} contains an infinite value")
    if (array < 0).any():
        raise ValueError(f"{name} contains a negative probability (min {array.min():.3g})")
    sums = array.sum(axis=-1)
    bad = np.abs(sums - 1.0) > PROB_SUM_TOL
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0]) if array.ndim > 1 else ()
        raise ValueError(
            f"{name} rows must sum to 1 within {PROB_SUM_TOL:g}; row {where} sums to {float(sums[bad].flat[0])!r}"
        )
    return array


def as_rational_rows(probs: Any, name: str) -> list[list[Fraction]]:
    """Return a 2-D table of `Fraction` rows, each exactly summing to 1, or raise ValueError."""
    rows = [list(row) for row in probs]
    if not rows or not rows[0]:
        raise ValueError(f"{name} must be a non-empty 2-D table of Fractions")
    width = len(rows[0])
    for i, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(f"{name} row {i} has {len(row)} entries, expected {width}")
        for value in row:
            if not isinstance(value, (Fraction, int)):
                raise ValueError(
                    f"{name} mixes Fraction and non-Fraction entries (row {i}: {value!r})"
                )
            if value < 0:
                raise ValueError(f"{name} row {i} contains a negative probability {value}")
        if sum(row, Fraction(0)) != 1:
            raise ValueError(
                f"{name} row {i} must sum to exactly 1 in rational mode, sums to {sum(row, Fraction(0))}"
            )
    return [[Fraction(v) for v in row] for row in rows]


def check_k(k: Any, name: str = "k") -> int:
    """Return the number of draft tokens as an int >= 1, or raise ValueError."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"{name} must be an integer >= 1, got {k!r}")
    if k < 1:
        raise ValueError(f"{name} must be >= 1, got {k}")
    return int(k)


def check_round_shapes(
    target_probs: np.ndarray, draft_probs: np.ndarray, batched: bool = False
) -> int:
    """Check (k+1, V) target rows against (k, V) draft rows (with a leading batch axis if `batched`); return k."""
    lead = 1 if batched else 0
    if draft_probs.shape[-1] != target_probs.shape[-1]:
        raise ValueError(
            f"draft_probs and target_probs have mismatched vocabularies: "
            f"{draft_probs.shape[-1]} vs {target_probs.shape[-1]}"
        )
    if batched and draft_probs.shape[0] != target_probs.shape[0]:
        raise ValueError(
            f"draft_probs and target_probs have different batch sizes: {draft_probs.shape[0]} vs {target_probs.shape[0]}"
        )
    k = draft_probs.shape[lead]
    if k < 1:
        raise ValueError(f"draft_probs must hold k >= 1 rows, got shape {draft_probs.shape}")
    if target_probs.shape[lead] != k + 1:
        raise ValueError(
            f"target_probs must hold k+1 = {k + 1} rows (the last for the bonus token), got shape {target_probs.shape}"
        )
    return k


def _as_integers(values: Any, name: str, what: str = "integers") -> np.ndarray:
    """`values` as int64 if they are integers (integral floats accepted; booleans, NaN and fractions refused)."""
    if values is None:
        raise ValueError(f"{name} is required")
    array = np.asarray(values)
    if array.dtype.kind == "f":
        if not np.all(np.isfinite(array)) or np.any(array != np.round(array)):
            raise ValueError(f"{name} must hold {what}, got non-integral or non-finite floats")
    elif array.dtype.kind not in "iu" and not (array.size == 0 and array.dtype.kind != "b"):
        raise ValueError(f"{name} must hold {what}, got dtype {array.dtype}")
    return array.astype(np.int64)


def as_token_array(tokens: Any, name: str, shape: tuple[int, ...], vocab_size: int) -> np.ndarray:
    """Return integer token ids of the given shape, each in [0, vocab_size), or raise ValueError."""
    array = _as_integers(tokens, name, "integer token ids")
    if array.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {array.shape}")
    if array.size and (array.min() < 0 or array.max() >= vocab_size):
        raise ValueError(
            f"{name} holds a token id outside [0, {vocab_size}): min {array.min()}, max {array.max()}"
        )
    return array


def check_int_array(values: Any, name: str, lo: int = 0, hi: int | None = None) -> np.ndarray:
    """A 1-D int64 array with every value in [lo, hi) (hi=None: unbounded above), or raise ValueError."""
    array = _as_integers(values, name)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
    if array.size:
        smallest, largest = int(array.min()), int(array.max())
        if smallest < lo:
            raise ValueError(f"{name} contains {smallest}, below the allowed minimum {lo}")
        if hi is not None and largest >= hi:
            raise ValueError(f"{name} contains {largest}, out of range (must be < {hi})")
    return array


def check_counts(counts: Any, size: int, name: str = "counts") -> np.ndarray:
    """Per-category counts: 1-D, length `size`, non-negative integers."""
    array = check_int_array(counts, name, lo=0)
    if array.size != size:
        raise ValueError(f"{name} must have length {size} (one per category), got {array.size}")
    return array


def as_prob_vector(probs: Any, name: str = "p") -> np.ndarray:
    """One probability row (V,), checked by `as_prob_array` and renormalised to sum to 1 in float64."""
    if probs is None:
        raise ValueError(f"{name} is required")
    array = as_prob_array(probs, name, ndim=1)
    return array / array.sum()


def as_prob_rows(probs: Any, name: str = "probs") -> np.ndarray:
    """Probability rows (n, V), checked by `as_prob_array` and each renormalised to sum to 1 in float64."""
    if probs is None:
        raise ValueError(f"{name} is required")
    array = as_prob_array(probs, name, ndim=2)
    return array / array.sum(axis=1, keepdims=True)


def check_rate(value: Any, name: str) -> float:
    """`value` as a float strictly inside (0, 1) (a statistical test's error rate), or raise ValueError."""
    if value is None:
        raise ValueError(f"{name} is required")
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}") from None
    if not np.isfinite(rate) or not 0.0 < rate < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return rate


def check_positive_number(value: Any, name: str) -> float:
    """`value` as a finite float > 0 (a sample size, an expected count), or raise ValueError."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {value!r}") from None
    if not np.isfinite(number) or number <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return number


def check_error_rates(false_fail_rate: Any, false_pass_rate: Any) -> tuple[float, float]:
    """A test's false-fail rate and false-pass rate false_pass_rate, each in (0, 1) and summing to less than 1."""
    fail, miss = (
        check_rate(false_fail_rate, "false_fail_rate"),
        check_rate(false_pass_rate, "false_pass_rate"),
    )
    if fail + miss >= 1.0:
        raise ValueError(
            f"false_fail_rate + false_pass_rate must be < 1 (false_fail_rate={fail}, false_pass_rate={miss})"
        )
    return fail, miss


def check_rng(rng: Any) -> np.random.Generator:
    """The oracle's only randomness is a numpy Generator; refuse anything else rather than guess."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng
