"""Generation-level adapters (see conformance/CONTRACT.md, sequence level): exactspec's own generator and transformers' two sampled
speculative paths, each exposing

    generate(target, draft, prompt_ids, max_new_tokens, k, sampling, seed) -> list[int]

and, where the implementation batches, ``generate_batch(target, draft, prompts, max_new_tokens, k, sampling,
seed) -> list[list[int]]``. EOS is ``target.generation_config.eos_token_id`` (None = none). An adapter
raises ``Unsupported`` for a configuration its implementation cannot express (the suite records it).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import torch
import transformers

from ...errors import Unsupported  # noqa: F401 -- re-exported: adapters raise it for a configuration they cannot run
from ...gpu_impl import SpeculativeGenerator
from ...gpu_impl.drafts import HeadsDraft, ModelDraft, PromptLookupDraft
from ...gpu_impl.drafts.heads import PredictionHeads
from ...reference.warping import SamplingParams
from ..loader import load_adapter as load_any_adapter
from .models import eos_of
from .reference_loop import ReferenceLoop


# ------------------------------------------------------------------------------------------------------
# exactspec's PyTorch generator
# ------------------------------------------------------------------------------------------------------


class GpuImplAdapter:
    """`gpu_impl.SpeculativeGenerator` with a `ModelDraft` (`PromptLookupDraft` when draft_kind='lookup',
    `HeadsDraft` with untrained heads on the target when draft_kind='heads'; the draft model is then unused).

    `k_policy` other than "fixed" lets the generator choose each round's k itself (at most 2k): the suite
    then certifies that a data- and timing-dependent k leaves the law exact.
    """

    def __init__(
        self, draft_kind: str = "model", mode: str = "standard", k_policy: str = "fixed"
    ) -> None:
        self.draft_kind, self.mode, self.k_policy = draft_kind, mode, k_policy
        self.name = "gpu_impl" if draft_kind == "model" else f"gpu_impl-{draft_kind}"
        if mode != "standard":
            self.name += f"-{mode}"
        if k_policy != "fixed":
            self.name += f"-{k_policy}"
        self.description = (
            f"gpu_impl.SpeculativeGenerator (draft={draft_kind}, mode={mode}, k policy={k_policy})"
        )
        self._generators: dict[tuple, Any] = {}

    def _generator(self, target: Any, draft: Any, k: int, sampling: SamplingParams):
        """One generator per (models, k, sampling), reused across calls as a server would (the cost policy
        measures its costs once, at the first call)."""
        key = (id(target), id(draft), k, repr(sampling))
        if key not in self._generators:
            if len(self._generators) >= 8:
                self._generators.clear()
            self._generators[key] = self._new_generator(target, draft, k, sampling)
        return self._generators[key]

    def _new_generator(self, target: Any, draft: Any, k: int, sampling: SamplingParams):
        if self.draft_kind == "lookup":
            source = PromptLookupDraft()
        elif self.draft_kind == "heads":
            # untrained heads (seed 0) on the target itself: exactness must not depend on how good the heads are
            source = HeadsDraft(
                target, PredictionHeads(target.config.hidden_size, n_heads=3).to(target.dtype)
            )
        else:
            source = ModelDraft(draft)
        return SpeculativeGenerator(
            target, source, k=k, sampling=sampling, mode=self.mode, adaptive_k=self.k_policy
        )

    def generate(self, target, draft, prompt_ids, max_new_tokens, k, sampling, seed) -> list[int]:
        return self.generate_batch(target, draft, [prompt_ids], max_new_tokens, k, sampling, seed)[
            0
        ]

    def generate_batch(
        self, target, draft, prompts, max_new_tokens, k, sampling, seed
    ) -> list[list[int]]:
        generator = self._generator(target, draft, k, sampling)
        ids = torch.tensor([list(p) for p in prompts], dtype=torch.long)
        result = generator.generate(ids, max_new_tokens, seed=seed, eos_token_id=eos_of(target))
        return [list(map(int, s)) for s in result.sequences]


# ------------------------------------------------------------------------------------------------------
# transformers
# ------------------------------------------------------------------------------------------------------


def hf_sampling_kwargs(sampling: SamplingParams) -> dict:
    """SamplingParams -> transformers generate() keywords with the same warping (every warper explicit, so
    the model's generation_config defaults, e.g. top_k = 50, cannot leak in)."""
    if sampling.greedy:
        return {
            "do_sample": False,
            "temperature": None,
            "top_k": None,
            "top_p": None,
            "min_p": None,
        }
    return {
        "do_sample": True,
        "temperature": float(sampling.temperature),
        "top_k": int(sampling.top_k) if sampling.top_k is not None else 0,
        "top_p": float(sampling.top_p),
        "min_p": float(sampling.min_p) if sampling.min_p > 0 else None,
    }


@contextmanager
def _assistant_config(draft: Any, k: int):
    """Constant draft length k on the assistant's generation_config, restored afterwards."""
    config = draft.generation_config
    names = (
        "num_assistant_tokens",
        "num_assistant_tokens_schedule",
        "assistant_confidence_threshold",
    )
    saved = {n: getattr(config, n, None) for n in names}
    config.num_assistant_tokens = k
    config.num_assistant_tokens_schedule = "constant"
    config.assistant_confidence_threshold = 0.0
    try:
        yield
    finally:
        for n, v in saved.items():
            setattr(config, n, v)


class _HFBase:
    def _run(self, target, prompt_ids, max_new_tokens, sampling, seed, **extra) -> list[int]:
        ids = torch.tensor([list(prompt_ids)], dtype=torch.long)
        torch.manual_seed(seed)
        eos = eos_of(target)
        out = target.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=max_new_tokens,
            min_new_tokens=0,
            eos_token_id=eos,
            pad_token_id=target.generation_config.pad_token_id
            if target.generation_config.pad_token_id is not None
            else 0,
            repetition_penalty=None,
            **hf_sampling_kwargs(sampling),
            **extra,
        )
        return [int(t) for t in out[0, ids.shape[1] :].tolist()]


class HFAssistedAdapter(_HFBase):
    """transformers ``generate(assistant_model=draft, do_sample=True, ...)`` (speculative sampling, batch 1)."""

    name = "transformers-assisted"
    notes = (
        "Rule (read from transformers.generation.utils._speculative_sampling): the standard rule -- accept "
        "x_i iff r_i <= p_i(x_i)/q_i(x_i) with p, q the softmax of the *processed* (warped) target and "
        "assistant scores; at the first rejection sample norm(max(0, p - q)); all accepted: bonus from p_k. "
        "The assistant samples with the same logits processors (do_sample copied from the main config)."
    )

    def __init__(self) -> None:
        self.description = (
            f"transformers {transformers.__version__} generate(assistant_model=draft), constant k"
        )

    def generate(self, target, draft, prompt_ids, max_new_tokens, k, sampling, seed) -> list[int]:
        with _assistant_config(draft, k):
            return self._run(
                target, prompt_ids, max_new_tokens, sampling, seed, assistant_model=draft
            )


class HFPromptLookupAdapter(_HFBase):
    """transformers ``generate(prompt_lookup_num_tokens=k, do_sample=True, ...)`` (draft model unused)."""

    name = "transformers-prompt-lookup"
    notes = (
        "Rule (read from transformers.generation.utils._assisted_decoding): PromptLookupCandidateGenerator "
        "returns no candidate logits, so with do_sample=True the 'Case 2' branch runs: one token y_i ~ p_i "
        "(torch.multinomial on the processed target rows) is drawn at every candidate position and the "
        "candidates are kept while x_i == y_i; the first y_i that differs (or y_{k+1}) is emitted. That is "
        "the sampler-match rule (reference.verify_sampler_match): exact, acceptance sum_x p(x) q(x) with q "
        "a point mass at the looked-up token, i.e. acceptance p(x_i) per draft."
    )

    def __init__(self) -> None:
        self.description = (
            f"transformers {transformers.__version__} generate(prompt_lookup_num_tokens=k)"
        )

    def generate(self, target, draft, prompt_ids, max_new_tokens, k, sampling, seed) -> list[int]:
        return self._run(
            target, prompt_ids, max_new_tokens, sampling, seed, prompt_lookup_num_tokens=k
        )


class HFPlainAdapter(_HFBase):
    """transformers plain ``generate(do_sample=True)`` -- not speculative; a control for the suite itself."""

    name = "transformers-plain"
    description = "transformers generate() without speculation (control)"

    def generate(self, target, draft, prompt_ids, max_new_tokens, k, sampling, seed) -> list[int]:
        return self._run(target, prompt_ids, max_new_tokens, sampling, seed)


# ------------------------------------------------------------------------------------------------------
# registry
# ------------------------------------------------------------------------------------------------------

BUILTIN = {
    "reference": ReferenceLoop,
    "reference_loop": ReferenceLoop,
    "gpu_impl": GpuImplAdapter,
    "gpu_impl-lookup": lambda: GpuImplAdapter("lookup"),
    "gpu_impl-heads": lambda: GpuImplAdapter("heads"),
    "gpu_impl-cost": lambda: GpuImplAdapter(k_policy="cost"),
    "transformers-assisted": HFAssistedAdapter,
    "hf-assisted": HFAssistedAdapter,
    "transformers-prompt-lookup": HFPromptLookupAdapter,
    "hf-prompt-lookup": HFPromptLookupAdapter,
    "transformers-plain": HFPlainAdapter,
}


def load_adapter(spec: Any) -> Any:
    """A generation-level adapter from a builtin name, 'MODULE:NAME' (class, factory or instance), or an object.

    Returns None when the object offers no ``generate`` (e.g. a rule-level ``verify`` adapter); a spec that
    cannot be loaded at all raises AdapterLoadError (a ValueError) naming the module and the import error."""
    if spec is None:
        return None
    loaded = load_any_adapter(spec, builtins=BUILTIN)
    # the level an object offers first (`loader`)
    return loaded.adapter if loaded.level == "sequence" else None


def adapter_name(adapter: Any) -> str:
    return str(getattr(adapter, "name", type(adapter).__name__))
