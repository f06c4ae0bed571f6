"""What every level checks of an implementation's output before any statistics, in one place: a round's
emitted token ids, determinism for a fixed seed, and the guard that turns a contract violation or an
exception of the implementation into a failed record instead of a crash of the run."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import numpy as np

from ...errors import ContractViolation, ImplementationError
from .records import CheckRecord, hard_failure, hard_result

T = TypeVar("T")


def token_ids(out: Any, method: str, max_tokens: int, limit: str = "") -> np.ndarray:
    """`out` (a sequence or a torch tensor) as int64 token ids, 1..max_tokens of them; ContractViolation naming
    `method` (and `limit`, what bounds the count) otherwise. Ids are range-checked by the caller, which knows V."""
    # a torch tensor (torch is imported already if one exists): convert it
    if hasattr(out, "detach"):
        out = out.detach().cpu().numpy()
    if isinstance(out, (str, bytes, dict)) or out is None or not hasattr(out, "__len__"):
        raise ContractViolation(
            f"{method} must return a sequence of int token ids, got {type(out).__name__}: "
            f"{out!r:.80}"
        )
    arr = np.asarray(out)
    if arr.ndim != 1:
        raise ContractViolation(
            f"{method} must return a flat sequence of token ids, got shape {arr.shape}"
        )
    if arr.size == 0:
        raise ContractViolation(
            f"{method} returned no token: a round always emits 1..{max_tokens} tokens"
        )
    if arr.size > max_tokens:
        raise ContractViolation(
            f"{method} returned {arr.size} tokens: a round emits 1..{max_tokens} token ids"
            f"{f' ({limit})' if limit else ''}: {arr.tolist()!r:.80}"
        )
    if arr.dtype.kind not in "iu":
        if not (
            arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))
        ):
            raise ContractViolation(
                f"{method} must return int token ids, got dtype {arr.dtype}: {arr.tolist()!r:.80}"
            )
    return arr.astype(np.int64)


def determinism_check(
    impl: str, case: str, first: np.ndarray, second: np.ndarray, n: int
) -> CheckRecord:
    """Two runs with the same seed (and inputs) must emit the same tokens: the rng is the only randomness."""
    same = first.shape == second.shape and bool(np.array_equal(first, second))
    if same:
        msg = f"determinism: PASS: {n} rounds repeated with the same seed give identical output"
    else:
        rows = (
            np.flatnonzero((first != second).reshape(first.shape[0], -1).any(axis=1))
            if first.shape == second.shape
            else [0]
        )
        r = int(rows[0])
        msg = (
            f"determinism: FAIL: same seed, different output (round {r}: {first[r].tolist()} vs "
            f"{second[r].tolist()}); the rng argument must be the only source of randomness"
        )
    return CheckRecord(
        impl, case, "determinism", "contract", hard_result("determinism", same, n, msg)
    )


def invariant_record(
    impl: str, case: str, label: str, n: int, problems: list[str], holds: str
) -> CheckRecord:
    """The hard invariant record of `label` over n rounds: passed when `problems` is empty (then it says what
    `holds`), else failed with every problem found."""
    ok = not problems
    message = (
        f"{label}: PASS: {n} rounds, {holds}" if ok else f"{label}: FAIL: " + "; ".join(problems)
    )
    return CheckRecord(impl, case, label, "invariant", hard_result(label, ok, n, message))


def guard(
    impl: str, case: str, check: str, fn: Callable[[], T]
) -> tuple[T | None, CheckRecord | None]:
    """(fn(), None), or (None, a failed contract record named `check`) when the implementation broke the
    contract or raised (its exception type and traceback in the record's details)."""
    try:
        return fn(), None
    except ContractViolation as error:
        return None, hard_failure(
            impl, case, check, "contract", f"{check}: FAIL: contract violation: {error}"
        )
    except ImplementationError as error:
        details = {"exception": error.exc_type, "traceback": error.traceback_text}
        return None, hard_failure(impl, case, check, "contract", f"{check}: FAIL: {error}", details)


def failed(record: CheckRecord | None) -> CheckRecord:
    """The record of a `guard` that returned no value (guard returns (value, None) or (None, record))."""
    assert record is not None, "guard returned neither a value nor a failed record"
    return record
