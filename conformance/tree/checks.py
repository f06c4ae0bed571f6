"""The tree level's checks, on the outcome of rounds (`harness.TreeRounds`), each a `CheckRecord`.

- ``contract``      the output contract (harness) and determinism for a fixed seed;
- ``invariant``     the emitted prefix is the token path of a node of the tree, and the last token has
                    target probability > 0 at that context;
- ``exactness``     true of every exact tree rule: the token at position j of rounds with N >= j follows the
                    target row of its emitted prefix (one row: the LR test on its counts; rows that differ
                    between prefixes: the randomized PIT under each round's own row, exact KS); the
                    completed stream (tokens after N drawn from the target) follows the target's law of the
                    first depth + 1 tokens;
- ``standard_rule`` true of the multi-round rule only: the emitted path against the oracle's exact law
                    (`reference.tree_laws.tree_round_law`, drafts drawn), and tokens per round.

Every other statistical check is `stat_tests.lr_gof_or_zero` (the LR test with a proven tail), as at the rule level.
"""

from __future__ import annotations

import numpy as np

from ..core.contract import invariant_record
from ..core.profiles import Profile
from ..core.records import CheckRecord, case_seed
from .cases import TreeCase, encode_stream
from .harness import TreeRounds
from ...reference.sampling import inverse_cdf
from ...reference.trees import children_lists
from ...stat_tests import TestResult, lr_gof_or_zero, pit_ks_or_fail
from ...stat_tests.binning import drop_rounding_mass, with_unseen_category
from ...stat_tests.pit import pit_values


def _is_tree_path(children: list[list[int]], tree_tokens: np.ndarray, prefix: list[int]) -> bool:
    """Is `prefix` the token path of some node (siblings may repeat a token: all matches are searched)?"""
    frontier = [0]
    for token in prefix:
        frontier = [c for node in frontier for c in children[node] if tree_tokens[c] == token]
        if not frontier:
            return False
    return True


def invariant_check(impl: str, rounds: TreeRounds, label: str = "invariants") -> CheckRecord:
    """Emitted prefix == the path of a tree node; the last token has p > 0 at that context."""
    case, problems = rounds.case, []
    children = children_lists(case.parent)
    for r in range(rounds.n):
        emitted = rounds.tokens[r, : rounds.counts[r]].tolist()
        if not _is_tree_path(children, rounds.tree_tokens[r], emitted[:-1]):
            problems.append(
                f"round {r} emits {emitted}, whose prefix {emitted[:-1]} is no path of the tree "
                f"(parent {case.parent.tolist()}, tokens {rounds.tree_tokens[r].tolist()})"
            )
        elif case.model.rows(tuple(emitted[:-1]))[0][emitted[-1]] <= 0:
            problems.append(
                f"round {r} emits {emitted}: its last token has target probability 0 at that context"
            )
        if len(problems) >= 3:
            break
    return invariant_record(
        impl, case.name, label, rounds.n, problems, "every prefix a tree path, no p=0 token"
    )


def gof(
    name: str, counts: np.ndarray, law: np.ndarray, rate: float, profile: Profile
) -> TestResult:
    """Every level's goodness-of-fit test (`stat_tests.lr_gof_or_zero`) at the tree profile's min expected count."""
    return lr_gof_or_zero(
        name,
        counts,
        law,
        rate,
        profile.false_pass_rate,
        profile.tree.min_expected(max(int(counts.sum()), 1)),
    )


def _record(
    impl: str, case: TreeCase, name: str, category: str, res: TestResult, confirm: bool
) -> CheckRecord:
    if confirm:
        res.details["confirmatory"] = True
    return CheckRecord(impl, case.name, name, category, res)


def position_checks(
    impl: str,
    rounds: TreeRounds,
    rate: float,
    profile: Profile,
    prefix: str = "",
    confirm: bool = False,
) -> list[CheckRecord]:
    """For j = 1..depth+1: the token at position j of rounds emitting >= j tokens ~ its prefix's target row."""
    case, out = rounds.case, []
    for j in range(1, case.max_length + 1):
        name = f"{prefix}position_{j}"
        selected = np.flatnonzero(rounds.counts >= j)
        if selected.size == 0:
            res = TestResult(
                name,
                0.0,
                1.0,
                0,
                0.0,
                profile.false_pass_rate,
                float("nan"),
                True,
                f"{name}: no round reached position {j}: nothing to test",
                {"skipped": True},
            )
            out.append(_record(impl, case, name, "exactness", res, confirm))
            continue
        prefixes, group = np.unique(rounds.tokens[selected, : j - 1], axis=0, return_inverse=True)
        rows = [case.model.rows(tuple(int(t) for t in pre))[0] for pre in prefixes]
        tokens = rounds.tokens[selected, j - 1]
        if len(rows) > 1 and any(not np.array_equal(row, rows[0]) for row in rows[1:]):
            res = _pit_position(
                name, tokens, np.asarray(group).reshape(-1), rows, rate, profile, case.name
            )
        else:
            res = gof(name, np.bincount(tokens, minlength=case.V), rows[0], rate, profile)
        out.append(_record(impl, case, name, "exactness", res, confirm))
    return out


def _pit_position(
    name: str,
    tokens: np.ndarray,
    group: np.ndarray,
    rows: list,
    rate: float,
    profile: Profile,
    case_name: str,
) -> TestResult:
    """Position j where the emitted prefixes have different target rows: the randomized PIT of each token under
    its own prefix's row is i.i.d. U(0, 1) under exactness (which rounds reach j depends on earlier tokens
    only), so the exact KS law holds; a sum of draws from different rows tested as one multinomial would not."""
    rng = np.random.default_rng([case_seed(case_name, name), 3])
    return pit_ks_or_fail(
        name,
        lambda: np.concatenate(
            [
                pit_values(
                    tokens[group == g],
                    np.broadcast_to(row, ((group == g).sum(), row.size)),
                    rng,
                    ordering="prob",
                )
                for g, row in enumerate(rows)
            ]
        ),
        int(tokens.size),
        rate,
        profile.false_pass_rate,
    )


def completed_stream_check(
    impl: str,
    rounds: TreeRounds,
    rate: float,
    profile: Profile,
    seed: int,
    name: str = "completed_stream",
    confirm: bool = False,
) -> CheckRecord:
    """The round's tokens completed to depth + 1 by draws from the target ~ the target's law."""
    case, rng = rounds.case, np.random.default_rng([seed, 7])
    codes = np.empty(rounds.n, dtype=np.int64)
    for r in range(rounds.n):
        path = rounds.tokens[r, : rounds.counts[r]].tolist()
        while len(path) < case.max_length:
            path.append(int(inverse_cdf(case.model.rows(tuple(path))[0], rng.random())))
        codes[r] = encode_stream(tuple(path), case.V)
    counts = np.bincount(codes, minlength=case.stream_law.size)
    return _record(
        impl, case, name, "exactness", gof(name, counts, case.stream_law, rate, profile), confirm
    )


def path_law_check(impl: str, rounds: TreeRounds, rate: float, profile: Profile) -> CheckRecord:
    """The whole emitted path against the oracle's exact law; a path the rule never emits is its own bin."""
    case = rounds.case
    paths = list(case.path_law)
    index = {path: i for i, path in enumerate(paths)}
    law = with_unseen_category(np.array([case.path_law[p] for p in paths]))
    cats = np.array(
        [
            index.get(tuple(rounds.tokens[r, : rounds.counts[r]].tolist()), len(paths))
            for r in range(rounds.n)
        ],
        dtype=np.int64,
    )
    res = gof("path_law", np.bincount(cats, minlength=law.size), law, rate, profile)
    return CheckRecord(impl, case.name, "path_law", "standard_rule", res)


def tokens_per_round_check(
    impl: str, rounds: TreeRounds, rate: float, profile: Profile
) -> CheckRecord:
    """Tokens per round N against the multi-round rule's exact law (how much it accepts, not exactness)."""
    case = rounds.case
    law = drop_rounding_mass(case.length_law)
    res = gof(
        "tokens_per_round", np.bincount(rounds.counts - 1, minlength=law.size), law, rate, profile
    )
    mean_obs, mean_exp = (
        float(rounds.counts.mean()),
        float((np.arange(1, law.size + 1) * law).sum()),
    )
    res.details.update({"mean_tokens_observed": mean_obs, "mean_tokens_standard_rule": mean_exp})
    res = TestResult(
        res.name,
        res.statistic,
        res.p_value,
        res.n,
        res.false_fail_rate,
        res.false_pass_rate,
        res.detectable_tv,
        res.passed,
        res.message + f"; mean N {mean_obs:.4f} vs multi-round rule {mean_exp:.4f}",
        res.details,
    )
    return CheckRecord(impl, case.name, "tokens_per_round", "standard_rule", res)
