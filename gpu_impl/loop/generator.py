"""Speculative decoding loop: draft proposes k tokens, the target scores all k+1 positions in one forward,
the on-device sampler verifies, both caches roll back the rejected positions.

The one-screen version of the same loop, slow and readable (no KV cache, no ragged batch, fixed k, NumPy
rule), is the sequence level's reference adapter `conformance/sequence/reference_loop.py` (`ReferenceLoop`);
this module adds the caches, ragged batches, on-device verification and the k policy, for the same law.

Batches are ragged: every row accepts its own number of drafts.  Both caches keep per-row slot masks
and position ids (see `kv`), so each row computes exactly what it would alone; each row also owns its
random stream (seed + b), so row b of a batch reproduces a lone run seeded seed + b (up to float
summation order in batched matmuls).  One host sync per round reads the emitted tokens.

A deterministic draft (prompt lookup: q one-hot) at T > 0 is verified by sampler-match, the standard rule's
law for a one-hot q (proofs C10): each position's token is drawn from p by the next uniform and the draft is
kept while they agree.  On a CPU each row's stream is then rewound to the uniforms the round used (one per
emitted token, as a plain step), so the tokens are plain decoding's for the same seed, whatever k was chosen
and whatever was proposed (up to float summation order): benchmarks compare k on the same samples.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import torch

from ...reference.validation import check_k
from ...reference.warping import SamplingParams

from ..cost.cost_calibration import cached_costs, measure_and_store
from ..cost.k_policy import POLICIES, CostModelK, Costs, next_k
from ..drafts.base import DraftSource
from ..sampling.randomness import make_generators, rewind, rewindable, stream_states
from ..sampling.sampler import MODES, verify_batch
from ..sampling.warping import warp
from .kv import CachedModel
from .plain import plain_step
from .prompts import TokenCollector, check_limits, check_prompt, row_seeds
from .stats import GenerationResult, SpecStats
from .vocab import logit_width


class SpeculativeGenerator:
    """Exact speculative sampling of `target_model` with proposals from `draft`.

    `adaptive_k`: False/"fixed" drafts k tokens every round; True/"grow-shrink" grows or shrinks k by one
    with the acceptance; "cost" picks k in 0..k_max each round from the walltime model, with v(n) and c
    measured once per machine and model (cached, see `cost_calibration`) and refined by the run's own timers (see
    `k_policy`), and the closing stats say what it decided and why (`policy_note`); on CUDA pass
    `precise_timing=True` so the timers split draft and target time (otherwise the round's one sync
    charges the draft's queued work to the target).
    `cpu_matmul` picks the target's CPU Linear kernels ("auto": this machine's measured plan, "stock":
    F.linear); a model draft takes its own `cpu_matmul` argument. `on_progress` receives one line per
    step of a cost calibration while it runs (the CLI prints them).
    """

    def __init__(
        self,
        target_model: torch.nn.Module,
        draft: DraftSource,
        k: int = 4,
        sampling: SamplingParams = SamplingParams(),
        mode: str = "standard",
        adaptive_k: bool | str = False,
        target_tokenizer=None,
        k_max: int | None = None,
        precise_timing: bool = False,
        cpu_matmul: str = "auto",
        on_progress: Callable[[str], None] | None = None,
    ):
        self.k = check_k(k)
        self.k_max = check_k(k_max if k_max is not None else 2 * self.k, "k_max")
        policy = (
            ("grow-shrink" if adaptive_k else "fixed")
            if isinstance(adaptive_k, bool)
            else adaptive_k
        )
        if policy not in POLICIES:
            raise ValueError(f"adaptive_k must be a bool or one of {POLICIES}, got {adaptive_k!r}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if not isinstance(draft, DraftSource):
            raise ValueError(f"draft must be a DraftSource, got {type(draft).__name__}")
        if not isinstance(sampling, SamplingParams):
            raise ValueError(f"sampling must be a SamplingParams, got {type(sampling).__name__}")
        draft.check_compatible(target_model, target_tokenizer)
        self.target = CachedModel(target_model.eval(), cpu_matmul)
        # heads drafts read the target's last hidden states
        self.target.keep_hidden = draft.wants_target_hidden
        self.vocab_size = logit_width(target_model)
        self.draft, self.sampling, self.mode, self.policy = draft, sampling, mode, policy
        self.costs: dict[int, Costs] = {}  # measured per batch size, for the "cost" policy
        # synchronize CUDA around timed sections (costs overlap)
        self.precise_timing = precise_timing
        # receives progress lines of the cost calibration (when one runs)
        self.on_progress = on_progress

    @property
    def plain_coupled(self) -> bool:
        """Verify by sampler-match on plain decoding's stream (module docstring): a deterministic draft at T > 0.
        Read each round: the CLI sets `sampling` per batch."""
        return self.mode == "standard" and self.draft.deterministic and not self.sampling.greedy

    @property
    def same_tokens_as_plain(self) -> bool:
        """Whether the tokens are plain decoding's for the same seeds (up to float summation order): greedy
        sampling, or `plain_coupled` on a CPU (where each round rewinds the streams)."""
        return self.sampling.greedy or (self.plain_coupled and rewindable(self.target.device))

    def _clock(self) -> float:
        if self.precise_timing and self.target.device.type == "cuda":
            torch.cuda.synchronize(self.target.device)
        return time.perf_counter()

    @torch.inference_mode()
    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int,
        seed: int | Sequence[int] = 0,
        eos_token_id: int | Sequence[int] | None = None,
        attention_mask: torch.Tensor | None = None,
        on_tokens: Callable[[int, list[int]], None] | None = None,
    ) -> GenerationResult:
        """New tokens per row (prompt excluded), cut after EOS (inclusive) and at max_new_tokens.

        Row b draws from torch.Generator(seed + b) (or seed[b] when a list is given).
        """
        eos_ids = check_limits(max_new_tokens, eos_token_id)
        start = time.perf_counter()
        ids, valid = check_prompt(input_ids, attention_mask, self.target.device)
        batch = ids.shape[0]
        seeds = row_seeds(seed, batch)
        generators = make_generators(seeds, self.target.device)
        collector = TokenCollector(batch, max_new_tokens, eos_ids, on_tokens)
        stats = SpecStats()
        self._prefill(ids, valid, stats)
        chooser = (
            CostModelK(self._costs(batch, stats), self.k_max, seed=seeds[0])
            if self.policy == "cost"
            else None
        )
        pending, k = ids[:, -1], self.k
        while not collector.all_done:
            if chooser is not None:
                k = chooser.choose()
            times = (stats.target_time_s, stats.draft_time_s)
            tokens, counts, emitted = self._round(pending, k, generators, stats)
            pending = tokens.gather(1, (counts - 1)[:, None]).squeeze(1)
            accepted = [len(row) - 1 for row in emitted]
            live = [row for row, done in enumerate(collector.done) if not done]
            stats.record_round(tokens.shape[1] - 1, [accepted[row] for row in live], rows=live)
            for row, new in enumerate(emitted):
                collector.add(row, new)
            if chooser is not None:
                chooser.update(
                    tokens.shape[1] - 1,
                    accepted,
                    stats.target_time_s - times[0],
                    stats.draft_time_s - times[1],
                )
            elif self.policy == "grow-shrink":
                k = next_k(k, accepted, self.k_max)
        if chooser is not None:
            self._learn(batch, chooser, stats)
        stats.target_calls = self.target.calls
        stats.draft_calls = getattr(getattr(self.draft, "cached", None), "calls", 0)
        stats.new_tokens = sum(map(len, collector.sequences))
        stats.wall_time_s = time.perf_counter() - start
        stats.finish()
        return GenerationResult(collector.sequences, stats)

    def _prefill(self, ids: torch.Tensor, valid: torch.Tensor | None, stats: SpecStats) -> None:
        """Feed every prompt token but the last ("pending") to the target; let the draft start."""
        t0 = self._clock()
        self.target.reset(ids.shape[0])
        if ids.shape[1] > 1:
            self.target.forward(
                ids[:, :-1], None if valid is None else valid[:, :-1], last_only=True
            )
        t1 = self._clock()
        self.draft.reset(ids, valid, self.vocab_size)
        if self.draft.wants_target_hidden:
            self.draft.observe_target(self.target.last_hidden, None)
        stats.target_time_s += t1 - t0
        stats.draft_time_s += self._clock() - t1
        stats.prefill_time_s = self._clock() - t0

    @property
    def calibration_widths(self) -> list[int]:
        """The widths v(n) is measured at: one plain step up to k_max drafts and the bonus (n = 1..k_max+1)."""
        return list(range(1, self.k_max + 2))

    def _costs(self, batch: int, stats: SpecStats) -> Costs:
        """v(n) for n = 1..k_max+1 (cached per machine and model, `cost_calibration`) and c, on the prefilled caches.

        Once per batch size and generator; later calls start from what the previous call's timers learned.
        """
        if batch not in self.costs:
            start = time.perf_counter()
            costs, stats.calibration_source = cached_costs(
                self.target.model,
                batch,
                self.target.plan,
                self.calibration_widths,
                self.target.time_forward,
                self.on_progress,
            )
            draft_s = self.draft.step_seconds()
            if draft_s > 0:  # a model draft: its step against a plain target step timed now
                costs.c = draft_s / statistics.median(self.target.time_forward(1) for _ in range(3))
            self.costs[batch] = costs
            stats.calibration_time_s = time.perf_counter() - start
        return self.costs[batch]

    def _learn(self, batch: int, chooser: CostModelK, stats: SpecStats) -> None:
        """Keep what the timers learned for the next call (and the cache, when they contradicted it); say what was decided."""
        self.costs[batch] = chooser.costs()
        stats.policy_note, stats.policy_summary = chooser.note(), chooser.summary()
        # measured again for the next run (its time counts as calibration)
        if chooser.calibration_disagrees:
            start = time.perf_counter()
            fresh = measure_and_store(
                self.target.model,
                batch,
                self.target.plan,
                self.calibration_widths,
                self.target.time_forward,
                self.on_progress,
            )
            fresh.c = self.costs[batch].c
            self.costs[batch] = fresh
            stats.calibration_time_s += time.perf_counter() - start
            stats.calibration_source = ", ".join(
                filter(
                    None,
                    [
                        stats.calibration_source,
                        "measured again after the run, whose timers contradicted it",
                    ],
                )
            )
            stats.policy_note += "; calibration measured again"

    def _round(self, pending: torch.Tensor, k: int, generators, stats: SpecStats):
        """Draft k' tokens, score k'+1 positions in one target forward, verify, roll both caches back.

        A source may propose k' = 0 tokens (e.g. prompt lookup with no match): the round is then one plain
        decoding step. Whether to draft depends only on the context, so the law stays exact.

        -> (tokens (B, k'+1) padded with -1, counts (B,), emitted tokens per row on the host).
        """
        t0 = self._clock()
        draft_tokens, draft_probs = self.draft.propose(k, self.sampling, generators)
        if draft_tokens.shape[1] > k:
            raise ValueError(
                f"draft source proposed {draft_tokens.shape[1]} tokens, more than k = {k}"
            )
        t1 = self._clock()
        logits = self.target.forward(torch.cat([pending[:, None], draft_tokens], dim=1))
        states = None
        # nothing proposed: a plain decoding step from p (at T = 0 its argmax)
        if draft_tokens.shape[1] == 0:
            tokens = plain_step(logits[:, 0], self.sampling, generators)[:, None]
            counts = torch.ones_like(tokens[:, 0])
        else:
            states = stream_states(generators) if self.plain_coupled else None
            mode = "sampler_match" if self.plain_coupled else self.mode
            tokens, counts = verify_batch(
                warp(logits, self.sampling), draft_probs, draft_tokens, generators, mode
            )
        host = torch.cat(
            [tokens, counts[:, None]], dim=1
        ).tolist()  # the round's one device->host sync
        emitted = [row[: row[-1]] for row in host]
        if states is not None:
            rewind(generators, states, [len(row) for row in emitted])
        self.target.keep_in_tail(tokens.shape[1], counts, [len(row) for row in emitted])
        t2 = self._clock()
        self.draft.accept(tokens, counts, emitted)
        if self.draft.wants_target_hidden:
            self.draft.observe_target(self.target.last_hidden, counts)
        stats.target_time_s += t2 - t1
        stats.draft_time_s += (t1 - t0) + (self._clock() - t2)
        return tokens, counts, emitted
