"""Train prediction heads on a frozen target by self-distillation (KL to the target's own next-token laws).

Data: windows of token ids (N, L) and the target's final-norm states on them (N, L, d), computed once
(`collect_states`). The 49k-wide target distributions are not stored: `distill_loss` recomputes them from
the stored states with the target's LM head, on the fly. For a window position t head i reads the chain
s_0 = h_t, tokens x_{t+1}..x_{t+i} (the text, teacher-forced) and is pulled towards p(. | x_{<=t+i}) =
softmax(lm_head(h_{t+i})), the target's own law of the token it drafts.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from tqdm import tqdm

from ..drafts.heads import PredictionHeads, head_logits, target_parts


@dataclass
class TrainConfig:
    """Training settings; `time_limit_s` stops early (the report says how many steps ran)."""

    n_heads: int = 3
    steps: int = 600
    batch: int = 4  # windows per step
    learning_rate: float = 2e-3
    weight_decay: float = 0.0
    seed: int = 0
    time_limit_s: float | None = None
    # KL over the training text's own tokens only (exact KL: False; ~10x slower)
    text_vocabulary: bool = True

    def check(self) -> None:
        for name in ("n_heads", "steps", "batch"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")


def _fast_matmuls(device: torch.device | str):
    """bfloat16 autocast (2-3x faster matmuls on an AVX-512 CPU; softmax and the loss stay float32).

    Training only: the draft at generation time runs the heads in the target's dtype.
    """
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


@torch.inference_mode()
def collect_states(
    target: torch.nn.Module, ids: torch.Tensor, batch: int = 8, progress: bool = False
) -> torch.Tensor:
    """The target's final-norm states (N, L, d) on windows `ids` (N, L), float32 on the CPU."""
    decoder = target.get_decoder()
    device = next(target.parameters()).device
    out = []
    for start in tqdm(
        range(0, ids.shape[0], batch), desc="target states", unit="batch", disable=not progress
    ):
        chunk = ids[start : start + batch].to(device)
        with _fast_matmuls(device):
            out.append(decoder(input_ids=chunk).last_hidden_state.float().cpu())
    return torch.cat(out)


def _projection(lm_head: torch.nn.Module, vocab: torch.Tensor | None):
    """The LM head, or its rows `vocab` only (training on the text's own tokens: a fraction of the cost)."""
    if vocab is None:
        return lm_head
    weight = lm_head.weight[vocab]
    bias = None if getattr(lm_head, "bias", None) is None else lm_head.bias[vocab]
    return lambda x: F.linear(x, weight, bias)


def distill_loss(
    heads: PredictionHeads,
    target: torch.nn.Module,
    ids: torch.Tensor,
    states: torch.Tensor,
    vocab: torch.Tensor | None = None,
):
    """(mean KL over heads, per-head KL, per-head top-1 agreement, per-head sum min(p, q)) on windows (B, L) with
    states (B, L, d); with `vocab` (token ids) both laws are restricted to those tokens and renormalised."""
    embed, lm_head = target_parts(target)
    lm_head = _projection(lm_head, vocab)
    n_heads, length = heads.n_heads, ids.shape[1]
    if length <= n_heads:
        raise ValueError(
            f"windows must be longer than the number of heads ({n_heads}), got length {length}"
        )
    state, width = states[:, : length - n_heads], length - n_heads
    with torch.no_grad():  # the target's own laws at positions 1..L-1, once for every head
        all_log_p = F.log_softmax(lm_head(states[:, 1:]).float(), dim=-1)
    losses, agreement, overlap = [], [], []
    for i in range(n_heads):
        tokens = ids[:, i + 1 : width + i + 1]
        state, logits = head_logits(heads, i, state, embed(tokens), lm_head)
        target_log_p = all_log_p[:, i : width + i]
        log_q = F.log_softmax(logits.float(), dim=-1)
        kl = (target_log_p.exp() * (target_log_p - log_q)).sum(-1)
        losses.append(kl.mean())
        with torch.no_grad():
            agreement.append((log_q.argmax(-1) == target_log_p.argmax(-1)).float().mean())
            overlap.append(torch.minimum(log_q.exp(), target_log_p.exp()).sum(-1).mean())
    return (
        torch.stack(losses).mean(),
        torch.stack(losses),
        torch.stack(agreement),
        torch.stack(overlap),
    )


@torch.no_grad()
def evaluate(
    heads: PredictionHeads,
    target: torch.nn.Module,
    ids: torch.Tensor,
    states: torch.Tensor,
    batch: int = 8,
    max_windows: int = 24,
) -> dict[str, list[float]]:
    """Per-head KL, top-1 agreement (~ greedy acceptance) and sum min(p, q) (~ acceptance at T = 1) on (at most
    `max_windows`) held-out windows, over the full vocabulary."""
    ids, states = ids[:max_windows], states[:max_windows]
    sums = None
    for start in range(0, ids.shape[0], batch):
        with _fast_matmuls(states.device):
            _, kl, top1, overlap = distill_loss(
                heads, target, ids[start : start + batch], states[start : start + batch]
            )
        part = torch.stack([kl, top1, overlap]) * ids[start : start + batch].shape[0]
        sums = part if sums is None else sums + part
    means = (sums / ids.shape[0]).tolist()
    return {"kl": means[0], "top1_agreement": means[1], "overlap_min_p_q": means[2]}


def _schedule(step: int, progress: float, warmup: int = 10) -> float:
    """Linear warm-up, then cosine decay to 10 % of the peak learning rate over `progress` in [0, 1]."""
    if step < warmup:
        return (step + 1) / warmup
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def _progress(step: int, config: TrainConfig, elapsed: float) -> float:
    """How far training is: the larger of the step fraction and the time-limit fraction."""
    by_time = elapsed / config.time_limit_s if config.time_limit_s else 0.0
    return max(step / config.steps, by_time)


def train_heads(
    target: torch.nn.Module,
    train: tuple[torch.Tensor, torch.Tensor],
    held_out: tuple[torch.Tensor, torch.Tensor],
    config: TrainConfig = TrainConfig(),
    progress: bool = True,
) -> tuple[PredictionHeads, dict]:
    """Heads trained on (ids, states) windows; -> (heads, report with the held-out figures before and after)."""
    config.check()
    ids, states = train
    if ids.shape[0] < 1 or held_out[0].shape[0] < 1:
        raise ValueError("train and held_out must each hold at least one window")
    for p in target.parameters():
        p.requires_grad_(False)
    heads = PredictionHeads(states.shape[-1], config.n_heads, seed=config.seed).to(states.dtype)
    optimizer = torch.optim.AdamW(
        heads.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
    )
    rng = torch.Generator().manual_seed(config.seed)
    vocab = torch.unique(ids) if config.text_vocabulary else None
    before = evaluate(heads, target, *held_out)
    start, losses, step = time.perf_counter(), [], 0
    bar = tqdm(range(config.steps), desc="training heads", unit="step", disable=not progress)
    for step in bar:
        if config.time_limit_s is not None and time.perf_counter() - start > config.time_limit_s:
            break
        for group in optimizer.param_groups:
            group["lr"] = config.learning_rate * _schedule(
                step, _progress(step, config, time.perf_counter() - start)
            )
        pick = torch.randint(0, ids.shape[0], (config.batch,), generator=rng)
        with _fast_matmuls(states.device):
            loss, per_head, _, _ = distill_loss(heads, target, ids[pick], states[pick], vocab)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(heads.parameters(), 1.0)
        optimizer.step()
        losses.append(float(loss.detach()))
        bar.set_postfix(
            kl=f"{loss.item():.3f}", per_head=",".join(f"{v:.2f}" for v in per_head.tolist())
        )
    else:
        step = config.steps
    heads.eval()
    report = {
        "config": asdict(config),
        "steps_run": step,
        "train_vocabulary": None if vocab is None else vocab.numel(),
        "train_seconds": time.perf_counter() - start,
        "train_windows": ids.shape[0],
        "window_length": ids.shape[1],
        "held_out_windows": held_out[0].shape[0],
        "train_loss_first_last": [losses[0], losses[-1]] if losses else [],
        "held_out_before": before,
        "held_out_after": evaluate(heads, target, *held_out),
    }
    return heads, report


def split_rows(n_rows: int, held_out_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """(train, held-out) row indices from a seeded permutation of `n_rows` (at least one of each).

    Split whole text rows (files, replies) before cutting windows, so no held-out window shares a text with training.
    """
    if not 0 < held_out_fraction < 1:
        raise ValueError(f"held_out_fraction must be in (0, 1), got {held_out_fraction!r}")
    if n_rows < 2:
        raise ValueError(f"need at least 2 text rows to hold some out, got {n_rows}")
    order = torch.randperm(n_rows, generator=torch.Generator().manual_seed(seed)).tolist()
    n_held = min(n_rows - 1, max(1, round(held_out_fraction * n_rows)))
    return order[n_held:], order[:n_held]
