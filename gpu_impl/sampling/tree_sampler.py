"""On-device tree verification: one round for B ragged draft trees, without per-node host syncs.

Layout (the one of `exactspec.reference.trees.DraftTree`, padded): contexts 0..N per row, context 0 the
root; `parent` (B, N+1) with parent[:, 0] = -1 and 0 <= parent[i] < i; `tokens` (B, N+1) the draft
token of each node; `target_probs` / `draft_probs` (B, N+1, V) the target row p_c and the draft row
q_c the children of c were drawn from; `node_mask` (B, N+1) marks real nodes (a row with fewer nodes
is padded, its padded nodes are never visited); `replacement` (B,) bool.

Rule (SpecInfer's multi-round rejection, Miao et al. 2024; without replacement the recursive
rejection sampling of Jeon et al. 2024): at context c try the children in increasing node index;
accept x_j with probability min(1, p(x_j)/q(x_j)) and descend (fresh p, q rows), else
p := norm(max(0, p - q)) and, drafted without replacement, q := q with x_j removed, renormalised.
When no child is left emit one token from p (the residual, or the fresh row of the accepted node).

Each step of the loop makes one child try in every row (masked), so N steps visit every tree; the
loop length is a shape, never a value read back from the device.
"""

from __future__ import annotations

import numpy as np
import torch

from .randomness import Generators, exponential, race, uniform

PAD = -1


def _check_tree_batch(parent, tokens, target_probs, draft_probs, node_mask, replacement) -> None:
    """Shape/dtype checks only (values would force a device->host sync)."""
    for name, tensor, ndim in (
        ("parent", parent, 2),
        ("tokens", tokens, 2),
        ("target_probs", target_probs, 3),
        ("draft_probs", draft_probs, 3),
        ("node_mask", node_mask, 2),
        ("replacement", replacement, 1),
    ):
        if not isinstance(tensor, torch.Tensor) or tensor.ndim != ndim:
            raise ValueError(
                f"{name} must be a {ndim}-D torch.Tensor, got {getattr(tensor, 'shape', type(tensor))}"
            )
    batch, contexts = parent.shape
    if contexts < 1:
        raise ValueError(
            f"parent must hold at least the root context, got shape {tuple(parent.shape)}"
        )
    for name, tensor in (("tokens", tokens), ("node_mask", node_mask)):
        if tensor.shape != (batch, contexts):
            raise ValueError(
                f"{name} must have shape (B, N+1) = ({batch}, {contexts}), got {tuple(tensor.shape)}"
            )
    if target_probs.shape[:2] != (batch, contexts) or draft_probs.shape != target_probs.shape:
        raise ValueError(
            f"target_probs and draft_probs must both have shape (B, N+1, V) = ({batch}, {contexts}, V), "
            f"got {tuple(target_probs.shape)} and {tuple(draft_probs.shape)}"
        )
    if replacement.shape != (batch,) or replacement.dtype != torch.bool:
        raise ValueError(
            f"replacement must be a bool tensor of shape ({batch},), got {replacement.dtype} {tuple(replacement.shape)}"
        )
    if node_mask.dtype != torch.bool:
        raise ValueError(f"node_mask must be a bool tensor, got {node_mask.dtype}")
    if parent.dtype != torch.long or tokens.dtype != torch.long:
        raise ValueError(
            f"parent and tokens must be long tensors, got {parent.dtype} and {tokens.dtype}"
        )
    if not target_probs.is_floating_point() or not draft_probs.is_floating_point():
        raise ValueError("target_probs and draft_probs must be floating-point tensors")


def _row(probs: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """probs[b, index[b], :] for a (B, R, V) tensor."""
    return probs.gather(1, index[:, None, None].expand(-1, 1, probs.shape[-1])).squeeze(1)


def _at(values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """values[b, index[b]] for a (B, R) tensor."""
    return values.gather(1, index[:, None]).squeeze(1)


def _normalised(weights: torch.Tensor, fallback: torch.Tensor) -> torch.Tensor:
    """weights / sum(weights) per row, or `fallback` where the mass is 0."""
    mass = weights.sum(-1, keepdim=True)
    return torch.where(
        mass > 0, weights / mass.clamp_min(torch.finfo(weights.dtype).tiny), fallback
    )


def _next_child(parent, node_mask, current, last_tried):
    """(has a child left, the lowest-index child of `current` above `last_tried`)."""
    index = torch.arange(parent.shape[1], device=parent.device)
    children = (parent == current[:, None]) & (index > last_tried[:, None]) & node_mask
    has_child = children.any(-1)
    return has_child, torch.where(has_child, children.long().argmax(-1), current)


def _walk(parent, tokens, target_probs, draft_probs, node_mask, replacement, uniforms):
    """Run the child tries: -> (accepted node per row, its last target row p: residual or fresh)."""
    batch = parent.shape[0]
    current = parent.new_zeros(batch)
    last_tried = parent.new_zeros(batch)
    p, q = target_probs[:, 0], draft_probs[:, 0]
    # every try consumes one node: N tries visit the whole tree
    for step in range(parent.shape[1] - 1):
        has_child, child = _next_child(parent, node_mask, current, last_tried)
        x = _at(tokens, child).clamp_min(0)
        ratio = _at(p, x).double() / _at(q, x).double()
        accept = has_child & (uniforms[:, step] < ratio)  # p(x) = 0 gives ratio 0: never accepted
        reject = (has_child & ~accept)[:, None]
        # mass 0 only when p == q (no rejection possible)
        residual = _normalised((p - q).clamp_min(0), p)
        without_x = _normalised(q.scatter(1, x[:, None], 0.0), q)
        p = torch.where(
            accept[:, None], _row(target_probs, child), torch.where(reject, residual, p)
        )
        q_next = torch.where(reject & ~replacement[:, None], without_x, q)
        q = torch.where(accept[:, None], _row(draft_probs, child), q_next)
        current = torch.where(accept, child, current)
        last_tried = torch.where(has_child, child, last_tried)
    return current, p


def _path_tokens(parent, tokens, node, last):
    """(B, N+1) tokens: the root-excluded path to `node`, then `last`, then PAD; and counts."""
    batch, contexts = parent.shape
    on_path = torch.zeros_like(parent, dtype=torch.bool)
    for _ in range(contexts - 1):  # depth <= N
        on_path.scatter_(
            1,
            node.clamp_min(0)[:, None],
            (node > 0)[:, None] | _at(on_path, node.clamp_min(0))[:, None],
        )
        node = _at(parent, node.clamp_min(0))
    depth = on_path.sum(-1)
    # ancestors come in index order
    slot = torch.where(on_path, on_path.long().cumsum(-1) - 1, contexts)
    out = tokens.new_full((batch, contexts + 1), PAD)
    out.scatter_(1, slot, torch.where(on_path, tokens, PAD))
    out = out[:, :contexts].contiguous()
    out.scatter_(1, depth[:, None], last[:, None])
    return out, depth + 1


def verify_tree_batch(
    parent: torch.Tensor,
    tokens: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    node_mask: torch.Tensor,
    replacement: torch.Tensor,
    generator: Generators = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Verify one tree round per row: -> (tokens (B, N+1) long padded with -1, counts (B,) long).

    `generator` is one torch.Generator (or None) for the batch, or one per row (a row then draws only
    from its own stream: V exponentials for the emitted token, then N uniforms for the tries, so
    its output does not depend on how far the batch is padded).  Values are not
    checked (that would sync): a drafted token with q = 0 is impossible input.
    """
    _check_tree_batch(parent, tokens, target_probs, draft_probs, node_mask, replacement)
    batch, contexts, vocab = target_probs.shape
    device = target_probs.device
    # first, so a row's stream ignores the padding
    noise = exponential(batch, (vocab,), generator, device)
    # try t of a row uses uniforms[t]
    uniforms = uniform(batch, (max(contexts - 1, 1),), generator, device)
    node, p = _walk(parent, tokens, target_probs, draft_probs, node_mask, replacement, uniforms)
    last = race(p, noise)
    return _path_tokens(parent, tokens, node, last)


def pad_trees(rows, device, dtype: torch.dtype = torch.float32):
    """Pad ragged NumPy trees to one batch of tensors (the arguments of `verify_tree_batch`).

    `rows` is a sequence of (parent (n+1,), tokens (n+1,), target (n+1, V), draft (n+1, V), replacement).
    Padded nodes get parent -2 (no real node's child), token 0, zero rows and node_mask False.
    """
    rows = list(rows)
    if not rows:
        raise ValueError("rows must hold at least one tree")
    vocab = {np.shape(r[2])[-1] for r in rows}
    if len(vocab) != 1:
        raise ValueError(f"rows: every tree must share one vocabulary size, got {sorted(vocab)}")
    batch, contexts, vocab = len(rows), max(len(r[0]) for r in rows), vocab.pop()
    parent = np.full((batch, contexts), -2, dtype=np.int64)
    tokens = np.zeros((batch, contexts), dtype=np.int64)
    probs = np.zeros((2, batch, contexts, vocab))
    mask = np.zeros((batch, contexts), dtype=bool)
    for b, (par, tok, target, draft, _) in enumerate(rows):
        n = len(par)
        parent[b, :n], tokens[b, :n], mask[b, :n] = par, np.maximum(tok, 0), True
        probs[0, b, :n], probs[1, b, :n] = target, draft
    as_tensor = lambda a, dt: torch.tensor(a, dtype=dt, device=device)
    replacement = as_tensor(np.array([bool(r[4]) for r in rows]), torch.bool)
    return (
        as_tensor(parent, torch.long),
        as_tensor(tokens, torch.long),
        as_tensor(probs[0], dtype),
        as_tensor(probs[1], dtype),
        as_tensor(mask, torch.bool),
        replacement,
    )
