"""Loading an implementation (`MODULE:NAME`) and running it on a case, with every output checked
against the contract (conformance/CONTRACT.md) before any statistics are computed.

Draft tokens are drawn by the suite (x_i ~ q_i, from the suite's own stream); the implementation
gets a separate `numpy.random.Generator`, its only allowed source of randomness.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..core.contract import token_ids
from .cases import Case
from ..loader import PASS_THROUGH, implementation_error, load_adapter
from ...errors import ContractViolation, ImplementationError, ImplUnavailable
from ...reference.sampling import inverse_cdf

__all__ = [
    "ContractViolation",
    "Harness",
    "ImplUnavailable",
    "ImplementationError",
    "Rounds",
    "draw_drafts",
    "load_impl",
]

#: Largest float64 element count of one batch of inputs handed to verify_batch.
MAX_BATCH_ELEMENTS = 12_000_000
MAX_BATCH_ROUNDS = 8192


def load_impl(spec: str) -> Any:
    """The rule-level adapter for spec "MODULE:NAME" (a class or zero-argument factory is called).

    AdapterLoadError (a ValueError) when it cannot be loaded or offers no verify; ImplUnavailable propagates."""
    return load_adapter(spec, level="rule").adapter


def draw_drafts(
    case: Case, n: int, rng: np.random.Generator, members: np.ndarray | None = None
) -> np.ndarray:
    """(n, k) draft tokens, x_i ~ q_i independently, by the oracle's guarded inverse CDF (O(n log V)); with
    `members` (pooled cases) round r's q rows are those of pool member members[r]."""
    out = np.empty((n, case.k), dtype=np.int64)
    if members is None:
        for i, q in enumerate(case.draft_probs):
            out[:, i] = inverse_cdf(q, rng.random(n))
        return out
    for i in range(case.k):
        u = rng.random(n)
        for m in range(len(case.pooled[1])):
            sel = members == m
            out[sel, i] = inverse_cdf(case.pooled[1][m, i], u[sel])
    return out


def draw_members(case: Case, n: int, seed: int) -> np.ndarray | None:
    """Pool member of each round (uniform, from the suite's own stream), or None for fixed-row cases."""
    if not case.varying:
        return None
    return np.random.default_rng([seed, 2]).integers(len(case.pooled[0]), size=n)


def _check_batch(out: Any, case: Case, batch: int) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ContractViolation(
            f"verify_batch must return (tokens (B, k+1), counts (B,)), got {type(out).__name__}"
        )
    tokens, counts = out
    if hasattr(tokens, "detach"):
        tokens = tokens.detach().cpu().numpy()
    if hasattr(counts, "detach"):
        counts = counts.detach().cpu().numpy()
    tokens, counts = np.asarray(tokens), np.asarray(counts)
    if tokens.shape != (batch, case.k + 1):
        raise ContractViolation(
            f"verify_batch tokens must have shape (B, k+1) = {(batch, case.k + 1)}, got {tokens.shape}"
        )
    if counts.shape != (batch,):
        raise ContractViolation(
            f"verify_batch counts must have shape (B,) = {(batch,)}, got {counts.shape}"
        )
    if tokens.dtype.kind not in "iu" or counts.dtype.kind not in "iu":
        raise ContractViolation(
            f"verify_batch must return integer arrays, got {tokens.dtype} and {counts.dtype}"
        )
    tokens, counts = tokens.astype(np.int64), counts.astype(np.int64)
    if counts.min() < 1 or counts.max() > case.k + 1:
        raise ContractViolation(
            f"verify_batch counts must lie in 1..k+1 = 1..{case.k + 1}, got range "
            f"{counts.min()}..{counts.max()}"
        )
    pad = np.arange(case.k + 1)[None, :] >= counts[:, None]
    if not np.all(tokens[pad] == -1):
        raise ContractViolation(
            "verify_batch tokens must be padded with -1 after counts[b] entries"
        )
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
    members: np.ndarray | None = None  # pooled cases: the pool member of each round

    @property
    def n(self) -> int:
        return int(self.counts.size)

    def target_rows(self, position: int, select: np.ndarray | None = None) -> np.ndarray:
        """Target row of `position` (0-based) for each selected round: (n_sel, V), or (V,) for fixed rows."""
        if self.members is None:
            return self.case.target_probs[position]
        members = self.members if select is None else self.members[select]
        return self.case.pooled[0][members, position]

    def target_at(self, tokens: np.ndarray) -> np.ndarray:
        """p_j(tokens[r, j]) with each round's own rows; tokens (n, k+1) of valid ids."""
        cols = np.arange(self.case.k + 1)[None, :]
        if self.members is None:
            return self.case.target_probs[cols, tokens]
        return self.case.pooled[0][self.members[:, None], cols, tokens]


class Harness:
    """Runs one implementation on cases. `prefer_batch=False` forces the per-round `verify` path.

    Whatever the implementation raises (AssertionError included) becomes an ImplementationError with the
    case, the exception type and its traceback text; output that breaks the contract a ContractViolation."""

    def __init__(self, impl: Any, name: str = "impl", prefer_batch: bool = True):
        self.impl = impl
        self.name = name
        self.has_batch = prefer_batch and callable(getattr(impl, "verify_batch", None))

    def _call(self, method: str, case: Case, *args: Any) -> Any:
        """self.impl.<method>(*args), any exception turned into an ImplementationError naming the case."""
        try:
            return getattr(self.impl, method)(*args)
        except PASS_THROUGH:
            raise
        except Exception as error:  # noqa: BLE001 -- the implementation's failure, never the run's crash
            raise implementation_error(
                error, f"{self.name}.{method}", f"case {case.name}, k={case.k}, V={case.V}"
            ) from error

    def run(
        self,
        case: Case,
        n: int,
        seed: int,
        rng_factory: Callable[[int], np.random.Generator] | None = None,
        force_single: bool = False,
    ) -> Rounds:
        """n rounds of `case`: drafts from the suite stream seed, the impl's rng from seed+1 (or rng_factory)."""
        suite_rng = np.random.default_rng([seed, 0])
        members = draw_members(case, n, seed)
        drafts = draw_drafts(case, n, suite_rng, members)
        impl_rng = rng_factory(seed) if rng_factory else np.random.default_rng([seed, 1])
        tokens = np.full((n, case.k + 1), -1, dtype=np.int64)
        counts = np.zeros(n, dtype=np.int64)
        batched = self.has_batch and not force_single
        start = time.perf_counter()
        if batched:
            self._run_batched(case, drafts, impl_rng, tokens, counts, members)
        else:
            self._run_single(case, drafts, impl_rng, tokens, counts, members)
        seconds = time.perf_counter() - start
        _check_token_range(case, tokens, counts)
        return Rounds(case, tokens, counts, drafts, seconds, batched, members=members)

    def _run_batched(
        self,
        case: Case,
        drafts: np.ndarray,
        impl_rng: np.random.Generator,
        tokens: np.ndarray,
        counts: np.ndarray,
        members: np.ndarray | None = None,
    ) -> None:
        p, q = case.target_probs, case.draft_probs
        per_round = (2 * case.k + 1) * case.V
        chunk = int(max(1, min(MAX_BATCH_ROUNDS, MAX_BATCH_ELEMENTS // per_round)))
        for lo in range(0, drafts.shape[0], chunk):
            hi = min(drafts.shape[0], lo + chunk)
            b = hi - lo
            # Read-only broadcast views: the contract forbids writing into the inputs.
            pb = (
                np.broadcast_to(p, (b,) + p.shape)
                if members is None
                else _read_only(case.pooled[0][members[lo:hi]])
            )
            qb = (
                np.broadcast_to(q, (b,) + q.shape)
                if members is None
                else _read_only(case.pooled[1][members[lo:hi]])
            )
            out = self._call("verify_batch", case, pb, qb, drafts[lo:hi].copy(), impl_rng)
            tokens[lo:hi], counts[lo:hi] = _check_batch(out, case, b)

    def _run_single(
        self,
        case: Case,
        drafts: np.ndarray,
        impl_rng: np.random.Generator,
        tokens: np.ndarray,
        counts: np.ndarray,
        members: np.ndarray | None = None,
    ) -> None:
        p, q = case.target_probs, case.draft_probs
        for r in range(drafts.shape[0]):
            if members is not None:
                p, q = case.pooled[0][members[r]], case.pooled[1][members[r]]
            out = self._call("verify", case, p, q, drafts[r].copy(), impl_rng)
            arr = token_ids(out, "verify", case.k + 1, f"at most k+1 for k = {case.k}")
            tokens[r, : arr.size] = arr
            counts[r] = arr.size


def _read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _check_token_range(case: Case, tokens: np.ndarray, counts: np.ndarray) -> None:
    """Every emitted id (the first counts[r] of row r) must lie in [0, V)."""
    oob = (tokens >= case.V) | ((tokens < 0) & (np.arange(case.k + 1)[None] < counts[:, None]))
    if oob.any():
        r = int(np.argwhere(oob)[0][0])
        raise ContractViolation(
            f"round {r} of case {case.name} emitted token ids outside [0, V={case.V}): "
            f"{tokens[r, : counts[r]].tolist()}"
        )
