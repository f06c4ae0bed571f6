"""Tree-level adapter for EAGLE's tree verification, `evaluate_posterior`, adapted faithfully.

Source: SafeAILab/EAGLE, file `eagle/model/utils.py`, function `evaluate_posterior` (sampling branch,
`logits_processor is not None`), commit cb7e0841fe0c206c6ed74a197ad5e2a1f13f5a2b (2026-02-19);
Copyright 2025 SafeAI Lab (SAIL), Apache License 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
Changes to EAGLE's code, and only these: `random.random()` becomes `uniform()` (the suite's rng is the
only randomness); comments added.  Its logic is kept, q = 1 included: a child x is accepted with
probability p(x) (EAGLE-2's drafts are deterministic top-k expansions), after a rejection p(x) := 0
and p is renormalised; children with a token already tried at that node are skipped.

The inputs are built as EAGLE builds them (`cnets.py` `topK_genrate`, `ea_model.py` `eagenerate`):
`draft_tokens` (1, N+1) with the root token at 0 and a -1 padding column appended; `retrieve_indices`
(leaves, max_depth+1), one root-to-leaf node path per row, -1 padded, sorted by EAGLE's `custom_sort`
(which puts the children of every node in increasing node index, the order of the DraftTree
contract); `candidates = draft_tokens[0, retrieve_indices]`; `logits = tree_logits[0, retrieve_indices]`.
EAGLE takes *logits*: row c of the tree is given as log(p_c) (log 0 = -inf) in float64, and the
logits processor is the identity (EAGLE's `prepare_logits_processor(temperature=1.0)` is an empty
`LogitsProcessorList`, which returns its input), so `softmax(log p_c)` gives back p_c up to rounding.
The emitted token is drawn from the returned `sample_p` by `torch.multinomial`, as
`update_inference_inputs` does, with a torch.Generator seeded from the suite's rng.  The draft rows
q of the DraftTree are never read.  Like EAGLE, a tree without a single draft node fails
(`adjustflag` is unbound): EAGLE never builds one.
"""

from __future__ import annotations

import numpy as np

from ..rule.harness import ImplUnavailable
from ...reference import validation


def _torch():
    try:
        import torch
    except ImportError as error:  # pragma: no cover - depends on the install
        raise ImplUnavailable(f"EAGLE's evaluate_posterior needs torch: {error}") from error
    return torch


def evaluate_posterior(logits, candidates, logits_processor, uniform):
    """EAGLE's `evaluate_posterior`, sampling branch, verbatim but for `uniform` (see the module)."""
    torch = _torch()
    accept_length = 1
    accept_cand = candidates[0][:1]
    best_candidate = 0
    for i in range(1, candidates.shape[1]):
        if i != accept_length:
            break
        adjustflag = False
        is_eq = (candidates[:, :accept_length] == accept_cand).all(dim=1)
        fi = torch.nonzero(is_eq, as_tuple=True)[0][0]
        gt_logits = logits[fi, i - 1][None]
        gt_logits = logits_processor(None, gt_logits)[0]
        gtp = torch.softmax(gt_logits, dim=0)
        candidates_set = []
        for j in range(candidates.shape[0]):
            if is_eq[j]:
                x = candidates[j, i]
                xi = x.item()
                if xi in candidates_set or xi == -1:
                    continue
                candidates_set.append(xi)
                r = uniform()  # EAGLE: r = random.random()
                px = gtp[xi]
                qx = 1.0
                acp = px / qx
                if r <= acp:
                    accept_cand = torch.cat((accept_cand, x[None]), dim=0)
                    accept_length += 1
                    best_candidate = j
                    break
                else:
                    gtp[xi] = 0
                    gtp = gtp / gtp.sum()
                    adjustflag = True
    if adjustflag and accept_length != candidates.shape[1]:
        sample_p = gtp
    else:
        gt_logits = logits[best_candidate, accept_length - 1][None]
        gt_logits = logits_processor(None, gt_logits)[0]
        sample_p = torch.softmax(gt_logits, dim=0)
    return torch.tensor(best_candidate), accept_length - 1, sample_p


def _custom_sort_key(path, maxitem):
    """EAGLE's `custom_sort` (topK_genrate): -1 padding sorts after every node index."""
    return [node if node >= 0 else maxitem for node in path]


def eagle_inputs(parent, tokens, target_probs, root_token: int = 0):
    """(draft_tokens (1, N+2) padded, retrieve_indices, tree_logits (1, N+1, V)) as EAGLE lays them out."""
    torch = _torch()
    contexts = len(parent)
    has_child = np.zeros(contexts, dtype=bool)
    has_child[parent[1:]] = True
    paths = []
    for leaf in np.flatnonzero(~has_child):
        path = [int(leaf)]
        while path[-1] != 0:
            path.append(int(parent[path[-1]]))
        paths.append(path[::-1])
    width = max(len(path) for path in paths)
    rows = [path + [-1] * (width - len(path)) for path in paths]
    rows = sorted(rows, key=lambda row: _custom_sort_key(row, contexts + 5))
    draft_tokens = torch.tensor([[root_token, *[int(t) for t in tokens[1:]], -1]], dtype=torch.long)
    with np.errstate(divide="ignore"):
        tree_logits = torch.tensor(np.log(np.asarray(target_probs, dtype=np.float64)))[None]
    return draft_tokens, torch.tensor(rows, dtype=torch.long), tree_logits


def _identity_processor(input_ids, scores):
    """EAGLE's `prepare_logits_processor(temperature=1.0)`: an empty LogitsProcessorList."""
    return scores


class EagleEvaluatePosterior:
    """EAGLE's tree verification through the tree contract: `verify_tree(tree, rng) -> emitted tokens`."""

    def verify_tree(self, tree, rng) -> list[int]:
        torch = _torch()
        rng = validation.check_rng(rng)
        draft_tokens, retrieve_indices, tree_logits = eagle_inputs(
            tree.parent, tree.tokens, tree.target_probs
        )
        candidates = draft_tokens[0, retrieve_indices]
        logits = tree_logits[0, retrieve_indices]
        best, accept_length, sample_p = evaluate_posterior(
            logits, candidates, _identity_processor, lambda: float(rng.random())
        )
        generator = torch.Generator().manual_seed(int(rng.integers(2**63)))
        token = int(torch.multinomial(sample_p, 1, generator=generator))
        accepted = candidates[int(best), 1 : accept_length + 1].tolist()
        return [int(t) for t in accepted] + [token]
