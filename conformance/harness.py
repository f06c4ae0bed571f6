"""Loading an implementation (`MODULE:NAME`) and running it on a case, with every output checked
against the contract (conformance/CONTRACT.md) before any statistics are computed.

Draft tokens are drawn by the suite (x_i ~ q_i, from the suite's own stream); the implementation
gets a separate `numpy.random.Generator`, its only allowed source of randomness.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from exactspec.conformance.cases import Case

#: Largest float64 element count of one batch of inputs handed to verify_batch.
MAX_BATCH_ELEMENTS = 12_000_000
MAX_BATCH_ROUNDS = 8192


class ContractViolation(AssertionError):
    """The implementation's output breaks the interface contract (type, shape, length, range)."""


class ImplementationError(AssertionError):
    """The implementation raised while verifying a valid round."""


class ImplUnavailable(RuntimeError):
    """An adapter cannot run here (missing package, no CUDA device, signature no longer fits)."""


def load_impl(spec: str) -> Any:
    """Import NAME from MODULE for spec "MODULE:NAME"; call it if it is a zero-argument factory."""
    if ":" not in spec:
        raise ValueError(f"--impl must look like MODULE:NAME (e.g. mypkg.spec:Verifier), got {spec!r}")
    module_name, _, attr = spec.partition(":")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"--impl {spec}: cannot import module {module_name!r} ({error}); it must be importable "
                         f"from sys.path (the current directory {cwd} is on it)") from error
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"--impl {spec}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if isinstance(obj, type) or (not hasattr(obj, "verify") and callable(obj)):
        obj = obj()  # may raise ImplUnavailable: the caller reports it as a skip, with the reason
    if not callable(getattr(obj, "verify", None)):
        raise ValueError(f"--impl {spec}: {attr} (or what it returns when called) has no callable "
                         f"verify(target_probs, draft_probs, draft_tokens, rng)")
    return obj


def draw_drafts(case: Case, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, k) draft tokens, x_i ~ q_i independently, by inverse CDF (O(n log V))."""
    out = np.empty((n, case.k), dtype=np.int64)
    for i, q in enumerate(case.draft_probs):
        cum = np.cumsum(q)
        last_positive = int(np.flatnonzero(q > 0)[-1])
        idx = np.searchsorted(cum, rng.random(n) * cum[-1], side="right")
        idx = np.minimum(idx, last_positive)
        # Never return a q=0 token (possible only through rounding at a zero-width step).
        bad = q[idx] <= 0
        while bad.any():
            idx[bad] = np.searchsorted(cum, rng.random(int(bad.sum())) * cum[-1], side="right").clip(max=last_positive)
            bad = q[idx] <= 0
        out[:, i] = idx
    return out


def _check_single(out: Any, case: Case, drafts: np.ndarray) -> np.ndarray:
    try:
        import torch  # noqa: F401 -- tensors are sequences too; convert them
        if hasattr(out, "detach"):
            out = out.detach().cpu().numpy()
    except ImportError:
        pass
    if isinstance(out, (str, bytes, dict)) or out is None or not hasattr(out, "__len__"):
        raise ContractViolation(f"verify must return a sequence of int token ids, got {type(out).__name__}: {out!r:.80}")
    arr = np.asarray(out)
    if arr.ndim != 1:
        raise ContractViolation(f"verify must return a flat sequence of token ids, got shape {arr.shape}")
    if arr.size == 0:
        raise ContractViolation("verify returned no token: a round always emits 1..k+1 tokens")
    if arr.size > case.k + 1:
        raise ContractViolation(f"verify returned {arr.size} tokens for k={case.k}: at most k+1 = {case.k + 1}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ContractViolation(f"verify must return int token ids, got dtype {arr.dtype}: {arr.tolist()!r:.80}")
    return arr.astype(np.int64)


def _check_batch(out: Any, case: Case, batch: int) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ContractViolation(f"verify_batch must return (tokens (B, k+1), counts (B,)), got {type(out).__name__}")
    tokens, counts = out
    if hasattr(tokens, "detach"):
        tokens = tokens.detach().cpu().numpy()
    if hasattr(counts, "detach"):
        counts = counts.detach().cpu().numpy()
    tokens, counts = np.asarray(tokens), np.asarray(counts)
    if tokens.shape != (batch, case.k + 1):
        raise ContractViolation(f"verify_batch tokens must have shape (B, k+1) = {(batch, case.k + 1)}, got {tokens.shape}")
    if counts.shape != (batch,):
        raise ContractViolation(f"verify_batch counts must have shape (B,) = {(batch,)}, got {counts.shape}")
    if tokens.dtype.kind not in "iu" or counts.dtype.kind not in "iu":
        raise ContractViolation(f"verify_batch must return integer arrays, got {tokens.dtype} and {counts.dtype}")
    tokens, counts = tokens.astype(np.int64), counts.astype(np.int64)
    if counts.min() < 1 or counts.max() > case.k + 1:
        raise ContractViolation(f"verify_batch counts must lie in 1..k+1 = 1..{case.k + 1}, got range "
                                f"{counts.min()}..{counts.max()}")
    pad = np.arange(case.k + 1)[None, :] >= counts[:, None]
    if not np.all(tokens[pad] == -1):
        raise ContractViolation("verify_batch tokens must be padded with -1 after counts[b] entries")
    return tokens, counts


@dataclass
class Rounds:
    """Outcome of n rounds on one case: tokens (n, k+1) padded with -1, counts (n,), drafts (n, k)."""

    case: Case
    tokens: np.ndarray
    counts: np.ndarray
    drafts: np.ndarray
    seconds: float
    used_batch: bool
    errors: list = field(default_factory=list)

    @property
    def n(self) -> int:
        return int(self.counts.size)


class Harness:
    """Runs one implementation on cases. `prefer_batch=False` forces the per-round `verify` path."""

    def __init__(self, impl: Any, name: str = "impl", prefer_batch: bool = True):
        self.impl = impl
        self.name = name
        self.has_batch = prefer_batch and callable(getattr(impl, "verify_batch", None))

    def run(self, case: Case, n: int, seed: int, rng_factory: Callable[[int], np.random.Generator] | None = None,
            force_single: bool = False) -> Rounds:
        """n rounds of `case`: drafts from the suite stream seed, the impl's rng from seed+1 (or rng_factory)."""
        suite_rng = np.random.default_rng([seed, 0])
        drafts = draw_drafts(case, n, suite_rng)
        impl_rng = rng_factory(seed) if rng_factory else np.random.default_rng([seed, 1])
        tokens = np.full((n, case.k + 1), -1, dtype=np.int64)
        counts = np.zeros(n, dtype=np.int64)
        start = time.perf_counter()
        p, q = case.target_probs, case.draft_probs
        if self.has_batch and not force_single:
            per_round = (2 * case.k + 1) * case.V
            chunk = int(max(1, min(MAX_BATCH_ROUNDS, MAX_BATCH_ELEMENTS // per_round)))
            for lo in range(0, n, chunk):
                hi = min(n, lo + chunk)
                b = hi - lo
                # Read-only broadcast views: the contract forbids writing into the inputs.
                pb = np.broadcast_to(p, (b,) + p.shape)
                qb = np.broadcast_to(q, (b,) + q.shape)
                try:
                    out = self.impl.verify_batch(pb, qb, drafts[lo:hi].copy(), impl_rng)
                except AssertionError:
                    raise
                except Exception as error:
                    raise ImplementationError(f"{self.name}.verify_batch raised {type(error).__name__}: {error} "
                                              f"(case {case.name}, k={case.k}, V={case.V})") from error
                tb, cb = _check_batch(out, case, b)
                tokens[lo:hi], counts[lo:hi] = tb, cb
        else:
            for r in range(n):
                try:
                    out = self.impl.verify(p, q, drafts[r].copy(), impl_rng)
                except AssertionError:
                    raise
                except Exception as error:
                    raise ImplementationError(f"{self.name}.verify raised {type(error).__name__}: {error} "
                                              f"(case {case.name}, k={case.k}, V={case.V})") from error
                arr = _check_single(out, case, drafts[r])
                tokens[r, : arr.size] = arr
                counts[r] = arr.size
        seconds = time.perf_counter() - start
        valid = tokens[:, 0] >= 0
        oob = (tokens >= case.V) | ((tokens < 0) & (np.arange(case.k + 1)[None] < counts[:, None]))
        if oob.any():
            r = int(np.argwhere(oob)[0][0])
            raise ContractViolation(f"round {r} of case {case.name} emitted token ids outside [0, V={case.V}): "
                                    f"{tokens[r, : counts[r]].tolist()}")
        del valid
        return Rounds(case, tokens, counts, drafts, seconds, self.has_batch and not force_single)
