"""Does a draft tree pay on this CPU?  Target cost of a tree vs a chain, and the tokens each would gain.

    python benchmarks/bench_tree.py [--repeats 7] [--tokens 48]   ->  benchmarks/results/tree.json  (~5 min)

Measured on SmolLM2-135M-Instruct with its int8 self-draft (the generator's best CPU draft):
* v_chain(n) and v_tree(n): one target forward of n new tokens on a KV cache, causal (a chain) or with
  a tree attention mask and depth position ids (a tree of n nodes), each divided by the 1-token forward
  of the same repetition (interleaved, median and spread); c, the draft/target cost of one token;
* acceptance on real rows: along a sampled continuation of the chat and code prompts, at every context
  the target row p and the draft row q (warped at T), and A(m) = P(one of m children is accepted):
  T = 0.7 with children drawn i.i.d. from q (exact: 1 - prod_i (1 - alpha_i), alpha_i = sum min(p^(i), q),
  p^(i) the i-th residual, the oracle's multi-round rule) and without replacement (Monte Carlo over the
  drawn children, exact acceptance given them); T = 0: argmax p among the draft's top m;
* predictions: E[N] = 1 + sum_d prod_{e<=d} A(b_e) for a tree of branching b (A(1) = alpha gives the
  chain's (1 - alpha^(k+1)) / (1 - alpha)), and speedup = E[N] / (c * sum_d v(width_{d-1}) + v(n + 1)),
  the draft running one (tree-attention) step per depth;
* prompt lookup at T = 0 (the draft that pays on this CPU, c ~ 0): greedy speculative decoding replayed
  on the target's own greedy text of the code and summarisation prompts (the output whatever the draft),
  a chain of k tokens from the latest match vs a tree of the m latest distinct matches (shared prefixes
  merged), each round costing v_chain(k+1) or v_tree(nodes+1): rounds, tokens per round, speedup.
"pays" compares the best tree with the best chain of the same regime (a tree must win by > 5%).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROMPTS, draft_cost_ratio, encode_prompt, kernels, log, spread, write_result  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from exactspec.reference.laws import unchecked_residual  # noqa: E402
from exactspec.reference.tree_rules import shape_from_branching, without_token  # noqa: E402

WIDTHS = (1, 2, 4, 8, 16, 32)
TREES = (
    [2],
    [3],
    [4],
    [2, 2],
    [3, 2],
    [4, 2],
    [2, 1, 1],
    [2, 2, 1],
    [3, 1, 1],
    [2, 2, 2],
    [4, 1, 1, 1],
    [3, 2, 1, 1],
    [2, 2, 1, 1, 1],
    [2, 1, 1, 1, 1, 1],
)
CHAINS = tuple(range(1, 9))
MAX_CHILDREN = 4


def tree_mask(parent: np.ndarray, prefix: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(1, 1, n, prefix + n) bool attention mask (each node sees the prefix and its ancestors) and the
    (1, n) depth offsets of the position ids; node 0 is the root's own new token."""
    n = parent.size
    ancestors = torch.zeros(n, n, dtype=torch.bool)
    depth = np.zeros(n, dtype=np.int64)
    for node in range(n):
        depth[node] = 0 if parent[node] < 0 else depth[parent[node]] + 1
        walk = node
        while walk >= 0:
            ancestors[node, walk] = True
            walk = int(parent[walk])
    mask = torch.cat([torch.ones(n, prefix, dtype=torch.bool), ancestors], dim=1)[None, None]
    return mask, torch.tensor(depth)[None]


def balanced_shape(n: int) -> np.ndarray:
    """A tree of n contexts, root included: breadth-first, two children per node (the shape costs the
    same as any other of n nodes; only the mask differs from a chain)."""
    return np.array([-1] + [(i - 1) // 2 for i in range(1, n)], dtype=np.int64)


def forward_costs(model: Any, ids: torch.Tensor, repeats: int) -> dict[str, Any]:
    """v_chain(n) and v_tree(n) for n in WIDTHS, interleaved against the 1-token forward."""
    prefix = ids.shape[1]
    seconds: dict[str, list[float]] = {
        f"{kind}{n}": [] for n in WIDTHS for kind in ("chain", "tree")
    }
    with torch.no_grad():
        cache = model(ids, use_cache=True).past_key_values
        masks = {n: tree_mask(balanced_shape(n), prefix) for n in WIDTHS}

        def run(n: int, tree: bool) -> float:
            x = torch.full((1, n), 100, dtype=torch.long)
            kwargs = {}
            if tree:
                mask, depth = masks[n]
                kwargs = {"attention_mask": mask, "position_ids": depth + prefix}
            start = time.perf_counter()
            model(x, cache=cache, use_cache=True, **kwargs)
            elapsed = time.perf_counter() - start
            cache.crop(-n)
            return elapsed

        for n in WIDTHS:  # warm-up
            run(n, False), run(n, True)
        for _ in range(repeats):
            for n in WIDTHS:
                seconds[f"chain{n}"].append(run(n, False))
                seconds[f"tree{n}"].append(run(n, True))
    one = seconds["chain1"]
    ratio = lambda key: spread([t / o for t, o in zip(seconds[key], one)])
    return {
        "t1_s": spread(one),
        "v_chain": {str(n): ratio(f"chain{n}") for n in WIDTHS},
        "v_tree": {str(n): ratio(f"tree{n}") for n in WIDTHS},
        "tree_over_chain": {
            str(n): spread([t / c for t, c in zip(seconds[f"tree{n}"], seconds[f"chain{n}"])])
            for n in WIDTHS
        },
    }


def context_rows(
    model: Any, draft_model: Any, ids: torch.Tensor, tokens: int, temperature: float, seed: int
):
    """(p, q) float64 rows at every context of a continuation sampled from the target (plain decoding)."""
    from exactspec.gpu_impl import generate_plain
    from exactspec.gpu_impl.sampling.warping import warp_probs
    from exactspec.reference.warping import SamplingParams

    out = generate_plain(model, ids, tokens, SamplingParams(temperature=temperature), seed=seed)
    sequence = torch.cat([ids, torch.tensor([out.sequences[0]])], dim=1)
    with torch.no_grad():
        rows = []
        for net in (model, draft_model):
            logits = net(sequence).logits[0, ids.shape[1] - 1 : -1]
            # T = 0: only the order is read
            rows.append(warp_probs(logits, temperature or 1.0).double().numpy())
    return rows[0], rows[1]


def accept_with_replacement(p: np.ndarray, q: np.ndarray) -> list[float]:
    """A(m), m = 1..MAX_CHILDREN: P(one of m i.i.d. children from q is accepted) under the multi-round rule."""
    out, none_yet = [], 1.0
    for _ in range(MAX_CHILDREN):
        alpha = float(np.minimum(p, q).sum())
        none_yet *= 1.0 - alpha
        out.append(1.0 - none_yet)
        p = unchecked_residual(p, q)
    return out


def accept_without_replacement(
    p: np.ndarray, q: np.ndarray, rng: np.random.Generator, draws: int
) -> list[float]:
    """A(m) for children drawn without replacement (recursive rejection sampling), averaged over `draws`."""
    total = np.zeros(MAX_CHILDREN)
    for _ in range(draws):
        p_j, q_j, none_yet = p, q, 1.0
        for m in range(MAX_CHILDREN):
            if q_j.sum() <= 0:
                total[m:] += 1.0 - none_yet
                break
            x = int(rng.choice(q_j.size, p=q_j / q_j.sum()))
            none_yet *= 1.0 - min(1.0, p_j[x] / q_j[x])
            total[m] += 1.0 - none_yet
            p_j, q_j = unchecked_residual(p_j, q_j), without_token(q_j, x)
    return list(total / draws)


def accept_greedy(p: np.ndarray, q: np.ndarray) -> list[float]:
    """A(m) at T = 0: the target's argmax is among the draft's m most likely tokens."""
    top = np.argsort(-q, kind="stable")[:MAX_CHILDREN]
    hit = int(np.argmax(p))
    return [float(hit in top[:m]) for m in range(1, MAX_CHILDREN + 1)]


def acceptance(
    model: Any, draft_model: Any, prompts: dict[str, torch.Tensor], tokens: int
) -> dict[str, Any]:
    """Mean A(m) over the contexts of the prompts' sampled continuations, per regime."""
    rng = np.random.default_rng(0)
    regimes: dict[str, list[list[float]]] = {
        "T0.7_replacement": [],
        "T0.7_without_replacement": [],
        "T0_top_m": [],
    }
    for ids in prompts.values():
        p_rows, q_rows = context_rows(model, draft_model, ids, tokens, 0.7, seed=1)
        for p, q in zip(p_rows, q_rows):
            regimes["T0.7_replacement"].append(accept_with_replacement(p, q))
            regimes["T0.7_without_replacement"].append(
                accept_without_replacement(p, q, rng, draws=32)
            )
        p_rows, q_rows = context_rows(model, draft_model, ids, tokens, 0.0, seed=1)
        regimes["T0_top_m"] += [accept_greedy(p, q) for p, q in zip(p_rows, q_rows)]
    return {
        name: {"A_m": np.mean(values, axis=0).tolist(), "contexts": len(values)}
        for name, values in regimes.items()
    }


def expected_tokens(branching: list[int], accept: list[float]) -> float:
    """E[N] = 1 + sum_d prod_{e<=d} A(b_e): depth d is reached when one child is accepted at every level."""
    total, reach = 1.0, 1.0
    for width in branching:
        reach *= accept[width - 1]
        total += reach
    return total


def v_of(costs: dict[str, Any], key: str, n: int) -> float:
    """Median v(n), linearly interpolated between the measured widths."""
    widths = np.array(WIDTHS, dtype=float)
    values = np.array([costs[key][str(w)]["median"] for w in WIDTHS])
    return float(np.interp(n, widths, values))


def predictions(costs: dict[str, Any], c: float, accept: dict[str, Any]) -> dict[str, Any]:
    """Predicted tokens per round and speedup of every chain and tree, per regime, and the verdict."""
    out: dict[str, Any] = {}
    for regime, figures in accept.items():
        a_m, rows = figures["A_m"], []
        for k in CHAINS:
            rows.append(
                {
                    "kind": "chain",
                    "branching": [1] * k,
                    "nodes": k,
                    "E_N": expected_tokens([1] * k, a_m),
                    "cost": c * k + v_of(costs, "v_chain", k + 1),
                }
            )
        for branching in TREES:
            shape = shape_from_branching(branching)
            widths = np.cumprod([1, *branching])[:-1]
            draft_cost = c * sum(v_of(costs, "v_chain", int(w)) for w in widths)
            rows.append(
                {
                    "kind": "tree",
                    "branching": branching,
                    "nodes": int(shape.size - 1),
                    "E_N": expected_tokens(branching, a_m),
                    "cost": draft_cost + v_of(costs, "v_tree", int(shape.size)),
                }
            )
        for row in rows:
            row["speedup"] = row["E_N"] / row["cost"]
        best = {
            kind: max((r for r in rows if r["kind"] == kind), key=lambda r: r["speedup"])
            for kind in ("chain", "tree")
        }
        out[regime] = {
            "rows": rows,
            "best_chain": best["chain"],
            "best_tree": best["tree"],
            "tree_over_chain": best["tree"]["speedup"] / best["chain"]["speedup"],
        }
    return out


def lookup_branches(context: list[int], k: int, m: int, ngram_max: int = 3) -> list[list[int]]:
    """Up to m distinct continuations (k tokens each) of the most recent matches of the longest suffix
    n-gram that has any match: `PromptLookupDraft`'s proposal is the first one."""
    for n in range(min(ngram_max, len(context) - 1), 0, -1):
        suffix, found = context[-n:], []
        for start in range(len(context) - n - 1, -1, -1):
            if context[start : start + n] == suffix:
                branch = context[start + n : start + n + k]
                if branch and branch not in found:
                    found.append(branch)
                if len(found) == m:
                    break
        if found:
            return found
    return []


def trie_nodes(branches: list[list[int]]) -> int:
    """Draft nodes of the tree the branches make once their shared prefixes are merged."""
    return len({tuple(branch[: i + 1]) for branch in branches for i in range(len(branch))})


def replay_lookup(
    prompt: list[int], truth: list[int], k: int, m: int, costs: dict[str, Any]
) -> dict[str, Any]:
    """Greedy speculative decoding replayed on the target's own greedy text (the output at T = 0 whatever
    the draft): rounds, tokens per round and the predicted speedup sum(v) / tokens of prompt lookup with
    m branches of k tokens (m = 1: the chain); a round without a match is a plain step (v(1) = 1)."""
    position, rounds, cost = 0, 0, 0.0
    while position < len(truth):
        branches = lookup_branches(prompt + truth[:position], k, m)
        accepted = 0
        for branch in branches:
            run = 0
            while (
                run < len(branch)
                and position + run < len(truth)
                and branch[run] == truth[position + run]
            ):
                run += 1
            accepted = max(accepted, run)
        nodes = trie_nodes(branches)
        key = "v_chain" if len(branches) <= 1 else "v_tree"
        cost += v_of(costs, key, nodes + 1) if branches else 1.0
        rounds += 1
        position += accepted + 1
    return {
        "k": k,
        "m": m,
        "rounds": rounds,
        "tokens_per_round": position / rounds,
        "speedup": position / cost,
    }


def lookup_trees(
    model: Any, prompts: dict[str, torch.Tensor], tokens: int, costs: dict[str, Any]
) -> dict[str, Any]:
    """Prompt lookup at T = 0, chain (m = 1) vs trees of m = 2, 3, 4 matches, per prompt kind."""
    from exactspec.gpu_impl import generate_plain
    from exactspec.reference.warping import SamplingParams

    out: dict[str, Any] = {}
    for kind, ids in prompts.items():
        truth = list(
            generate_plain(model, ids, tokens, SamplingParams(temperature=0.0), seed=0).sequences[0]
        )
        rows = [
            replay_lookup(ids[0].tolist(), truth, k, m, costs)
            for k in (2, 3, 4, 6, 8)
            for m in (1, 2, 3, 4)
        ]
        best = {
            name: max(
                (r for r in rows if (r["m"] == 1) == (name == "chain")), key=lambda r: r["speedup"]
            )
            for name in ("chain", "tree")
        }
        out[kind] = {
            "rows": rows,
            "best_chain": best["chain"],
            "best_tree": best["tree"],
            "tree_over_chain": best["tree"]["speedup"] / best["chain"]["speedup"],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from _speculation import draft_model_of, make_draft

    from exactspec.gpu_impl.models import load_default_model

    model, tokenizer = load_default_model()
    draft_model = draft_model_of(make_draft("int8-dynamic", model, {}))
    prompts = {kind: encode_prompt(tokenizer, PROMPTS[kind]) for kind in ("chat", "code")}
    result: dict[str, Any] = {"section": "tree", "repeats": args.repeats, "draft": "int8-dynamic"}
    with kernels("auto", model, draft_model):
        result["costs"] = forward_costs(model, prompts["chat"], args.repeats)
        log("v_chain", {n: round(x["median"], 2) for n, x in result["costs"]["v_chain"].items()})
        log("v_tree", {n: round(x["median"], 2) for n, x in result["costs"]["v_tree"].items()})
        result["c"] = draft_cost_ratio(draft_model, model, prompts["chat"], repeats=args.repeats)
        c = statistics.median(result["c"]["c"]["values"])
        log("c", round(c, 3))
        result["acceptance"] = acceptance(model, draft_model, prompts, args.tokens)
    log("A(m)", {k: [round(a, 3) for a in v["A_m"]] for k, v in result["acceptance"].items()})
    with kernels("auto", model):
        prompts["summarisation"] = encode_prompt(tokenizer, PROMPTS["summarisation"])
        result["prompt_lookup_T0"] = lookup_trees(
            model,
            {k: prompts[k] for k in ("code", "summarisation")},
            2 * args.tokens,
            result["costs"],
        )
    for kind, figures in result["prompt_lookup_T0"].items():
        log(
            "prompt lookup",
            kind,
            "best chain",
            figures["best_chain"],
            "best tree",
            figures["best_tree"],
        )
    result["predictions"] = predictions(result["costs"], c, result["acceptance"])
    for regime, figures in result["predictions"].items():
        log(
            regime,
            "best chain",
            figures["best_chain"]["branching"],
            round(figures["best_chain"]["speedup"], 3),
            "best tree",
            figures["best_tree"]["branching"],
            round(figures["best_tree"]["speedup"], 3),
            "tree/chain",
            round(figures["tree_over_chain"], 3),
        )
    result["pays"] = {
        regime: figures["tree_over_chain"] > 1.05
        for regime, figures in result["predictions"].items()
    }
    result["pays"].update(
        {
            f"prompt_lookup_T0_{kind}": figures["tree_over_chain"] > 1.05
            for kind, figures in result["prompt_lookup_T0"].items()
        }
    )
    log("written", write_result("tree", result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
