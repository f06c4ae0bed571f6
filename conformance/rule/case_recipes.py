"""Row recipes of the cases built to reach specific bugs (see `case_data/curated.json`, field "why").

Each recipe returns (target_probs (k+1, V), draft_probs (k, V)) from a few parameters, deterministically:

- `near_equal_rows`: drafted tokens have p/q in [0.9, 1) (most of q's mass at exactly 0.95), the rest of p
  on tokens the draft never proposes -- reaches "accept without a coin when p/q is close to 1";
- `zipf_top_rows`: a Zipf target over V tokens under a fixed permutation (rank order != id order), the draft
  concentrated on the target's top `top` tokens -- the residual lives on ranks > top, which reaches
  samplers that mishandle ranks beyond the first few;
- `padded_rows`: a real-vocabulary Zipf target padded with exact zeros up to V (the draft keeps a little
  mass there) -- reaches samplers that emit probability-0 tokens of a large padded vocabulary;
- `deep_rows`: k rows each drafted by q = (1 - mix) p + mix * uniform, high acceptance so the last
  positions of a deep draft are reached often;
- `dyadic_rows`: every probability a multiple of 2**-bits (exact in bfloat16 / float16 for bits <= 8), so an
  adapter that casts to half precision loses nothing.
"""

from __future__ import annotations

import numpy as np


def _norm(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / x.sum(axis=-1, keepdims=True)


def near_equal_rows(k: int, V: int, seed: int):
    """q on the first V - 3 tokens (random), p = r * q there with r in [0.9, 1); p's remaining mass on the last
    3 tokens (q = 0 there). The first 60 % of the drafted ids have r = 0.95 (up to rounding)."""
    if V < 5:
        raise ValueError(f"V must be >= 5 for near-equal rows, got {V}")
    rng = np.random.default_rng(seed)
    ps: list[np.ndarray] = []
    qs: list[np.ndarray] = []
    for _ in range(k + 1):
        q = np.zeros(V)
        q[: V - 3] = _norm(rng.gamma(2.0, size=V - 3))
        ratio = np.where(np.arange(V - 3) < 0.6 * (V - 3), 0.95, rng.uniform(0.9, 1.0, V - 3))
        p = np.zeros(V)
        p[: V - 3] = ratio * q[: V - 3]
        p[V - 3 :] = (1.0 - p.sum()) * _norm(rng.gamma(2.0, size=3))
        ps.append(p)
        qs.append(q)
    return np.stack(ps), np.stack(qs[:k])


def _zipf(V: int, exponent: float) -> np.ndarray:
    return _norm(1.0 / np.arange(1, V + 1) ** exponent)


def zipf_top_rows(k: int, V: int, exponent: float, top: int, seed: int):
    """p = Zipf(exponent)[perm] (perm from default_rng(seed)); q = p on the target's top `top` tokens, renormalised."""
    if not 1 <= top < V:
        raise ValueError(f"top must be in [1, V), got {top} for V = {V}")
    perm = np.random.default_rng(seed).permutation(V)
    p = _zipf(V, exponent)[perm]
    keep = np.zeros(V, dtype=bool)
    keep[np.argsort(-p, kind="stable")[:top]] = True
    q = _norm(np.where(keep, p, 0.0))
    return np.stack([p] * (k + 1)), np.stack([q] * k)


def padded_rows(k: int, V: int, real_vocab: int, exponent: float, seed: int):
    """p = Zipf over the first real_vocab ids (permuted), exact 0 on the padded ids real_vocab..V-1; q = 0.5 p +
    0.5 Zipf(other permutation) over all V ids (the draft leaves mass on the padding)."""
    if not 2 <= real_vocab < V:
        raise ValueError(f"real_vocab must be in [2, V), got {real_vocab} for V = {V}")
    rng = np.random.default_rng(seed)
    p = np.zeros(V)
    p[:real_vocab] = _zipf(real_vocab, exponent)[rng.permutation(real_vocab)]
    q = _norm(0.5 * p + 0.5 * _zipf(V, exponent)[rng.permutation(V)])
    return np.stack([p] * (k + 1)), np.stack([q] * k)


def deep_rows(k: int, V: int, mix: float, seed: int):
    """Different Dirichlet rows per position; q_i = (1 - mix) p_i + mix / V (acceptance >= 1 - mix)."""
    if not 0.0 < mix < 1.0:
        raise ValueError(f"mix must be in (0, 1), got {mix}")
    rng = np.random.default_rng(seed)
    p = _norm(rng.gamma(1.0, size=(k + 1, V)))
    return p, (1.0 - mix) * p[:k] + mix / V


def dyadic_rows(k: int, V: int, bits: int, seed: int):
    """Random rows whose entries are multiples of 2**-bits (exact in bf16/fp16 for bits <= 8), all positive."""
    if not V <= 2**bits:
        raise ValueError(f"V must be <= 2**bits = {2**bits}, got {V}")
    rng = np.random.default_rng(seed)
    total = 2**bits

    def row():
        cuts = np.sort(rng.choice(np.arange(1, total), size=V - 1, replace=False))
        return np.diff(np.concatenate([[0], cuts, [total]])) / total

    return np.stack([row() for _ in range(k + 1)]), np.stack([row() for _ in range(k)])


# --- seeded edge rows and the historical large-vocabulary Zipf rows ---------------------------------

ROW_KINDS = (
    "random",
    "one_hot_p",
    "one_hot_q",
    "equal",
    "disjoint",
    "q_zero_p_pos",
    "p_zero_q_pos",
    "tiny",
    "spiky",
)


def _random_row(rng: np.random.Generator, V: int, concentration: float = 0.5) -> np.ndarray:
    return _norm(rng.gamma(concentration, size=V) + 1e-300)


def _edge_pair(kind: str, V: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One (p_i, q_i) pair of the given kind (see ROW_KINDS); kinds needing more tokens fall back to random."""
    if kind == "one_hot_p":
        p = np.zeros(V)
        p[rng.integers(V)] = 1.0
        return p, _random_row(rng, V)
    if kind == "one_hot_q":
        q = np.zeros(V)
        q[rng.integers(V)] = 1.0
        return _random_row(rng, V), q
    if kind == "equal":
        p = _random_row(rng, V)
        return p, p.copy()
    if kind == "disjoint" and V >= 2:
        mask = rng.random(V) < 0.5
        mask[0], mask[-1] = True, False
        return _norm(_random_row(rng, V) * mask), _norm(_random_row(rng, V) * ~mask)
    if kind in ("q_zero_p_pos", "p_zero_q_pos") and V >= 2:
        zero = rng.random(V) < 0.4
        zero[rng.integers(V)] = False
        a, b = _random_row(rng, V), _norm(_random_row(rng, V) * ~zero)
        return (a, b) if kind == "q_zero_p_pos" else (b, a)
    if kind == "tiny" and V >= 3:
        p, q = _random_row(rng, V, 1.0), _random_row(rng, V, 1.0)
        for row in (p, q):
            idx = rng.choice(V, size=max(1, V // 3), replace=False)
            row[idx] = 1e-12 * (1 + rng.random(idx.size))
            rest = np.setdiff1d(np.arange(V), idx)
            row[rest] *= (1 - row[idx].sum()) / row[rest].sum()
        return p, q
    if kind == "spiky":
        return _random_row(rng, V, 0.05), _random_row(rng, V, 0.05)
    return _random_row(rng, V, 1.0), _random_row(rng, V, 1.0)


def generated_rows(
    k: int, V: int, kinds: list[str], seed: int, same_rows: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Recipe "generated": position i gets a pair of kind kinds[i % len(kinds)] drawn from
    default_rng(seed); the bonus row has kind kinds[k % len(kinds)]. `same_rows` repeats position 1's
    pair at every position (and its p as the bonus row). Returns (target_probs, draft_probs)."""
    rng = np.random.default_rng(seed)
    ps: list[np.ndarray] = []
    qs: list[np.ndarray] = []
    for i in range(k):
        if same_rows and i > 0:
            ps.append(ps[0])
            qs.append(qs[0])
            continue
        p, q = _edge_pair(kinds[i % len(kinds)], V, rng)
        ps.append(p)
        qs.append(q)
    ps.append(ps[0] if same_rows else _edge_pair(kinds[k % len(kinds)], V, rng)[0])
    return np.stack(ps), np.stack(qs)


def generated_name(k: int, V: int, kinds: list[str], seed: int, same_rows: bool = False) -> str:
    return f"gen_V{V}_k{k}_{'-'.join(kinds[:k])}_s{seed}{'_same' if same_rows else ''}"


def zipf_rows(
    k: int,
    V: int,
    exponent: float,
    flatten: float,
    permutation_seed: int,
    permutation_skip: int = 0,
):
    """Recipe "zipf": z = Zipf(exponent) over V tokens, perm = Generator(PCG64(permutation_seed)
    advanced by permutation_skip steps).permutation(V). Target rows cycle through z, z[perm],
    norm(z**flatten); draft rows cycle through uniform 1/V and norm(0.5 z[perm] + 0.5 z)."""
    zipf = _norm(1.0 / np.arange(1, V + 1) ** exponent)
    bit_generator = np.random.PCG64(permutation_seed)
    # the historical case drew its permutation after 158 steps
    bit_generator.advance(permutation_skip)
    permuted = zipf[np.random.Generator(bit_generator).permutation(V)]
    targets = (zipf, permuted, _norm(zipf**flatten))
    drafts = (np.full(V, 1.0 / V), _norm(0.5 * permuted + 0.5 * zipf))
    return (
        np.stack([targets[j % 3] for j in range(k + 1)]),
        np.stack([drafts[i % 2] for i in range(k)]),
    )


def varying_rows(k: int, V: int, kinds: list[str], seed: int, pool: int):
    """A pool of `pool` row sets (member m = generated_rows(k, V, kinds, seed + m)); each round of the case draws
    its member at random, so rows vary from round to round. Returns (pool, k+1, V) and (pool, k, V) arrays."""
    if pool < 2:
        raise ValueError(f"pool must be >= 2 row sets, got {pool}")
    members = [generated_rows(k, V, kinds, seed + m) for m in range(pool)]
    return np.stack([m[0] for m in members]), np.stack([m[1] for m in members])
