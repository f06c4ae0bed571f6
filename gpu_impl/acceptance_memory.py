"""The cost policy's per-position acceptance rates, carried from one call to the next on the same prompt.

Why: an answer of 10-40 rounds spends a fair share of them learning how often the draft is accepted at
each position (from the prior 0.6 up to a copy's 0.95), and drafts too little meanwhile.  The same prompt
with the same target, draft and sampling (another seed, a re-run, the next sample of an evaluation)
meets the same acceptance profile, so the next call starts from the last one's rates, as at most
CARRY_WEIGHT pseudo-examinations per position (`k_policy.CostModelK`, `carried`).  Why the exact prompt
and not a task or a draft alone: carried into another kind of prompt (a copy's rates into chat), the
simulated policy kept 0.76-0.87 of the best fixed k where starting cold keeps 0.86-0.97; carried into the
same prompt, 0.97-1.00.  A carry never pins k: it decays with the run's own counts and is dropped at once
when the run contradicts it.  The output law is untouched: k still depends only on earlier outcomes.

One file per target, draft and sampling under cache_root()/acceptance, holding the MAX_PROMPTS prompts
used last.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict
from pathlib import Path

import torch

from ..cache import cache_root
from ..reference.warping import SamplingParams

from .cost_calibration import model_fingerprint
from .drafts.base import DraftSource

MEMORY_VERSION = 1
#: Pseudo-examinations a carried rate counts for at most: sweeps of the tests' simulator (13 rounds) kept
#: 0.96-1.00 of the best fixed k with 2 or 4; more would slow the drop of a carry the run contradicts.
CARRY_WEIGHT = 4.0
#: Prompts remembered per target, draft and sampling (the least recently used go first).
MAX_PROMPTS = 64


def prompt_digest(ids: torch.Tensor, valid: torch.Tensor | None) -> str:
    """A hash of every row's real prompt tokens (padding excluded)."""
    rows = ids.tolist()
    masks = valid.tolist() if valid is not None else [[True] * len(row) for row in rows]
    text = json.dumps([[t for t, real in zip(row, mask) if real] for row, mask in zip(rows, masks)])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def draft_identity(draft: DraftSource) -> str:
    """The draft's `identity()` and the fingerprint of every model it holds (a model draft, trained heads)."""
    modules = sorted((name, value) for name, value in vars(draft).items() if isinstance(value, torch.nn.Module))
    return " ".join([draft.identity(), *(f"{name}={model_fingerprint(module)}" for name, module in modules)])


def memory_key(target: torch.nn.Module, draft: DraftSource, sampling: SamplingParams) -> dict:
    """What the acceptance profile depends on besides the prompt: the target, the draft and the sampling."""
    return {"version": MEMORY_VERSION, "target": model_fingerprint(target), "draft": draft_identity(draft),
            "sampling": asdict(sampling)}


def memory_file(key: dict) -> Path:
    """cache_root()/acceptance/<hash of the key>.json."""
    name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return cache_root() / "acceptance" / f"{name}.json"


def _read(key: dict) -> dict:
    """The file's prompt entries for `key` ({} when absent, unreadable or written for another key)."""
    try:
        data = json.loads(memory_file(key).read_text())
        return data["prompts"] if data.get("key") == key and isinstance(data.get("prompts"), dict) else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def load_carry(key: dict, digest: str) -> list[tuple[float, float]] | None:
    """Per draft position (rate, weight) learned by the last call on this prompt, or None."""
    entry = _read(key).get(digest)
    try:
        return [(float(rate), min(CARRY_WEIGHT, float(examined))) for rate, examined in zip(entry["rates"], entry["examined"])]
    except (KeyError, TypeError, ValueError):
        return None


def save_carry(key: dict, digest: str, learned: list[tuple[float, int]]) -> None:
    """Remember the run's own (rate, examinations) per position for this prompt; keep the MAX_PROMPTS
    most recent prompts.  Atomic; a read-only cache only costs the next call its carry."""
    if not any(examined for _, examined in learned):
        return
    prompts = _read(key)
    prompts[digest] = {"rates": [round(rate, 4) for rate, _ in learned], "examined": [e for _, e in learned],
                       "used": time.time()}
    def last_used(item) -> float:
        used = item[1].get("used", 0) if isinstance(item[1], dict) else 0
        return used if isinstance(used, (int, float)) else 0

    _write(key, dict(sorted(prompts.items(), key=last_used, reverse=True)[:MAX_PROMPTS]))


def _write(key: dict, prompts: dict) -> None:
    """Replace the key's file atomically (a reader sees the old file or the new); a read-only cache is skipped."""
    path = memory_file(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".tmp{id(prompts)}")
        temporary.write_text(json.dumps({"key": key, "prompts": prompts}))
        temporary.replace(path)
    except OSError:
        pass


def forget_carry(key: dict, digest: str) -> None:
    """Remove what was learned on this prompt (its next call starts cold)."""
    prompts = _read(key)
    if prompts.pop(digest, None) is not None:
        _write(key, prompts)
