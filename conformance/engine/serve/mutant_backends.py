"""Generation backends the meta-test server (`mutant_server.EngineServer`) puts behind the engine protocol.

A backend turns one completion request (prompt token ids, max tokens, sampler chain, seed) into generated
token ids plus llama.cpp-style draft counters, and reports the target's warped next-token distribution
(the same `SamplingParams.warp` the samplers use, i.e. llama.cpp's ``post_sampling_probs``), so the PIT of
a served sample is exact. Backends:

* :class:`PlainBackend` -- "reference mode": exactspec's plain decoding loop (``gpu_impl.loop.plain``), no
  speculation, draft counters 0.
* :class:`LoopBackend` -- "candidate mode" with any sequence-level loop adapter: the textbook
  ``ReferenceLoop`` or one of the generation-level mutants (``conformance.sequence.mutants``); optional
  ``companion`` prompt: every request runs as a 2-row batch with that prompt as row 1 (a concurrent
  request under continuous batching) and row 0 is answered -- the setting where batch bugs show.
* :class:`GpuImplBackend` -- "candidate mode" with ``gpu_impl.SpeculativeGenerator`` (model draft).

Generation is serialised by a lock (one slot, like ``llama-server -np 1``): the models are shared. This module needs
torch (the sequence level's models); the server (`mutant_server`, which defines what a backend returns, `Generated`)
and the synthetic engine do not.
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np
import torch

from ....gpu_impl.drafts.model_draft import ModelDraft
from ....gpu_impl.loop.generator import SpeculativeGenerator
from ....gpu_impl.loop.plain import generate_plain
from ....reference.warping import SamplingParams
from ...sequence.models import eos_of, target_rows
from ...sequence.mutants import BENIGN, MUTANTS
from ...sequence.reference_loop import ReferenceLoop
from .mutant_server import Generated


class Backend:
    """Base: the target model, its EOS, the lock, and the teacher-forced warped probabilities."""

    name = "backend"
    speculative = False

    def __init__(self, target: Any, k: int = 0) -> None:
        self.target = target
        self.k = int(k)
        self.eos = eos_of(target)
        self.vocab = int(target.config.vocab_size)
        self._lock = threading.Lock()

    def generate(
        self, prompt: Sequence[int], max_tokens: int, sampling: SamplingParams, seed: int
    ) -> Generated:
        """Validated, serialised generation (subclasses implement `_generate`)."""
        prompt = [int(t) for t in prompt]
        if not prompt or any(t < 0 or t >= self.vocab for t in prompt):
            raise ValueError(
                f"prompt must be a non-empty list of token ids in [0, {self.vocab}), got {prompt}"
            )
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        with self._lock:
            return self._generate(prompt, int(max_tokens), sampling, int(seed))

    def _generate(
        self, prompt: list[int], max_tokens: int, sampling: SamplingParams, seed: int
    ) -> Generated:
        raise NotImplementedError

    def position_probs(
        self, prompt: Sequence[int], tokens: Sequence[int], sampling: SamplingParams
    ) -> np.ndarray:
        """Warped target distribution (len(tokens), V) of every generated position, by teacher forcing."""
        with self._lock:
            return target_rows(self.target, list(prompt), list(tokens), sampling)

    def describe(self) -> dict:
        return {
            "backend": self.name,
            "speculative": self.speculative,
            "k": self.k,
            "vocab": self.vocab,
            "eos_token_id": self.eos,
        }

    def _finish(self, tokens: Sequence[int], draft_n: int = 0, accepted: int = 0) -> Generated:
        tokens = [int(t) for t in tokens]
        stopped = self.eos is not None and bool(tokens) and tokens[-1] == self.eos
        return Generated(tokens, stopped, int(draft_n), int(accepted))


class PlainBackend(Backend):
    """Reference mode: ``gpu_impl.loop.plain.generate_plain`` (KV cache, one forward per token)."""

    name = "plain"

    def _generate(self, prompt, max_tokens, sampling, seed):
        ids = torch.tensor([prompt], dtype=torch.long)
        result = generate_plain(
            self.target, ids, max_tokens, sampling=sampling, seed=seed, eos_token_id=self.eos
        )
        return self._finish(result.sequences[0])


class _DraftCounter:
    """Mixed into a loop adapter class: counts proposed and accepted drafts of every `settle` call."""

    def reset_counts(self) -> None:
        self.draft_n, self.draft_n_accepted = 0, 0

    def settle(self, p, q, x, rng):
        emitted = super().settle(p, q, x, rng)  # type: ignore[misc]  # a mixin: the loop class is next in the MRO
        self.draft_n += len(x)
        self.draft_n_accepted += len(x) if len(emitted) > len(x) else len(emitted) - 1
        return emitted


def counting(adapter_class: type[ReferenceLoop]) -> Any:
    """An instance of `adapter_class` (a ReferenceLoop subclass) that also counts its drafts."""
    cls = type(
        f"Counting{adapter_class.__name__}",
        (_DraftCounter, adapter_class),
        {"name": adapter_class.name},
    )
    instance = cls()
    instance.reset_counts()
    return instance


class LoopBackend(Backend):
    """Candidate mode: a ``ReferenceLoop``-family adapter (the textbook loop or a mutant) with a draft model.

    With a `companion` the draft counters are the 2-row batch's totals (llama.cpp counts per slot)."""

    speculative = True

    def __init__(
        self,
        adapter_class: type[ReferenceLoop],
        target: Any,
        draft: Any,
        k: int,
        companion: Sequence[int] | None = None,
    ) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1 for a speculative backend, got {k}")
        super().__init__(target, k)
        self.draft = draft
        self.adapter = counting(adapter_class)
        self.name = str(adapter_class.name)
        self.companion = None if companion is None else [int(t) for t in companion]

    def _generate(self, prompt, max_tokens, sampling, seed):
        self.adapter.reset_counts()
        if self.companion is None:
            tokens = self.adapter.generate(
                self.target, self.draft, prompt, max_tokens, self.k, sampling, seed
            )
        else:
            if len(self.companion) != len(prompt):
                raise ValueError(
                    f"prompt must have the companion's length {len(self.companion)} in batched mode"
                )
            rows = self.adapter.generate_batch(
                self.target,
                self.draft,
                [prompt, self.companion],
                max_tokens,
                self.k,
                sampling,
                seed,
            )
            tokens = rows[0]
        return self._finish(tokens, self.adapter.draft_n, self.adapter.draft_n_accepted)

    def describe(self) -> dict:
        return {**super().describe(), "batched_with_companion": self.companion is not None}


class GpuImplBackend(Backend):
    """Candidate mode: ``gpu_impl.SpeculativeGenerator`` with a ``ModelDraft`` (one generator per sampler chain)."""

    name = "gpu_impl"
    speculative = True

    def __init__(self, target: Any, draft: Any, k: int) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1 for a speculative backend, got {k}")
        super().__init__(target, k)
        self.draft = draft
        self._generators: dict[str, Any] = {}

    def _generator(self, sampling: SamplingParams) -> Any:
        key = repr(sampling)
        if key not in self._generators:
            if len(self._generators) >= 8:
                self._generators.clear()
            self._generators[key] = SpeculativeGenerator(
                self.target, ModelDraft(self.draft), k=self.k, sampling=sampling
            )
        return self._generators[key]

    def _generate(self, prompt, max_tokens, sampling, seed):
        result = self._generator(sampling).generate(
            torch.tensor([prompt], dtype=torch.long), max_tokens, seed=seed, eos_token_id=self.eos
        )
        return self._finish(result.sequences[0], result.stats.proposed, result.stats.accepted)


def make_backend(
    kind: str, target: Any, draft: Any = None, k: int = 0, companion: Sequence[int] | None = None
) -> Backend:
    """A backend by name: "plain", "gpu_impl", "reference_loop", or a mutant's ``name`` from
    ``conformance.sequence.mutants`` (MUTANTS and BENIGN)."""
    if kind == "plain":
        return PlainBackend(target)
    if draft is None:
        raise ValueError(f"draft is required for the speculative backend {kind!r}")
    if kind == "gpu_impl":
        return GpuImplBackend(target, draft, k)
    loops = {cls.name: cls for cls in (ReferenceLoop, *MUTANTS, *BENIGN)}
    if kind not in loops:
        raise ValueError(
            f"kind must be 'plain', 'gpu_impl' or one of {sorted(loops)}, got {kind!r}"
        )
    return LoopBackend(loops[kind], target, draft, k, companion)
