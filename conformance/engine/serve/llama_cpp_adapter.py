"""llama-cpp-python's ``Llama`` as an in-process engine adapter (`..adapter`), speculation by its own Python code.

    exactspec engine certify --engine-adapter exactspec.conformance.engine.serve.llama_cpp_adapter:LlamaCppPython \\
        --adapter-option model=PATH.gguf --prompts P.jsonl --temperature 0.7 --max-tokens 8 --out DIR

(run with the Python of `llama_cpp_python.ensure_llama_cpp_python`'s venv). The reference role is ``Llama`` alone;
the candidate is ``Llama(draft_model=LlamaPromptLookupDecoding(max_ngram_size, num_pred_tokens))``, whose
``generate`` evaluates the drafts in one batch, samples each position with the plain sampler and truncates at the
first mismatch. Both are driven through ``Llama.generate`` with the seed set first (``set_seed``: its sampler
chain's ``dist`` stage is seeded per call) and penalties off, the KV cache cleared first so the prompt is evaluated
in one batch every time. The draft counters are counted here: each call of the draft model and how much of what it
proposed the emitted tokens kept.

``report`` is the law llama.cpp's sampler chain samples from after the prefix, from the logits plain decoding
computes there (the prompt in one batch, each later token alone: ggml's CPU kernels are not batch-invariant): top-k
on the logits, then top-p and min-p on their softmax, then the temperature, then the softmax over what is left
(llama.cpp's order; T = 0: its greedy argmax).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....gpu_impl.model_config import default_gguf_path
from ....reference.warping import warp_probs
from ..backend import Completion, Sampling, top_n


def chain_law(logits: np.ndarray, sampling: Sampling) -> np.ndarray:
    """The next-token law of llama.cpp's chain top_k -> top_p -> min_p -> temperature -> dist, in float64."""
    logits = np.asarray(logits, dtype=np.float64)
    if sampling.temperature == 0:
        return warp_probs(logits, 0.0, None, 1.0, 0.0)
    kept = warp_probs(logits, 1.0, sampling.top_k or None, sampling.top_p, sampling.min_p) > 0
    scaled = np.where(kept, logits / sampling.temperature, -np.inf)
    probs = np.exp(scaled - scaled.max())
    return probs / probs.sum()


class _CountingDraft:
    """Wraps a draft model: remembers each proposal (where it starts, what it proposed)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.proposals: list[tuple[int, list[int]]] = []

    def __call__(self, input_ids: np.ndarray, /, **kwargs: Any) -> np.ndarray:
        drafted = self.inner(input_ids, **kwargs)
        self.proposals.append((len(input_ids), [int(t) for t in drafted]))
        return drafted

    def counts(self, start: int, emitted: list[int]) -> tuple[int, int]:
        """(drafted, accepted): tokens proposed at positions the completion reached, and how many it kept (each
        proposal's longest prefix equal to the emitted tokens there)."""
        drafted = accepted = 0
        for at, proposal in self.proposals:
            offset = at - start
            reachable = proposal[: max(0, len(emitted) - offset)]
            drafted += len(reachable)
            for i, token in enumerate(reachable):
                if emitted[offset + i] != token:
                    break
                accepted += 1
        return drafted, accepted


class LlamaCppPython:
    """The adapter; options: model (a GGUF path; default the embedded SmolLM2), threads, n_ctx, num_pred_tokens,
    max_ngram_size."""

    name = "llama-cpp-python"

    def __init__(
        self,
        role: str,
        model: str | None = None,
        threads: str | int = 1,
        n_ctx: str | int = 512,
        num_pred_tokens: str | int = 10,
        max_ngram_size: str | int = 2,
    ) -> None:
        # llama-cpp-python: installed in its own venv, where this adapter runs
        import llama_cpp
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        if model is None:
            model = str(default_gguf_path())
        self.role, self.version, self.model_name = (
            role,
            llama_cpp.__version__,
            str(model).rsplit("/", 1)[-1],
        )
        self.draft = None
        if role == "candidate":
            self.draft = _CountingDraft(
                LlamaPromptLookupDecoding(
                    max_ngram_size=int(max_ngram_size), num_pred_tokens=int(num_pred_tokens)
                )
            )
        self.llm = llama_cpp.Llama(
            model_path=str(model),
            n_ctx=int(n_ctx),
            n_threads=int(threads),
            n_threads_batch=int(threads),
            logits_all=True,
            draft_model=self.draft,
            verbose=False,
        )
        self._is_end = lambda token: bool(
            llama_cpp.llama_vocab_is_eog(self.llm._model.vocab, token)
        )
        # evaluated in one batch, as plain decoding does
        self._prompts: set[tuple[int, ...]] = set()

    def tokenize(self, text: str) -> list[int]:
        ids = [int(t) for t in self.llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)]
        self._prompts.add(tuple(ids))
        return ids

    def chat_tokenize(self, messages: list[dict]) -> list[int]:
        """A chat through the model's own chat template (the GGUF's), with the generation prompt."""
        # llama-cpp-python: installed in its own venv, where this adapter runs
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        template = self.llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise ValueError("prompts: the model has no chat template: give text or prompt_tokens")
        text = self.llm.detokenize
        formatter = Jinja2ChatFormatter(
            template,
            eos_token=text([self.llm.token_eos()], special=True).decode(),
            bos_token=text([self.llm.token_bos()], special=True).decode(),
            add_generation_prompt=True,
        )
        prompt = formatter(messages=messages).prompt
        ids = [
            int(t) for t in self.llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        ]
        self._prompts.add(tuple(ids))
        return ids

    def _evaluate(self, prefix: list[int]) -> None:
        """Bring the KV cache to `prefix` the way plain decoding does: its prompt in one batch, each later token
        alone. ggml's CPU kernels are not batch-invariant (a row's logits depend on how many rows share its batch),
        so this is what makes a report the law plain decoding samples from."""
        prompt = max(
            (len(p) for p in self._prompts if tuple(prefix[: len(p)]) == p), default=len(prefix)
        )
        held = list(self.llm.input_ids[: self.llm.n_tokens])
        keep = next(
            (i for i, (a, b) in enumerate(zip(held, prefix)) if a != b), min(len(held), len(prefix))
        )
        if keep < prompt:
            self.llm.reset()
            self.llm.eval(prefix[:prompt])
            keep = prompt
        self.llm.n_tokens = keep  # eval() drops the cache beyond n_tokens
        for token in prefix[keep:]:
            self.llm.eval([token])

    def report(self, prefix_ids: list[int], sampling: Sampling, n: int) -> list[tuple[int, float]]:
        """The law after the prefix, from the logits plain decoding computes there (`_evaluate`)."""
        prefix = list(prefix_ids)
        self._evaluate(prefix)
        return top_n(chain_law(self.llm.scores[len(prefix) - 1], sampling), n)

    def complete(
        self, prompt_ids: list[int], seed: int, sampling: Sampling, max_tokens: int
    ) -> Completion:
        self._prompts.add(tuple(prompt_ids))
        self.llm.reset()  # the prompt in one batch, whatever the cache held: the same numerics every time
        self.llm.set_seed(int(seed))
        if self.draft is not None:
            self.draft.proposals.clear()
        tokens, ended = [], False
        for token in self.llm.generate(
            list(prompt_ids),
            top_k=sampling.top_k,
            top_p=sampling.top_p,
            min_p=sampling.min_p,
            typical_p=1.0,
            temp=sampling.temperature,
            repeat_penalty=1.0,
            frequency_penalty=0.0,
            presence_penalty=0.0,
            reset=True,
        ):
            tokens.append(int(token))
            if (self._is_end(token) and not sampling.ignore_eos) or len(tokens) >= max_tokens:
                ended = self._is_end(token) and not sampling.ignore_eos
                break
        if self.draft is None:
            return Completion(tokens, ended)
        drafted, accepted = self.draft.counts(len(prompt_ids), tokens)
        return Completion(tokens, ended, drafted, accepted)


__all__ = ["LlamaCppPython", "chain_law"]
