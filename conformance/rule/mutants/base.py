"""A batched NumPy skeleton of the verification rule with one method per step, so each mutant
overrides exactly the step its real-world bug breaks. `Rule` itself is the standard rule."""

from __future__ import annotations

import numpy as np

from ....outcomes import Verdict
from ....reference.laws import unchecked_residual
from ....reference.rules import pack_round
from ....reference.sampling import inverse_cdf


def leading_true(flags: np.ndarray) -> np.ndarray:
    """Per row, how many leading entries are True (the accepted prefix length)."""
    return np.cumprod(flags, axis=1).sum(axis=1)


def normalise(r: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Rows of `r` divided by their mass; `fallback` where the mass is 0 (mutants' own weightings)."""
    mass = r.sum(axis=-1, keepdims=True)
    return np.where(mass > 0, r / np.where(mass > 0, mass, 1.0), fallback)


class Rule:
    """The standard rule (Leviathan et al. 2023, Alg. 1): override a step to make a mutant."""

    #: "mutant" or "valid_variant" (`core.mutants.MUTANT` / `VALID_VARIANT`)
    kind: str = "valid_variant"
    #: The real bug (or valid technique) this models, with where it was seen.
    models: str = "the standard rule"
    #: Verdicts the suite must reach: any of these counts as a correct classification.
    expected: tuple[str, ...] = (Verdict.CERTIFIED,)
    #: Float type of every probability the driver computes with.
    dtype = np.float64

    # --- steps -----------------------------------------------------------------------------
    def ratio_q(self, q: np.ndarray) -> np.ndarray:
        """The draft probabilities used in the ratio and the residual."""
        return q

    def uniforms(self, rng: np.random.Generator, batch: int, k: int) -> np.ndarray:
        return rng.random((batch, k))

    def accept(self, u: np.ndarray, p_x: np.ndarray, q_x: np.ndarray) -> np.ndarray:
        return u < p_x / q_x

    def residual(self, p_row: np.ndarray, q_row: np.ndarray) -> np.ndarray:
        return unchecked_residual(p_row, q_row)

    def residual_rows(self, n_acc: np.ndarray, k: int) -> np.ndarray:
        """Row index of (p, q) used for the residual after a rejection at position n_acc."""
        return np.minimum(n_acc, k - 1)

    def bonus(self, p: np.ndarray, q: np.ndarray, at: np.ndarray) -> np.ndarray:
        k = q.shape[1]
        return p[at, k]

    def final_uniform(self, rng, u: np.ndarray, n_acc: np.ndarray) -> np.ndarray:
        return rng.random(u.shape[0])

    def sample(self, dist: np.ndarray, u: np.ndarray) -> np.ndarray:
        return inverse_cdf(dist, u)

    def emit_bonus(self) -> bool:
        return True

    # --- driver ----------------------------------------------------------------------------
    def verify_batch(self, target_probs, draft_probs, draft_tokens, rng):
        p = np.asarray(target_probs, dtype=self.dtype)
        q = np.asarray(draft_probs, dtype=self.dtype)
        x = np.asarray(draft_tokens, dtype=np.int64)
        batch, k = x.shape
        at = np.arange(batch)
        qr = self.ratio_q(q)
        rows, cols = at[:, None], np.arange(k)[None, :]
        p_x, q_x = p[rows, cols, x], qr[rows, cols, x]
        u = self.uniforms(rng, batch, k)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            acc = self.accept(u, p_x, q_x)
        n_acc = leading_true(acc)
        rejected = n_acc < k
        ri = self.residual_rows(n_acc, k)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            res = self.residual(p[at, np.minimum(ri, k)], qr[at, np.minimum(ri, k - 1)])
        final = np.where(rejected[:, None], res, self.bonus(p, q, at))
        tok = self.sample(final, self.final_uniform(rng, u, n_acc))
        out, counts = pack_round(n_acc, x, tok)
        if not self.emit_bonus():
            full = ~rejected
            out[full, k] = -1
            counts = np.where(full, k, counts)
        return out, counts

    def verify(self, target_probs, draft_probs, draft_tokens, rng):
        tokens, counts = self.verify_batch(
            np.asarray(target_probs)[None],
            np.asarray(draft_probs)[None],
            np.asarray(draft_tokens)[None],
            rng,
        )
        return tokens[0, : counts[0]].tolist()
