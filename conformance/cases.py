"""Conformance cases as data: a case is (target rows p_1..p_{k+1}, draft rows q_1..q_k), a name and
the reason it exists (which implementation bug it is built to expose).

`CURATED` is the fixed, deterministic set every statistical check runs on. Hypothesis-generated cases
(`conformance.strategies.round_cases`) feed the invariant checks. `Case.to_dict` / `Case.from_dict`
make a case portable (a JSON file of cases can be replayed against any implementation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from exactspec import reference

#: Cases whose number of accepted-prefix branches is at most this get the whole-tuple law check.
TUPLE_LAW_MAX_BRANCHES = 20_000


@dataclass(frozen=True, eq=False)
class Case:
    name: str
    target_probs: np.ndarray  # (k+1, V)
    draft_probs: np.ndarray  # (k, V)
    why: str
    tags: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self):
        p = np.ascontiguousarray(self.target_probs, dtype=np.float64)
        q = np.ascontiguousarray(self.draft_probs, dtype=np.float64)
        # The oracle validates shapes and rows; a malformed case is a bug in the suite, not the impl.
        reference.validation.check_round_shapes(
            reference.validation.as_prob_array(p, f"{self.name}.target_probs", 2),
            reference.validation.as_prob_array(q, f"{self.name}.draft_probs", 2),
        )
        p.setflags(write=False)
        q.setflags(write=False)
        object.__setattr__(self, "target_probs", p)
        object.__setattr__(self, "draft_probs", q)

    @property
    def k(self) -> int:
        return self.draft_probs.shape[0]

    @property
    def V(self) -> int:
        return self.draft_probs.shape[1]

    @cached_property
    def branches(self) -> int:
        b = 1
        for p, q in zip(self.target_probs, self.draft_probs):
            b *= max(1, int(np.count_nonzero((p > 0) & (q > 0))))
        return b

    @property
    def enumerable(self) -> bool:
        """Small enough for the exact law of the whole emitted tuple."""
        return self.branches <= TUPLE_LAW_MAX_BRANCHES and self.V <= 64

    @property
    def stream_enumerable(self) -> bool:
        """Small enough for the product law of the completed stream (V^(k+1) categories)."""
        return self.V ** (self.k + 1) <= 50_000

    @cached_property
    def stream_law(self) -> np.ndarray:
        """Law of the completed stream (y_1..y_{k+1}) of an exact rule: prod_j p_j(y_j), flattened with
        code sum_j y_j V^j (position 1 is the least significant digit)."""
        law = np.ones(1)
        for row in self.target_probs:
            law = np.multiply.outer(row, law).ravel()  # new position becomes the most significant digit
        return law

    @cached_property
    def alphas(self) -> np.ndarray:
        """Per-position acceptance rates sum_x min(p_i, q_i)."""
        return np.minimum(self.target_probs[:-1], self.draft_probs).sum(axis=-1)

    @cached_property
    def count_law(self) -> np.ndarray:
        """Exact law of N (tokens emitted per round) under the standard rule, n = 1..k+1."""
        return np.asarray(reference.tokens_law_per_position(self.alphas), dtype=np.float64)

    @cached_property
    def tuple_law(self) -> tuple[list[tuple[int, ...]], np.ndarray]:
        """(tuples, probabilities) of the emitted tuple under the standard rule (enumerable cases)."""
        law = reference.round_distribution(self.target_probs, self.draft_probs)
        tuples = sorted(law)
        return tuples, np.array([law[t] for t in tuples], dtype=np.float64)

    def to_dict(self) -> dict:
        return {"name": self.name, "why": self.why, "tags": list(self.tags), "k": self.k, "V": self.V,
                "target_probs": self.target_probs.tolist(), "draft_probs": self.draft_probs.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "Case":
        return cls(d["name"], np.asarray(d["target_probs"]), np.asarray(d["draft_probs"]), d.get("why", ""),
                   tuple(d.get("tags", ())))

    def summary(self) -> dict:
        return {"name": self.name, "k": self.k, "V": self.V, "why": self.why, "tags": list(self.tags),
                "acceptance_rates": self.alphas.tolist(), "expected_tokens": float(
                    (np.arange(1, self.k + 2) * self.count_law).sum())}


def _norm(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / x.sum(axis=-1, keepdims=True)


def _rows(row, n) -> np.ndarray:
    return np.repeat(np.asarray(row, dtype=np.float64)[None], n, axis=0)


def _bf16_unfriendly_row() -> np.ndarray:
    """A row whose entries all sit just above a bfloat16 rounding midpoint, so rounding them to
    bf16 moves each up by almost half an ulp (~0.2-0.4 % relative)."""
    vals = []
    for base, ulp in ((0.25, 2.0**-9), (0.125, 2.0**-10), (0.0625, 2.0**-11), (0.0625, 2.0**-11)):
        vals.append(base + ulp * (3 + 0.5) + ulp * 1e-3)
    vals.append(1.0 - sum(vals))
    return np.asarray(vals)


def demo_rows():
    p = np.array([0.50, 0.30, 0.15, 0.05])
    return p, np.full(4, 0.25), 0.6 * p + 0.4 * 0.25


def _curated() -> list[Case]:
    rng = np.random.default_rng(20230518)  # fixed: the curated set is data, not randomness
    p_demo, q_uniform, q_mix = demo_rows()
    k = 4
    cases = [
        Case("demo_uniform_draft", _rows(p_demo, k + 1), _rows(q_uniform, k),
             "Seed article demo: p=(0.50,0.30,0.15,0.05), uniform draft, k=4 (alpha=0.8).", ("demo",)),
        Case("demo_mixed_draft", _rows(p_demo, k + 1), _rows(q_mix, k),
             "Seed article demo: draft 0.6p+0.4*uniform, k=4 (alpha=0.92).", ("demo",)),
        Case("demo_identical_draft", _rows(p_demo, k + 1), _rows(p_demo, k),
             "Seed article demo: draft == target, k=4: every draft accepted, N = k+1 always; a rule that "
             "ever rejects here is wrong.", ("demo", "p_equals_q")),
    ]
    p_rows = rng.dirichlet(np.full(6, 0.7), size=4)
    q_rows = rng.dirichlet(np.full(6, 0.7), size=3)
    cases.append(Case("rows_differ_k3", p_rows, q_rows,
                      "Every position has its own p_i and q_i: catches residuals or bonus tokens taken from "
                      "the wrong row (one row late, draft row, p_k for the bonus).", ("rows_differ",)))
    cases.append(Case("disjoint_supports", _rows([0.6, 0.4, 0, 0, 0], 3), _rows([0, 0, 0.5, 0.3, 0.2], 2),
                      "Supports of p and q are disjoint: every draft has p(x)=0 and must be rejected, the "
                      "residual is p itself.", ("disjoint", "p_zero_q_pos", "q_zero_p_pos")))
    cases.append(Case("q_zero_where_p_positive",
                      np.array([[0.3, 0.3, 0.2, 0.2, 0.0], [0.1, 0.2, 0.3, 0.4, 0.0], [0.25, 0.25, 0.25, 0.0, 0.25]]),
                      np.array([[0.5, 0.5, 0.0, 0.0, 0.0], [0.0, 0.0, 0.6, 0.0, 0.4]]),
                      "q(x)=0 where p(x)>0: those tokens can only come from the residual; ratios must not "
                      "divide by the zero entries.", ("q_zero_p_pos",)))
    cases.append(Case("p_zero_where_q_positive",
                      np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.7, 0.3, 0.0], [0.2, 0.2, 0.2, 0.4]]),
                      np.array([[0.25, 0.25, 0.25, 0.25], [0.1, 0.1, 0.1, 0.7]]),
                      "The draft proposes tokens the target forbids (p(x)=0): they must never be emitted; "
                      "an inclusive boundary u <= p/q accepts them when u == 0.", ("p_zero_q_pos",)))
    cases.append(Case("one_hot_target", _rows([0, 0, 1.0, 0], 4), _rows([0.4, 0.3, 0.2, 0.1], 3),
                      "Greedy-like target (one-hot p): the output is deterministic, every draft other than "
                      "token 2 must be rejected.", ("one_hot",)))
    cases.append(Case("one_hot_draft", rng.dirichlet(np.ones(5), size=3),
                      np.array([[1.0, 0, 0, 0, 0], [0, 0, 0, 1.0, 0]]),
                      "Greedy draft (one-hot q): acceptance is p(x), the residual is p without x renormalised.",
                      ("one_hot",)))
    tiny = np.array([1e-12, 0.5 - 1e-12, 2e-12, 0.3, 0.2 - 2e-12, 0.0])
    cases.append(Case("near_1e-12", np.stack([tiny, tiny[::-1], tiny]),
                      np.stack([_norm([1e-12, 0.1, 0.3, 1e-12, 0.6 - 2e-12, 0.0]), tiny[::-1]]),
                      "Probabilities near 1e-12 beside large ones: floors, epsilons and float32 underflow "
                      "change the law here.", ("tiny",)))
    tenths = np.array([0.1] * 10 + [0.0, 0.0])
    cases.append(Case("cumsum_below_one_trailing_zeros", np.stack([tenths, tenths[::-1], tenths]),
                      np.stack([_norm([0.05] * 10 + [0.5, 0.0]), _norm([0.2] * 5 + [0.0] * 5 + [0.0, 0.0])]),
                      "Rows of 0.1 whose float cumulative sum ends at 0.9999999999999999, followed by "
                      "zero-probability tokens: an inverse-CDF sampler without a guard emits a p=0 token "
                      "when u is close to 1.", ("p_zero_q_pos", "rounding")))
    bf = _bf16_unfriendly_row()
    perm = np.array([4, 2, 0, 3, 1])
    cases.append(Case("p_equals_q_bf16_unrepresentable", np.stack([bf, bf[perm], bf, bf[perm]]),
                      np.stack([bf, bf[perm], bf]),
                      "Self-speculation (draft == target) with entries not representable in bfloat16: the "
                      "exact rule accepts everything; a ratio computed from bf16-rounded q rejects ~1%.",
                      ("p_equals_q", "rounding")))
    cases.append(Case("k8_rows_differ", rng.dirichlet(np.ones(3), size=9), rng.dirichlet(np.ones(3), size=8),
                      "Longest draft (k=8) with different rows at every position: errors that compound "
                      "along the draft (shared coins, off-by-one rows) are largest here.", ("rows_differ", "k8")))
    V = 32768
    zipf = _norm(1.0 / np.arange(1, V + 1) ** 1.1)
    perm2 = rng.permutation(V)
    p_big = np.stack([zipf, zipf[perm2], _norm(zipf ** 0.9)])
    q_big = np.stack([np.full(V, 1.0 / V), _norm(0.5 * zipf[perm2] + 0.5 * zipf)])
    cases.append(Case("large_vocab_32k", p_big, q_big,
                      "V = 32768 (a real tokenizer size), Zipf target; the first draft row is uniform so "
                      "q(x) ~ 3e-5 everywhere: flooring q at an epsilon or pooling errors show here.",
                      ("large_vocab",)))
    return cases


CURATED: list[Case] = _curated()
CASES_BY_NAME: dict[str, Case] = {c.name: c for c in CURATED}


# A small deterministic set of Hypothesis-style generated cases (fixed seeds) joins the statistical
# checks, so the generator's edge rows are also tested for exactness, not only for invariants.
from exactspec.conformance.strategies import statistical_cases as _statistical_cases  # noqa: E402

GENERATED: list[Case] = _statistical_cases()
SUITE_CASES: list[Case] = CURATED + GENERATED
CASES_BY_NAME.update({c.name: c for c in GENERATED})
