"""Adapter for exactspec's NumPy oracle (`reference.verify` / `reference.verify_batch`)."""

from ... import reference


class Reference:
    """The standard rule as implemented by the oracle: the suite's own yardstick."""

    def verify(self, target_probs, draft_probs, draft_tokens, rng):
        return reference.verify(target_probs, draft_probs, draft_tokens, rng)

    def verify_batch(self, target_probs, draft_probs, draft_tokens, rng):
        return reference.verify_batch(target_probs, draft_probs, draft_tokens, rng)


class ReferenceSamplerMatch:
    """The oracle's sampler-match rule: exact, but not the standard rule (accepts sum p q)."""

    def verify(self, target_probs, draft_probs, draft_tokens, rng):
        return reference.verify_sampler_match(target_probs, draft_probs, draft_tokens, rng)
