"""Generation-level mutants: one-method variants of `ReferenceLoop`, each modelling a real bug.

Every mutant is a valid adapter object (it offers ``generate`` and ``generate_batch``) whose output law
differs from the target's; the meta-test (tests/test_sequence_meta.py) shows the sequence-level suite
rejects each of them under the quick profile, while the benign variants (law-preserving changes) and the
correct implementations are certified. The rule-level suite cannot see most of these: each round here is
settled by the exact rule, the bug is in what is fed to it or in what is done with its output.

`ZOO` holds one `core.mutants.MutantSpec` per entry: the mutants (`MUTANTS`), then the valid variants (the
reference loop and `BENIGN`). A spec's name is the class's `name`, the class name in kebab case after the
"mutant-" or "benign-" prefix (`KvNotRolledBack` is "mutant-kv-not-rolled-back"). The engine level serves the
mutants it names (`engine.serve.mutants.SERVED_MUTANTS`), not every entry of this zoo.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .reference_loop import ReferenceLoop, _Row
from ..core.mutants import MutantSpec, mutant, valid_variant, zoo
from ...reference.sampling import sample_token
from ...reference.rules import verify
from ...reference.warping import SamplingParams, warp_probs


def _with(sampling: SamplingParams, **changes) -> SamplingParams:
    values: dict[str, Any] = {
        "temperature": sampling.temperature,
        "top_k": sampling.top_k,
        "top_p": sampling.top_p,
        "min_p": sampling.min_p,
    }
    values.update(changes)
    return SamplingParams(**values)


class DraftTemperatureMismatch(ReferenceLoop):
    """Draft tokens sampled at temperature 1 (the draft model's own generation config) while the q in the
    ratio is taken at the requested temperature. Models huggingface/transformers#32867 (assistant run
    greedily while its sampled-T probabilities were used as q; fixed by #33534) and the hidden
    T = 1 assistant of transformers#40976."""

    name = "mutant-draft-temperature-mismatch"

    def draft_dists(self, logits, sampling):
        q = sampling.warp(logits)
        sample_from = q if sampling.greedy else _with(sampling, temperature=1.0).warp(logits)
        return sample_from, q


class TargetVerifiedAtT1(ReferenceLoop):
    """Target rows verified at temperature 1 with no filters, whatever was requested (warpers applied only
    when sampling a fresh token, not to the verification logits): p is the raw softmax."""

    name = "mutant-target-verified-at-t1"

    def target_dists(self, logits, sampling):
        return sampling.warp(logits) if sampling.greedy else warp_probs(logits, 1.0)


class TopKDraftOnly(ReferenceLoop):
    """top-k applied to the draft (both its sampling and q) but not to the target rows."""

    name = "mutant-top-k-draft-only"

    def target_dists(self, logits, sampling):
        return (
            _with(sampling, top_k=None).warp(logits)
            if not sampling.greedy
            else sampling.warp(logits)
        )


class QFromRawLogits(ReferenceLoop):
    """Draft sampled from the processed (warped) distribution but q taken from the raw logits' softmax.
    Models huggingface/transformers#47932 (candidate generators return a q they did not sample from)."""

    name = "mutant-q-from-raw-logits"

    def draft_dists(self, logits, sampling):
        sample_from = sampling.warp(logits)
        return sample_from, warp_probs(logits, 1.0)


class BonusFromWrongRow(ReferenceLoop):
    """When all k drafts are accepted, the bonus token is drawn from row k-1 (the row that judged the last
    draft, i.e. the position a rejection would have used) instead of row k: an off-by-one in picking the
    final token's row (cf. vllm-project/vllm#9730 and #8320 on which row the bonus token comes from)."""

    name = "mutant-bonus-from-wrong-row"

    def settle(self, p, q, x, rng):
        emitted = verify(p, q, x, rng)
        k = len(x)
        if len(emitted) == k + 1:
            emitted[-1] = sample_token(p[k - 1], rng)
        return emitted


class KvNotRolledBack(ReferenceLoop):
    """Target KV cache not rolled back after a rejection: later target rows stay conditioned on the
    rejected draft token (placed before the correction token). Models openvinotoolkit/openvino.genai#4190
    (row conditioned on the rejected draft), ml-explore/mlx-lm#1109 and paiml/aprender#2014 (cache
    rewind missing/wrong)."""

    name = "mutant-kv-not-rolled-back"

    def next_target_context(self, row: _Row, drafts, emitted):
        n_accepted = len(emitted) - 1
        # a rejection: the stale entry of the rejected draft stays in the cache
        if n_accepted < len(drafts):
            return row.target_context + list(drafts[: n_accepted + 1]) + [int(emitted[-1])]
        return row.target_context + list(emitted)


class BatchRowsSwapped(ReferenceLoop):
    """Ragged batches: when rows accept different numbers of drafts in a round, the emitted tokens are
    gathered with the wrong row index (rows 0 and 1 exchanged). Models ml-explore/mlx-vlm#1155 (per-row
    K/V and offsets corrupted in batched speculative decoding when rows accept different counts)."""

    name = "mutant-batch-rows-swapped"

    def settle_batch(self, emitted):
        if (
            len(emitted) >= 2
            and emitted[0] is not None
            and emitted[1] is not None
            and len(emitted[0]) != len(emitted[1])
        ):
            emitted = [emitted[1], emitted[0]] + list(emitted[2:])
        return emitted


class SeedReusedEachRound(ReferenceLoop):
    """The generator is re-seeded with the request seed at every round (e.g. torch.manual_seed(seed)
    inside the loop), so every round reuses the same uniforms: rounds are no longer independent."""

    name = "mutant-seed-reused-each-round"

    def round_rng(self, row: _Row):
        return np.random.default_rng(row.seed)


class ResampleFromP(ReferenceLoop):
    """After a rejection the correction token is drawn from p instead of norm(max(0, p - q)) -- the most
    common hand-written speculative-sampling bug (double-counts the mass the draft already offered)."""

    name = "mutant-resample-from-p"

    def settle(self, p, q, x, rng):
        emitted = verify(p, q, x, rng)
        k = len(x)
        if len(emitted) <= k:  # a rejection happened at position len(emitted) - 1
            emitted[-1] = sample_token(p[len(emitted) - 1], rng)
        return emitted


class EosOnlyAtRoundEnd(ReferenceLoop):
    """EOS looked for only in the last token of a round: an EOS accepted inside the drafts is kept and
    generation continues past it (the failure transformers guards against when it crops candidates at EOS)."""

    name = "mutant-eos-only-at-round-end"

    def _apply(self, row, emitted, drafts, max_new_tokens, eos):
        for token in emitted:
            row.out.append(int(token))
            if len(row.out) >= max_new_tokens:
                row.done = True
                break
        if eos is not None and row.out and row.out[-1] == eos:
            row.done = True
        row.target_context = self.next_target_context(row, drafts, emitted)


MUTANTS = [
    DraftTemperatureMismatch,
    TargetVerifiedAtT1,
    TopKDraftOnly,
    QFromRawLogits,
    BonusFromWrongRow,
    KvNotRolledBack,
    BatchRowsSwapped,
    SeedReusedEachRound,
    ResampleFromP,
    EosOnlyAtRoundEnd,
]


class BonusDropped(ReferenceLoop):
    """Benign (law-preserving): the bonus token is dropped when all k drafts are accepted. Slower, but the
    next round draws that token from the same target row, so the output law is unchanged: the suite must
    certify it (a check that flags it would be a false failure)."""

    name = "benign-bonus-dropped"

    def settle(self, p, q, x, rng):
        emitted = verify(p, q, x, rng)
        return emitted[: len(x)] if len(emitted) == len(x) + 1 else emitted


class NoMemo(ReferenceLoop):
    """Benign: the reference loop without row memoisation (same law, different random stream use: none)."""

    name = "benign-no-memo"

    def __init__(self) -> None:
        super().__init__(memoize=False)


BENIGN = [BonusDropped]

#: The sequence level's zoo (what `exactspec kill-table --level sequence` runs): the mutants, then the valid variants.
ZOO: tuple[MutantSpec, ...] = zoo(
    [mutant(m.name, m.__doc__, m) for m in MUTANTS]
    + [valid_variant(ReferenceLoop.name, "Valid: " + (ReferenceLoop.__doc__ or ""), ReferenceLoop)]
    + [valid_variant(b.name, b.__doc__, b) for b in BENIGN]
)
