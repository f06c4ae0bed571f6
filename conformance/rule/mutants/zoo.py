"""The rule level's mutant zoo: realistic buggy verification rules, each modelling a bug seen in (or one line
away from) real speculative-decoding code, and valid variants (exact rules) the suite must classify: the standard
rule written differently is CERTIFIED, an exact rule that is not the standard one (sampler-match, a skipped bonus
token) EXACT_NOT_STANDARD.

`ZOO` holds one `core.mutants.MutantSpec` per class (its name is the class name); `MUTANTS` and `VALID` are the
classes. Every entry is importable as ``exactspec.conformance.rule.mutants.zoo:NAME`` so it can be certified like any
user implementation (``exactspec certify --impl exactspec.conformance.rule.mutants.zoo:SharedCoin``).
"""

from __future__ import annotations

import numpy as np

from ....outcomes import Verdict
from ....reference.laws import unchecked_residual
from ....reference.rules import pack_round
from ....reference.sampling import inverse_cdf
from ...core.mutants import MUTANT, VALID_VARIANT, MutantSpec, one_line, zoo
from .base import Rule, leading_true, normalise

KILLED = (Verdict.CONTRACT_VIOLATION, Verdict.NOT_EXACT)


class Mutant(Rule):
    kind = MUTANT
    expected = KILLED


# --------------------------------------------------------------------------- residual bugs
class SoftmaxResidual(Mutant):
    models = (
        "Residual passed through softmax as if it were logits: softmax(clamp(p - q, min=0)) instead of "
        "clamp(p - q, min=0) / sum. Models the softmax-of-clamped-residual pattern seen in early "
        "ports of transformers' _speculative_sampling (probabilities re-softmaxed)."
    )

    def residual(self, p_row, q_row):
        r = np.maximum(p_row - q_row, 0.0)
        e = np.exp(r - r.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


class ResidualFromP(Mutant):
    models = "After a rejection, sample from p renormalised instead of norm(max(0, p - q)) ('just resample from the target')."

    def residual(self, p_row, q_row):
        return p_row


class ResidualUnnormalised(Mutant):
    models = (
        "Residual max(0, p - q) used without normalisation by an inverse-CDF sampler that compares u to the "
        "raw cumulative sum and falls back to the last token (torch.searchsorted(cumsum, u).clamp(max=V-1))."
    )

    def residual(self, p_row, q_row):
        return np.maximum(p_row - q_row, 0.0)

    def sample(self, dist, u):
        cum = np.cumsum(dist, axis=-1)
        return np.minimum((cum <= u[:, None]).sum(axis=-1), dist.shape[-1] - 1)


class ResidualNoClamp(Mutant):
    models = "Residual normalised without the max(0, .): norm(p - q) with negative entries (clamp forgotten)."

    def residual(self, p_row, q_row):
        r = p_row - q_row
        s = r.sum(axis=-1, keepdims=True)
        r = np.where(np.abs(s) > 1e-12, r / np.where(np.abs(s) > 1e-12, s, 1.0), p_row)
        return np.abs(r)  # a sampler needs non-negative weights; the sign error stays


class ResidualSignFlip(Mutant):
    models = "Residual norm(max(0, q - p)): operands swapped (the draft's excess instead of the target's)."

    def residual(self, p_row, q_row):
        return normalise(np.maximum(q_row - p_row, 0.0), p_row)


class ResidualOneRowLate(Mutant):
    models = (
        "Off-by-one in the row index: after a rejection at position i the residual uses p_{i+1} "
        "(the next row; p[:, n_matches + 1] instead of p[:, n_matches])."
    )

    def residual_rows(self, n_acc, k):
        return n_acc + 1


class CoinReusedForResidual(Mutant):
    models = (
        "The acceptance uniform u_i is reused to sample the residual (one rand per position to save RNG "
        "calls); given a rejection u_i >= p/q is not uniform, so the residual sample is biased."
    )

    def final_uniform(self, rng, u, n_acc):
        at = np.arange(u.shape[0])
        return u[at, np.minimum(n_acc, u.shape[1] - 1)]


# --------------------------------------------------------------------------- acceptance bugs
class SharedCoin(Mutant):
    models = (
        "One uniform shared by all k positions (torch.rand(1) broadcast against the (k,) ratio)."
    )

    def uniforms(self, rng, batch, k):
        return np.repeat(rng.random((batch, 1)), k, axis=1)


class InclusiveBoundary(Mutant):
    models = (
        "Inclusive boundary u <= p/q instead of u < p/q: with u == 0 a draft of target probability 0 is "
        "accepted. transformers' _speculative_sampling writes `r_i <= probability_ratio` (torch.rand can "
        "return exactly 0.0, probability 2**-24 in float32)."
    )

    def accept(self, u, p_x, q_x):
        return u <= p_x / q_x


class AcceptOnGreater(Mutant):
    models = "Comparison inverted: accept iff u > p/q (a 'reject if u < ratio' reading of the algorithm)."

    def accept(self, u, p_x, q_x):
        return u > p_x / q_x


class NoMinBernoulli(Mutant):
    models = (
        "Acceptance drawn as bernoulli(p/q) without min(1, .): torch.bernoulli raises on CPU and asserts on "
        "CUDA when p/q > 1 (here numpy's binomial raises) -- a crash on any round where p(x) > q(x)."
    )

    def accept(self, u, p_x, q_x):
        return self._rng.binomial(1, p_x / q_x).astype(bool)

    def uniforms(self, rng, batch, k):
        self._rng = rng
        return np.zeros((batch, k))


# --------------------------------------------------------------------------- q used in the ratio
class DraftTemperatureMismatch(Mutant):
    models = (
        "The q in the ratio is not the distribution the drafts were sampled from: drafts sampled after a "
        "warper (temperature 0.5, or greedy in the limit) while the ratio uses the raw softmax -- the "
        "greedy-draft-with-softmax-q bug of assisted generation. Here: ratio and residual use "
        "softmax(logits) = norm(q ** 0.5) for drafts drawn from q = softmax(logits / 0.5)."
    )

    def ratio_q(self, q):
        return normalise(np.sqrt(q), q)


class QFloorEpsilon(Mutant):
    models = (
        "q floored at eps to avoid dividing by zero: q.clamp(min=1e-4) in the ratio and residual. Harmless "
        "for large q, wrong wherever q(x) < eps -- e.g. every token of a flat draft over a 32k vocabulary."
    )

    def ratio_q(self, q):
        return np.maximum(q, 1e-4)


class TopKDraftNotInRatio(Mutant):
    models = (
        "Top-k applied on one side only: the q in the ratio/residual is top-k filtered (k = V/2) while the "
        "drafts come from the unfiltered q (the mirror image of top-k applied to the sampled draft but "
        "not to the q in the ratio): a draft outside the top-k gets ratio p/0 = inf and is always accepted."
    )

    def ratio_q(self, q):
        V = q.shape[-1]
        keep = max(1, V // 2)
        thresh = -np.sort(-q, axis=-1)[..., keep - 1 : keep]
        return normalise(np.where(q >= thresh, q, 0.0), q)


class Bf16DraftLogits(Mutant):
    models = (
        "bf16 draft path with an fp32 ratio: the draft's logits (here log q + 40, the offset real logits "
        "carry) are held in bfloat16, so the q in the ratio is softmax(bf16(logits)), up to ~13 % off the "
        "fp32 q the drafts were drawn from."
    )

    @staticmethod
    def _bf16(a):
        b = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
        b = ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
        return b.view(np.float32)

    def ratio_q(self, q):
        with np.errstate(divide="ignore"):
            logits = np.where(q > 0, np.log(q) + 40.0, -np.inf)
        lb = self._bf16(logits).astype(np.float32)
        e = np.exp(lb - lb.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)).astype(np.float64)


# --------------------------------------------------------------------------- bonus token
class BonusFromDraftRow(Mutant):
    models = "After k acceptances the bonus token is drawn from the draft's last row q_k instead of p_{k+1}."

    def bonus(self, p, q, at):
        return q[at, q.shape[1] - 1]


class BonusFromRowK(Mutant):
    models = "Bonus token drawn from p_k (off by one: p[:, k-1] instead of p[:, k])."

    def bonus(self, p, q, at):
        return p[at, q.shape[1] - 1]


class BonusSkipped(Rule):
    kind = VALID_VARIANT  # exact, not the standard rule: a valid variant, never counted as a mutant
    models = (
        "Valid but not the standard rule: bonus token skipped after k acceptances (emits only the k drafts). "
        "Exact -- the next round draws that token from p_{k+1} anyway -- but loses a token per fully accepted "
        "round: the suite must report 'exact, not the standard rule', never CERTIFIED."
    )
    # INCONCLUSIVE is honest too: where the deviation from the standard rule is small (k = 8, rarely fully
    # accepted) confirming exactness at that deviation can take more rounds than the profile allows.
    expected = (Verdict.EXACT_NOT_STANDARD, Verdict.INCONCLUSIVE)

    def emit_bonus(self):
        return False


# --------------------------------------------------------------------------- sampler
class InverseCdfNoGuard(Mutant):
    models = (
        "Inverse-CDF sampler without a guard: searchsorted(cumsum(dist), u, right).clamp(max=V-1). When the "
        "float cumsum ends below 1 (ten 0.1s sum to 0.9999999999999999) and u is above it, it returns the "
        "last id even if that token has probability 0."
    )

    def sample(self, dist, u):
        cum = np.cumsum(dist, axis=-1)
        return np.minimum((cum <= u[:, None]).sum(axis=-1), dist.shape[-1] - 1)


# --------------------------------------------------------------------------- reached only by the right cases
class NearEqualShortcut(Mutant):
    models = (
        "Near-equal shortcut: a draft is accepted without drawing a coin when p/q >= 0.95 ('close enough "
        "to 1', an optimisation one line away from the standard `u < p/q`, of the kind proposed to skip the "
        "uniform draw in fused verification kernels). Only cases with 0.95 <= p/q < 1 on drafted tokens "
        "reach it (case near_equal_draft)."
    )

    def accept(self, u, p_x, q_x):
        ratio = p_x / q_x
        return (ratio >= 0.95) | (u < ratio)


class RankMappingBeyond16(Mutant):
    models = (
        "Sampler that sorts the distribution and maps the sampled rank back to a token id through an index "
        "table that is right only for the first 16 ranks (a top-16 partial sort, as fused top-k/top-p "
        "kernels do first, with the remaining ids left in id order). Exact on V <= 16; on larger "
        "vocabularies the mass of ranks > 16 lands on the wrong ids (case zipf_2048_draft_top64)."
    )

    def sample(self, dist, u):
        dist = np.atleast_2d(dist)
        V = dist.shape[-1]
        ranks = inverse_cdf(-np.sort(-dist, axis=-1), u)  # the sorted probabilities are right
        head = min(16, V)
        top = (
            np.argpartition(-dist, head - 1, axis=-1)[:, :head]
            if head < V
            else np.tile(np.arange(V), (len(dist), 1))
        )
        top = np.take_along_axis(
            top,
            np.argsort(-np.take_along_axis(dist, top, axis=-1), axis=-1, kind="stable"),
            axis=-1,
        )
        rest = np.ones(dist.shape, dtype=bool)
        np.put_along_axis(rest, top, False, axis=-1)
        # ranks > 16: id order
        ids = np.concatenate([top, np.nonzero(rest)[1].reshape(dist.shape[0], V - head)], axis=-1)
        return ids[np.arange(dist.shape[0]), ranks]


class StaleWorkspace(Mutant):
    models = (
        "Stateful sampler whose per-position residual workspace is never cleared between rounds: it "
        "writes only the positive entries of max(0, p - q) and leaves the rest from earlier rounds (the "
        "persistent sampler buffers of CUDA-graph-captured decoders, reused across steps). Invisible while "
        "every round has the same rows; cases whose rows vary from round to round show it."
    )

    def residual_rows(self, n_acc, k):
        self._rows = np.minimum(n_acc, k - 1)
        return self._rows

    def residual(self, p_row, q_row):
        r = np.maximum(p_row - q_row, 0.0)
        # V -> (positions, V), allocated once, never zeroed
        store = self.__dict__.setdefault("_workspace", {})
        ws = store.setdefault(p_row.shape[-1], np.zeros((64, p_row.shape[-1])))
        out = np.where(r > 0, r, ws[self._rows])
        ws[self._rows] = out  # the workspace keeps what was written last at each position
        return normalise(out, p_row)


# --------------------------------------------------------------------------- valid variants
class ExponentialRace(Rule):
    kind = VALID_VARIANT
    models = (
        "Valid: the final token drawn by an exponential race argmin_v E_v / r(v) (E_v ~ Exp(1)) instead "
        "of an inverse CDF (the Gumbel-max trick used by on-device samplers)."
    )

    def sample(self, dist, u):
        e = self._rng.standard_exponential(dist.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.where(dist > 0, e / dist, np.inf)
        return score.argmin(axis=-1)

    def final_uniform(self, rng, u, n_acc):
        self._rng = rng
        return np.zeros(u.shape[0])


class Float32Arithmetic(Rule):
    kind = VALID_VARIANT
    models = "Valid: every probability, ratio, residual and uniform in float32 (float32 uniforms in [0, 1))."
    dtype = np.float32

    def uniforms(self, rng, batch, k):
        return rng.random((batch, k), dtype=np.float32)

    def accept(self, u, p_x, q_x):
        return u * q_x < p_x  # u < p/q without a float32 division

    def final_uniform(self, rng, u, n_acc):
        return rng.random(u.shape[0], dtype=np.float32)


class SamplerMatch(Rule):
    kind = VALID_VARIANT
    models = (
        "Valid but not the standard rule: draw y_i ~ p_i and keep drafts while y_i == x_i (prompt-lookup / "
        "llama.cpp style). Exact; accepts with probability sum_x p(x) q(x) <= sum_x min(p, q)."
    )
    expected = (Verdict.EXACT_NOT_STANDARD,)

    def verify_batch(self, target_probs, draft_probs, draft_tokens, rng):
        p = np.asarray(target_probs, dtype=np.float64)
        x = np.asarray(draft_tokens, dtype=np.int64)
        batch, k = x.shape
        at = np.arange(batch)
        y = np.stack([inverse_cdf(p[:, j], rng.random(batch)) for j in range(k + 1)], axis=1)
        n_acc = leading_true(y[:, :k] == x)
        return pack_round(n_acc, x, y[at, n_acc])


class ScalarLoop:
    """Valid: a plain per-round Python loop with no verify_batch (exercises the suite's single-round path)."""

    kind: str = VALID_VARIANT
    models: str = "Valid: the textbook loop, one round at a time, no verify_batch."
    expected: tuple[str, ...] = (Verdict.CERTIFIED,)

    def verify(self, target_probs, draft_probs, draft_tokens, rng):
        p, q = np.asarray(target_probs), np.asarray(draft_probs)
        out = []
        for i, x in enumerate(np.asarray(draft_tokens)):
            x = int(x)
            if rng.random() < p[i, x] / q[i, x]:
                out.append(x)
                continue
            return out + [int(inverse_cdf(unchecked_residual(p[i], q[i]), rng.random()))]
        return out + [int(inverse_cdf(p[-1], rng.random()))]


MUTANTS: list[type[Rule]] = [
    SoftmaxResidual,
    ResidualFromP,
    ResidualUnnormalised,
    ResidualNoClamp,
    ResidualSignFlip,
    ResidualOneRowLate,
    CoinReusedForResidual,
    SharedCoin,
    InclusiveBoundary,
    AcceptOnGreater,
    NoMinBernoulli,
    DraftTemperatureMismatch,
    QFloorEpsilon,
    TopKDraftNotInRatio,
    Bf16DraftLogits,
    BonusFromDraftRow,
    BonusFromRowK,
    InverseCdfNoGuard,
    NearEqualShortcut,
    RankMappingBeyond16,
    StaleWorkspace,
]
VALID: list[type[Rule] | type[ScalarLoop]] = [
    Rule,
    ExponentialRace,
    Float32Arithmetic,
    SamplerMatch,
    BonusSkipped,
    ScalarLoop,
]


def spec(cls: type[Rule] | type[ScalarLoop]) -> MutantSpec:
    """The zoo entry of a rule class: its name, kind, what it models and its verdicts; `make` is the class."""
    return MutantSpec(cls.__name__, cls.kind, one_line(cls.models), tuple(cls.expected), cls)


#: The rule level's zoo (what `exactspec kill-table --level rule` runs): the mutants, then the valid variants.
ZOO: tuple[MutantSpec, ...] = zoo(spec(cls) for cls in MUTANTS + VALID)
