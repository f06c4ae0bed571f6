"""Adapters: tiny objects that expose an implementation through the contract
(``verify(target_probs, draft_probs, draft_tokens, rng)``, optionally ``verify_batch``).

Built in: ``conformance.adapters.reference:Reference``, ``conformance.adapters.gpu_impl:TorchCPU``,
``conformance.adapters.gpu_impl:TorchCUDA``, ``conformance.adapters.transformers_hf:Standard`` and
``conformance.adapters.transformers_hf:Ensemble08``.
"""

#: What ``pytest conformance`` certifies when no --impl is given: our own implementations.
DEFAULT_IMPLS = (
    "exactspec.conformance.adapters.reference:Reference",
    "exactspec.conformance.adapters.gpu_impl:TorchCPU",
    "exactspec.conformance.adapters.gpu_impl:TorchCUDA",
)
