"""Adapters: tiny objects that expose an implementation through a level's contract (the rule level's
``verify(target_probs, draft_probs, draft_tokens, rng)``, optionally ``verify_batch``; the tree level's
``verify_tree``).

Built in, as ``exactspec.conformance.adapters.MODULE:NAME``: ``reference`` (the oracle), ``gpu_impl`` (exactspec's
PyTorch verifier on CPU or CUDA), ``gpu_tree`` (its tree verifier), ``transformers_hf`` (Hugging Face's
speculative sampling), ``eagle_tree`` (EAGLE's tree posterior) and ``vllm_rejection`` (vLLM's rejection sampler,
in vLLM's venv). What the pytest suite certifies when no --impl is given is each level's `default_impls`.
"""
