"""Adapter for Hugging Face transformers' private `_speculative_sampling`
(`transformers.generation.utils`), the verification step of assisted generation.

It takes logits, not probabilities, and draws its randomness from torch's global RNG:
``torch.rand_like`` for the acceptance coins and ``torch.multinomial`` for the final token. To obey
the contract (the suite's `rng` is the only randomness) the adapter

- passes ``log p`` and ``log q`` as float32 logits (softmax gives p and q back up to float32 rounding;
  -inf where a probability is 0), the dtype assisted generation runs in;
- routes ``torch.rand_like`` (the acceptance coins) through `rng` while the function runs, so the
  suite's adversarial Generator reaches the comparison ``r_i <= probability_ratio``;
- seeds torch's global generator from `rng` for ``torch.multinomial``.

`StandardSeeded` only seeds torch (what a user of transformers gets): boundary values of the coin are
then as rare as in real use (2**-24 per float32 draw) and invisible to any sample size.

The signature is checked against the installed version; if it no longer fits, the adapter raises
`ImplUnavailable` naming the installed version and the signature it found.
"""

from __future__ import annotations

import inspect
from contextlib import contextmanager

import numpy as np

from ..rule.cases import SUITE_CASES as CURATED
from ..rule.harness import ImplUnavailable

EXPECTED_PARAMS = ("candidate_input_ids", "candidate_logits", "candidate_length", "new_logits")
ENSEMBLE_PARAM = "assistant_ensemble_weight"


def _load(need_ensemble: bool = False):
    try:
        import torch
        import transformers
        from transformers.generation import utils
    except ImportError as error:
        raise ImplUnavailable(f"transformers is not importable: {error}") from error
    fn = getattr(utils, "_speculative_sampling", None)
    version = transformers.__version__
    if fn is None:
        raise ImplUnavailable(
            f"transformers {version} has no transformers.generation.utils._speculative_sampling; "
            "this adapter was written for 4.46-5.x"
        )
    params = list(inspect.signature(fn).parameters)
    if tuple(params[: len(EXPECTED_PARAMS)]) != EXPECTED_PARAMS:
        raise ImplUnavailable(
            f"transformers {version}: _speculative_sampling{inspect.signature(fn)} no longer fits "
            f"this adapter, which expects leading parameters {EXPECTED_PARAMS}"
        )
    if need_ensemble and ENSEMBLE_PARAM not in params:
        raise ImplUnavailable(
            f"transformers {version}: _speculative_sampling{inspect.signature(fn)} has no "
            f"{ENSEMBLE_PARAM!r} parameter (ensemble verification was added later)"
        )
    return torch, fn, version


class _HFSpeculativeSampling:
    bridge_coins = True
    ensemble_weight: float | None = None

    def __init__(self):
        self.torch, self.fn, self.version = _load(self.ensemble_weight is not None)
        self.name = f"transformers {self.version} _speculative_sampling"

    @contextmanager
    def _coins_from(self, rng: np.random.Generator):
        torch = self.torch
        if not self.bridge_coins:
            yield
            return
        original = torch.rand_like

        def rand_like(t, *args, **kwargs):
            dtype = (
                np.float32
                if t.dtype in (torch.float32, torch.float16, torch.bfloat16)
                else np.float64
            )
            values = rng.random(tuple(t.shape), dtype=dtype)
            return torch.from_numpy(np.asarray(values)).to(dtype=t.dtype, device=t.device)

        torch.rand_like = rand_like
        try:
            yield
        finally:
            torch.rand_like = original

    def verify(self, target_probs, draft_probs, draft_tokens, rng):
        torch = self.torch
        p = np.asarray(target_probs, dtype=np.float64)
        q = np.asarray(draft_probs, dtype=np.float64)
        x = np.asarray(draft_tokens, dtype=np.int64)
        with np.errstate(divide="ignore"):
            new_logits = torch.from_numpy(np.log(p).astype(np.float32))[None]
            candidate_logits = torch.from_numpy(np.log(q).astype(np.float32))[None]
        candidate_ids = torch.from_numpy(x.copy())[None]
        # CPU tensors: the global CPU generator
        torch.default_generator.manual_seed(int(rng.integers(2**63)))
        kwargs = {} if self.ensemble_weight is None else {ENSEMBLE_PARAM: self.ensemble_weight}
        threads = torch.get_num_threads()
        # One round is tiny: intra-op thread wake-ups cost more than the work (x1000 on small V).
        torch.set_num_threads(1)
        try:
            with self._coins_from(rng):
                tokens, _ = self.fn(
                    candidate_ids, candidate_logits, int(x.size), new_logits, **kwargs
                )
        finally:
            torch.set_num_threads(threads)
        return tokens[0].tolist()

    @property
    def certificate_notes(self) -> list[str]:
        return _notes(self)


class Standard(_HFSpeculativeSampling):
    """Standard (lossless) mode; acceptance coins drawn from the suite's rng."""


class StandardSeeded(_HFSpeculativeSampling):
    """Standard mode, torch's global RNG seeded from rng (coins not routed through rng)."""

    bridge_coins = False


class Ensemble08(_HFSpeculativeSampling):
    """Ensemble verification, assistant_ensemble_weight = 0.8: v = 0.8 p + 0.2 q (lossy by design)."""

    ensemble_weight = 0.8


def _ensemble_first_token_law(p: np.ndarray, q: np.ndarray, w: float) -> np.ndarray:
    """Exact law of the first emitted token under transformers' ensemble verification: accept x ~ q
    w.p. min(1, 1 - w + w p(x)/q(x)); on rejection draw from norm(max(0, p - q))."""
    with np.errstate(divide="ignore", invalid="ignore"):
        accept = np.where(q > 0, np.minimum(1.0, 1.0 - w + w * p / np.where(q > 0, q, 1.0)), 0.0)
    residual = np.maximum(p - q, 0.0)
    residual = residual / residual.sum() if residual.sum() > 0 else p
    return q * accept + (1.0 - (q * accept).sum()) * residual


def _notes(self) -> list[str]:
    fn_sig = str(inspect.signature(self.fn))
    notes = [
        f"Implementation: transformers {self.version} transformers.generation.utils._speculative_sampling{fn_sig}.",
        "Adapter: p and q passed as float32 logits log p, log q; torch.multinomial seeded from the suite's rng"
        + (
            "; torch.rand_like (the acceptance coins) routed through the suite's rng, so the adversarial "
            "Generator's exact 0.0 reaches the comparison `r_i <= probability_ratio`."
            if self.bridge_coins
            else "; coins from torch's own generator (boundary values as rare as in use)."
        ),
    ]
    if self.ensemble_weight is not None:
        tvs = {
            c.name: 0.5
            * float(
                np.abs(
                    _ensemble_first_token_law(
                        c.target_probs[0], c.draft_probs[0], self.ensemble_weight
                    )
                    - c.target_probs[0]
                ).sum()
            )
            for c in CURATED
        }
        worst = max(tvs, key=tvs.__getitem__)
        notes.append(
            f"{ENSEMBLE_PARAM}={self.ensemble_weight}: verification against v = w p + (1-w) q (DIVERSE, "
            f"static ensemble). Predicted exact TV(first token, p_1) per case: "
            + ", ".join(f"{k} {v:.4f}" for k, v in tvs.items())
            + f" (largest: {worst})."
        )
    else:
        notes.append(
            "The comparison is inclusive (`r_i <= probability_ratio`): a draft with p(x) = 0 is accepted "
            "when the coin is exactly 0.0 -- probability 2**-24 per float32 torch.rand draw, invisible "
            "to sampling, shown by the adversarial Generator. The standard rule needs u < p/q."
        )
    return notes
