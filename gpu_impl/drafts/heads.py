"""Prediction heads on the target itself (multi-token prediction, MTP style) as a draft source.

Head i (i = 1..h) is a small block reading the previous state and the embedding of the token just
before the one it predicts, then the target's own frozen final norm and LM head:

    s_0 = h_t                    (the target's last hidden state whose LM-head output gave the pending x_{t+1})
    s_i = block_i(s_{i-1}, E(x_{t+i}))      logits_i = lm_head(norm_i(s_i))  -> x_{t+i+1}

Why MTP rather than Medusa-1 (one residual block per head on h_t alone): head 1 sees the pending token,
which the target *sampled* from p_t; a Medusa-1 head on h_t cannot know which token was drawn and so
predicts x_{t+2} averaged over every possible x_{t+1}, which at T > 0 (and at T = 0 whenever the next
token is uncertain) loses most of its acceptance. Each later head likewise sees the token the previous
head drafted. A block has no attention (a fuse of the two inputs plus one MLP), so the heads keep no
cache and roll back for free: a round costs the target's verification forward plus h small blocks and
h LM-head products.

q of drafted token i is `warp(logits_i)` with the target's `SamplingParams`, and the token is drawn from
q with the row's generator, so the standard rule stays exact whatever the heads' quality.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from pathlib import Path

import torch
from torch import nn

from ...cache import cache_root
from ...reference.warping import SamplingParams

from ..sampling.randomness import Generators, sample
from ..sampling.warping import warp
from .base import DraftSource

HEADS_FORMAT = 1
TRAIN_COMMAND = "exactspec train-heads"


class HeadBlock(nn.Module):
    """One MTP head: fuse(norm(state), norm(E x)) -> + MLP residual -> state; `norm_out` feeds the LM head."""

    def __init__(self, hidden_size: int, inner_size: int, eps: float = 1e-5):
        super().__init__()
        self.norm_state = nn.RMSNorm(hidden_size, eps=eps)
        self.norm_token = nn.RMSNorm(hidden_size, eps=eps)
        self.fuse = nn.Linear(2 * hidden_size, hidden_size, bias=False)
        self.norm_mlp = nn.RMSNorm(hidden_size, eps=eps)
        self.up = nn.Linear(hidden_size, inner_size, bias=False)
        self.down = nn.Linear(inner_size, hidden_size, bias=False)
        self.norm_out = nn.RMSNorm(hidden_size, eps=eps)

    def forward(self, state: torch.Tensor, token_embedding: torch.Tensor) -> torch.Tensor:
        x = self.fuse(torch.cat([self.norm_state(state), self.norm_token(token_embedding)], dim=-1))
        return x + self.down(nn.functional.silu(self.up(self.norm_mlp(x))))


class PredictionHeads(nn.Module):
    """h chained `HeadBlock`s for a target of width `hidden_size` (the target's modules are not part of it)."""

    def __init__(
        self, hidden_size: int, n_heads: int = 3, inner_size: int | None = None, seed: int = 0
    ):
        super().__init__()
        for name, value in (("hidden_size", hidden_size), ("n_heads", n_heads)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.config = {
            "hidden_size": hidden_size,
            "n_heads": n_heads,
            "inner_size": inner_size or 2 * hidden_size,
        }
        state = torch.random.get_rng_state()
        try:
            torch.manual_seed(seed)
            self.blocks = nn.ModuleList(
                HeadBlock(hidden_size, self.config["inner_size"]) for _ in range(n_heads)
            )
        finally:
            torch.random.set_rng_state(state)
        # start as "the state carries on": identity on the state half, small on the token half
        with torch.no_grad():
            for block in self.blocks:
                block.fuse.weight[:, :hidden_size].copy_(torch.eye(hidden_size))
                block.fuse.weight[:, hidden_size:].mul_(0.1)
                block.down.weight.mul_(0.1)

    @property
    def n_heads(self) -> int:
        return self.config["n_heads"]


def target_parts(target: nn.Module) -> tuple[nn.Module, nn.Module]:
    """(input embedding, LM head) of a causal LM; ValueError if it has neither."""
    embed, head = target.get_input_embeddings(), target.get_output_embeddings()
    if embed is None or head is None:
        raise ValueError(
            "target must be a causal LM with input embeddings and an LM head for a heads draft"
        )
    return embed, head


def head_logits(
    heads: PredictionHeads,
    i: int,
    state: torch.Tensor,
    token_embedding: torch.Tensor,
    lm_head: nn.Module,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(next state, logits) of head i: the one step shared by drafting and training."""
    state = heads.blocks[i](state, token_embedding)
    return state, lm_head(heads.blocks[i].norm_out(state))


# ----------------------------------------------------------------------------------------------------------
# Saved weights: safetensors under the cache root, keyed by the target model
# ----------------------------------------------------------------------------------------------------------


def target_key(target: nn.Module) -> str:
    """A name for `target`: its model type and a hash of its config and a slice of its LM-head weights."""
    _, lm_head = target_parts(target)
    digest = hashlib.sha256(target.config.to_json_string(use_diff=False).encode())
    digest.update(lm_head.weight.detach()[:4].float().cpu().numpy().tobytes())
    return f"{target.config.model_type}-{digest.hexdigest()[:12]}"


def default_heads_path(target: nn.Module) -> Path:
    """Where `exactspec train-heads` saves the heads of `target`: <cache root>/heads/<target key>/heads.safetensors."""
    return cache_root() / "heads" / target_key(target) / "heads.safetensors"


def save_heads(
    heads: PredictionHeads, path: str | Path, target: nn.Module, info: dict | None = None
) -> Path:
    """Write the heads' weights and config (and the target's key, and `info`) as one safetensors file."""
    # safetensors (the [torch] extra): only saving trained heads needs it
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {
        "format": str(HEADS_FORMAT),
        "config": json.dumps(heads.config),
        "target": target_key(target),
        "info": json.dumps(info or {}),
    }
    tensors = {name: t.detach().contiguous().cpu() for name, t in heads.state_dict().items()}
    save_file(tensors, str(path), metadata=metadata)
    return path


def load_heads(path: str | Path, target: nn.Module) -> PredictionHeads:
    """The heads saved at `path`; ValueError if missing (naming the training command) or trained for another target."""
    # safetensors (the [torch] extra): only loading trained heads needs it
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise ValueError(
            f"no trained heads at {path}; train them first with `{TRAIN_COMMAND}`"
            " (see README, 'Prediction heads')"
        )
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata() or {}
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    if metadata.get("format") != str(HEADS_FORMAT):
        raise ValueError(
            f"{path} is not an exactspec heads file (format {metadata.get('format')!r})"
        )
    if metadata.get("target") != target_key(target):
        raise ValueError(
            f"{path} holds heads trained for target {metadata.get('target')!r}, not this target "
            f"({target_key(target)}); retrain with `{TRAIN_COMMAND}`"
        )
    heads = PredictionHeads(**json.loads(metadata["config"]))
    heads.load_state_dict(tensors)
    heads.info = json.loads(metadata.get("info", "{}"))
    return heads.to(next(target.parameters()).device, next(target.parameters()).dtype).eval()


# ----------------------------------------------------------------------------------------------------------
# The draft source
# ----------------------------------------------------------------------------------------------------------


class HeadsDraft(DraftSource):
    """Drafts up to h tokens per round from `heads` on the hidden state of the target's latest forward.

    The generator hands the target's final-norm states over through `observe_target` (it asks the target
    to keep them because `wants_target_hidden` is True). Before the first of them (a one-token prompt) the
    source proposes nothing, so that round is a plain step.
    """

    wants_target_hidden = True

    def __init__(self, target: nn.Module, heads: PredictionHeads):
        if not isinstance(heads, PredictionHeads):
            raise ValueError(f"heads must be PredictionHeads, got {type(heads).__name__}")
        self.embed, self.lm_head = target_parts(target)
        if heads.config["hidden_size"] != self.embed.weight.shape[1]:
            raise ValueError(
                f"heads of width {heads.config['hidden_size']} do not fit a target of width "
                f"{self.embed.weight.shape[1]}"
            )
        self.heads = heads.eval()
        self.hidden = None

    def check_compatible(self, target_model, target_tokenizer=None) -> None:
        if target_model.get_output_embeddings() is not self.lm_head:
            raise ValueError("a HeadsDraft drafts only for the target it was built on")

    def reset(self, input_ids, valid, vocab_size) -> None:
        self.pending, self.vocab_size, self.hidden = input_ids[:, -1], vocab_size, None

    def observe_target(self, hidden: torch.Tensor | None, counts: torch.Tensor | None) -> None:
        if hidden is None:
            return
        slot = hidden.shape[1] - 1 if counts is None else None
        if slot is not None:
            self.hidden = hidden[:, slot]
        else:
            index = (counts - 1)[:, None, None].expand(-1, 1, hidden.shape[2])
            self.hidden = hidden.gather(1, index).squeeze(1)

    def _logits(
        self, i: int, state: torch.Tensor, token: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        state, logits = head_logits(self.heads, i, state, self.embed(token), self.lm_head)
        return state, logits.float()[:, : self.vocab_size]

    def propose(self, k: int, sampling: SamplingParams, generators: Generators):
        n = 0 if self.hidden is None else min(k, self.heads.n_heads)
        if n == 0:
            empty = self.pending.new_zeros((self.pending.shape[0], 0))
            return empty, torch.zeros((*empty.shape, self.vocab_size), device=self.pending.device)
        state, token, tokens, probs = self.hidden, self.pending, [], []
        for i in range(n):
            state, logits = self._logits(i, state, token)
            q = warp(logits, sampling)
            token = q.argmax(-1) if sampling.greedy else sample(q, generators)
            tokens.append(token)
            probs.append(q)
        return torch.stack(tokens, dim=1), torch.stack(probs, dim=1)

    def accept(self, tokens, counts, emitted) -> None:
        self.pending = tokens.gather(1, (counts - 1)[:, None]).squeeze(1)

    @torch.inference_mode()
    def step_seconds(self) -> float:
        """Median seconds of one head step (block + LM head) at the current batch size."""
        batch = self.pending.shape[0]
        state = torch.zeros(
            (batch, self.heads.config["hidden_size"]),
            device=self.pending.device,
            dtype=self.embed.weight.dtype,
        )
        token = self.pending.new_zeros(batch)
        seconds = []
        for _ in range(6):
            start = time.perf_counter()
            self._logits(0, state, token)
            seconds.append(time.perf_counter() - start)
        return statistics.median(seconds[1:])
