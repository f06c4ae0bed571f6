"""The exact rule on device: warping, per-row random streams, categorical draws, batched and tree verification.

`sampler.verify_batch` verifies one round for a batch; `torch_verifier.TorchVerifier` puts it behind the
NumPy interface the conformance suite certifies. Nothing here knows about models or caches (`loop/` does).
"""
