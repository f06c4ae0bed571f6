"""The synthetic serving engine's generation loop: plain decoding and speculative modes, exact or with one bug each.

`generate(model, mode, prompt, max_tokens, chain, seed, k, load)` runs one completion request. ``plain`` samples
the warped target with one uniform per token from ``numpy.random.default_rng(seed)`` (the reference stream). A
speculative mode runs rounds of up to `k` drafts (fewer near `max_tokens`: never more tokens than asked):
`Mode.propose` drafts, `Mode.target_rows` gives the verification rows p_1..p_{k+1}, `Mode.settle` applies the rule;
the draft counters are llama.cpp's (drafted, accepted). Generation stops after EOS (except in the EOS bug).

`MODES` is the mode table: one small class per mechanism, its docstring saying what it does and whether it is
exact; adding a mode is adding a class to the table. Load-dependent modes read `Load` (the server's in-flight
count and the other in-flight requests' contexts; `SimulatedLoad` in process).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ....reference.laws import residual
from ....reference.sampling import inverse_cdf
from .mutant_server import Generated
from .synthetic_model import Chain, SyntheticModel, draw

DEFAULT_K = 4


class Load:
    """No other request in flight: what an in-process call sees."""

    def in_flight(self) -> int:
        """Requests in flight at the server, this one included."""
        return 1

    def companion(self) -> Sequence[int] | None:
        """The current context of another in-flight request (None if there is none)."""
        return None

    def track(self, context: list[int]) -> None:
        """Called once per request with the list the loop appends its tokens to."""


NO_LOAD = Load()


class SimulatedLoad(Load):
    """A fixed in-flight count and a fixed companion context, for in-process measurement under load."""

    def __init__(self, in_flight: int = 2, companion: Sequence[int] = (3, 5)) -> None:
        self._in_flight, self._companion = int(in_flight), [int(t) for t in companion]

    def in_flight(self) -> int:
        return self._in_flight

    def companion(self) -> Sequence[int] | None:
        return self._companion if self._in_flight > 1 else None


@dataclass
class Request:
    """One completion's state: the model, chain, streams, and the context the loop extends."""

    model: SyntheticModel
    chain: Chain
    prompt: list[int]
    rng: np.random.Generator
    draft_rng: np.random.Generator
    load: Load
    context: list[int] = field(default_factory=list)
    # what a KV cache holds (the kv bug keeps stale drafts)
    kv_context: list[int] = field(default_factory=list)

    @property
    def n_generated(self) -> int:
        return len(self.context) - len(self.prompt)


class Mode:
    """exact: the standard rule (Leviathan et al. 2023) with drafts sampled from q."""

    name = "exact"
    exact = True
    speculative = True
    seed_coupled = False  # the same seed gives plain decoding's tokens
    load_dependent = False
    greedy_drafts = False

    def streams(self, seed: int) -> tuple[np.random.Generator, np.random.Generator]:
        """(target stream, draft stream) of a request."""
        return np.random.default_rng(seed), np.random.default_rng([seed, 1])

    def round(self, req: Request, k: int) -> tuple[list[int], int]:
        """One round of at most `k` drafts: (emitted tokens, accepted drafts)."""
        drafts, q_rows = self.propose(req, k)
        p_rows = self.target_rows(req, drafts)
        emitted, accepted = self.settle(req, p_rows, q_rows, drafts)
        self.after_round(req, drafts, emitted, accepted)
        return emitted, accepted

    def propose(self, req: Request, k: int) -> tuple[list[int], list[np.ndarray]]:
        """k drafts from the draft model after the context, and their draft rows q_1..q_k."""
        drafts: list[int] = []
        q_rows = []
        for _ in range(k):
            q_row = req.model.draft_row(req.context + drafts, req.chain)
            token = int(np.argmax(q_row)) if self.greedy_drafts else self.draw_draft(req, q_row)
            drafts.append(token)
            q_rows.append(q_row)
        return drafts, q_rows

    def draw_draft(self, req: Request, q_row: np.ndarray) -> int:
        return draw(q_row, req.draft_rng)

    def target_rows(self, req: Request, drafts: list[int]) -> list[np.ndarray]:
        """The verification rows p_1..p_{k+1}: the target after the (KV) context and each prefix of the drafts."""
        base, position, n = req.kv_context + drafts, req.n_generated + 1, len(req.kv_context)
        chains = [
            self.verify_chain(req, base[: n + i], position + i, i < len(drafts))
            for i in range(len(drafts) + 1)
        ]
        return [req.model.target_row(base[: n + i], chain) for i, chain in enumerate(chains)]

    def verify_chain(self, req: Request, context: list[int], position: int, drafted: bool) -> Chain:
        """The chain verification warps the target with, for the token at generated `position` (1-based);
        `drafted` is False for the bonus row."""
        return req.chain

    def settle(
        self, req: Request, p: list[np.ndarray], q: list[np.ndarray], drafts: list[int]
    ) -> tuple[list[int], int]:
        """Accept draft i with probability min(1, p/q); at the first rejection draw the correction; else a bonus."""
        for i, token in enumerate(drafts):
            u = req.rng.random()
            if u < p[i][token] / q[i][token]:
                continue
            return drafts[:i] + [self.correction(req, p[i], q[i], u)], i
        return drafts + [self.bonus(req, p)], len(drafts)

    def correction(self, req: Request, p_row: np.ndarray, q_row: np.ndarray, u: float) -> int:
        return draw(residual(p_row, q_row), req.rng)

    def bonus(self, req: Request, p: list[np.ndarray]) -> int:
        return draw(p[-1], req.rng)

    def after_round(
        self, req: Request, drafts: list[int], emitted: list[int], accepted: int
    ) -> None:
        """Bookkeeping after a round: the KV context follows the emitted tokens (rolled back)."""
        req.kv_context.extend(emitted)

    def stops(self, tokens: list[int], eos: int) -> tuple[list[int], bool]:
        """The tokens kept from a round and whether generation stops: cut after the first EOS."""
        if eos in tokens:
            return tokens[: tokens.index(eos) + 1], True
        return tokens, False


class Plain(Mode):
    """plain (exact, the reference): one token per step from the warped target, one uniform each."""

    name, speculative, seed_coupled = "plain", False, True

    def round(self, req: Request, k: int) -> tuple[list[int], int]:
        return [draw(req.model.target_row(req.context, req.chain), req.rng)], 0


class Bug(Mode):
    """Base of the modes that carry one bug (not exact)."""

    exact = False


class ExactAltOrder(Mode):
    """exact-alt-order (exact): uniforms drawn first, accept iff u*q < p, final token by reversed inverse CDF."""

    name = "exact-alt-order"

    def settle(self, req, p, q, drafts):
        uniforms = req.rng.random(len(drafts) + 1)
        for i, token in enumerate(drafts):
            if uniforms[i] * q[i][token] >= p[i][token]:
                return drafts[:i] + [self._reversed(residual(p[i], q[i]), uniforms[-1])], i
        return drafts + [self._reversed(p[-1], uniforms[-1])], len(drafts)

    @staticmethod
    def _reversed(row: np.ndarray, u: float) -> int:
        return len(row) - 1 - int(inverse_cdf(row[::-1], u))


class SamplerMatch(Mode):
    """sampler-match (exact, seed-coupled): greedy drafts kept while p_i sampled on plain's stream equals them."""

    name, greedy_drafts, seed_coupled = "sampler-match", True, True

    def settle(self, req, p, q, drafts):
        for i, token in enumerate(drafts):
            sampled = draw(p[i], req.rng)
            if not self.keeps(p[i], token, sampled):
                return drafts[:i] + [sampled], i
        return drafts + [draw(p[-1], req.rng)], len(drafts)

    def keeps(self, p_row: np.ndarray, draft: int, sampled: int) -> bool:
        return sampled == draft


class ExactUncoupled(SamplerMatch):
    """exact-uncoupled (exact, not seed-coupled): sampler match on a stream other than plain's."""

    name, seed_coupled = "exact-uncoupled", False

    def streams(self, seed):
        return np.random.default_rng([seed, 2]), np.random.default_rng([seed, 1])


class TempVerify(Bug):
    """temp-verify (bug): verification warps the target at T x factor."""

    def __init__(self, factor: float) -> None:
        self.factor, self.name = float(factor), f"temp-verify-{factor}"

    def verify_chain(self, req, context, position, drafted):
        return req.chain.scaled(self.factor)


class LenientSamplerMatch(SamplerMatch):
    """lenient-sampler-match (bug): sampler match that also keeps a draft with p(draft) >= p(sample) / 2."""

    name, exact, seed_coupled = "lenient-sampler-match", False, False

    def keeps(self, p_row, draft, sampled):
        return sampled == draft or p_row[draft] >= 0.5 * p_row[sampled]


class HotColdContext(Bug):
    """hot-cold-context (bug): verification at T x 1.3 or T / 1.3, chosen by a hash of the context."""

    name = "hot-cold-context"

    def verify_chain(self, req, context, position, drafted):
        # a stable hash of the context
        hot = zlib.crc32(np.asarray(context, dtype=np.int32).tobytes()) & 1
        return req.chain.scaled(1.3 if hot else 1 / 1.3)


class SpreadPerPrefix(Bug):
    """spread-per-prefix (bug): each drafted position verified at T x 1.5 or T / 1.5 by a fair coin."""

    name = "spread-per-prefix"

    def verify_chain(self, req, context, position, drafted):
        if not drafted:
            return req.chain
        return req.chain.scaled(1.5 if req.draft_rng.random() < 0.5 else 1 / 1.5)


class TruncationSkippedVerify(Bug):
    """truncation-skipped-verify (bug): top-k and top-p are not applied to p in verification."""

    name = "truncation-skipped-verify"

    def verify_chain(self, req, context, position, drafted):
        return req.chain.without(truncation=True)


class MinPIgnoredVerify(Bug):
    """min-p-ignored-verify (bug): min-p is not applied to p in verification."""

    name = "min-p-ignored-verify"

    def verify_chain(self, req, context, position, drafted):
        return req.chain.without(min_p=True)


class KvNotRolledBack(Bug):
    """kv-not-rolled-back (bug): rejected drafts stay in the KV context the next rounds' target rows see."""

    name = "kv-not-rolled-back"

    def after_round(self, req, drafts, emitted, accepted):
        req.kv_context.extend(emitted if accepted == len(drafts) else drafts + emitted[-1:])


class BonusFromLastDraftRow(Bug):
    """bonus-from-last-draft-row (bug): when every draft is accepted the bonus is drawn from p_k, not p_{k+1}."""

    name = "bonus-from-last-draft-row"

    def bonus(self, req, p):
        return draw(p[-2] if len(p) > 1 else p[-1], req.rng)


class DraftsTopkQ(Bug):
    """drafts-topk-q (bug): drafts sampled from top-k(q) (k = `top_k`), the ratio using the full q."""

    name, top_k = "drafts-topk-q", 2

    def draw_draft(self, req, q_row):
        kept = np.argsort(-q_row, kind="stable")[: self.top_k]
        truncated = np.zeros_like(q_row)
        truncated[kept] = q_row[kept]
        return draw(truncated, req.draft_rng)


class ResampleFromP(Bug):
    """resample-from-p (bug): at a rejection the correction is drawn from p, not the residual."""

    name = "resample-from-p"

    def correction(self, req, p_row, q_row, u):
        return draw(p_row, req.rng)


class SharedUniform(Bug):
    """shared-uniform (bug): the acceptance uniform is reused to draw the correction by inverse CDF."""

    name = "shared-uniform"

    def correction(self, req, p_row, q_row, u):
        return int(inverse_cdf(residual(p_row, q_row), u))


class LateTemp(Bug):
    """late-temp-1.3 (bug): the target is verified at T x 1.3 from generated position 7 on."""

    name = "late-temp-1.3"

    def verify_chain(self, req, context, position, drafted):
        return req.chain.scaled(1.3) if position >= 7 else req.chain


class LoadTemp(Bug):
    """load-temp-1.15 (bug under load): verification at T x 1.15 while another request is in flight."""

    name, load_dependent = "load-temp-1.15", True

    def verify_chain(self, req, context, position, drafted):
        return req.chain.scaled(1.15) if req.load.in_flight() > 1 else req.chain


class EosAtRoundEnd(Bug):
    """eos-at-round-end (bug): EOS checked only at a round's end, so tokens after an EOS in a round are kept."""

    name = "eos-at-round-end"

    def stops(self, tokens, eos):
        return tokens, eos in tokens


class BatchRowsMixed(Bug):
    """batch-rows-mixed (bug under load): each verification row is another in-flight request's w.p. `rate`."""

    name, rate, load_dependent = "batch-rows-mixed", 0.25, True

    def target_rows(self, req, drafts):
        rows = super().target_rows(req, drafts)
        other = req.load.companion()
        if other is None or len(other) == 0:
            return rows
        for i in range(len(rows)):
            if req.draft_rng.random() < self.rate:
                rows[i] = req.model.target_row(list(other[-2:]), req.chain)
        return rows


MODES: dict[str, Mode] = {
    mode.name: mode
    for mode in (
        Plain(),
        Mode(),
        ExactAltOrder(),
        SamplerMatch(),
        ExactUncoupled(),
        TempVerify(1.15),
        TempVerify(0.85),
        LenientSamplerMatch(),
        HotColdContext(),
        SpreadPerPrefix(),
        TruncationSkippedVerify(),
        MinPIgnoredVerify(),
        KvNotRolledBack(),
        BonusFromLastDraftRow(),
        DraftsTopkQ(),
        ResampleFromP(),
        SharedUniform(),
        LateTemp(),
        LoadTemp(),
        EosAtRoundEnd(),
        BatchRowsMixed(),
    )
}


def mode_of(name: str) -> Mode:
    """The mode named `name` (ValueError listing the names otherwise)."""
    if name not in MODES:
        raise ValueError(f"mode must be one of {sorted(MODES)}, got {name!r}")
    return MODES[name]


def generate(
    model: SyntheticModel,
    mode: Mode | str,
    prompt: Sequence[int],
    max_tokens: int,
    chain: Chain,
    seed: int,
    k: int = DEFAULT_K,
    load: Load = NO_LOAD,
) -> Generated:
    """One completion: at most `max_tokens` new tokens (EOS included when it stopped generation)."""
    mode = mode_of(mode) if isinstance(mode, str) else mode
    prompt = [int(t) for t in prompt]
    if not prompt or min(prompt) < 0 or max(prompt) >= model.vocab:
        raise ValueError(
            f"prompt must be a non-empty list of token ids in [0, {model.vocab}), got {prompt}"
        )
    if max_tokens < 1 or k < 1:
        raise ValueError(f"max_tokens and k must be >= 1, got {max_tokens} and {k}")
    req = Request(model, chain, prompt, *mode.streams(int(seed)), load, list(prompt), list(prompt))
    load.track(req.context)
    drafted, accepted, stopped = 0, 0, False
    while req.n_generated < max_tokens and not stopped:
        round_k = min(k, max_tokens - req.n_generated - 1) if mode.speculative else 0
        emitted, n_accepted = mode.round(req, round_k)
        drafted, accepted = drafted + round_k, accepted + n_accepted
        kept, stopped = mode.stops(emitted[: max_tokens - req.n_generated], model.eos)
        req.context.extend(kept)
    tokens = req.context[len(prompt) :]
    return Generated(tokens, model.eos in tokens, drafted, accepted)


__all__ = ["DEFAULT_K", "MODES", "NO_LOAD", "Load", "Mode", "SimulatedLoad", "generate", "mode_of"]
