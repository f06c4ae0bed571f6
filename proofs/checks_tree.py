"""Checks of C13 (ARGUMENT.md): one round of tree verification (multi-round rejection, with and without
replacement) emits a path with the target's law; its length law; the chain is the one-child special case.
The oracle's `reference/tree_laws.py` (exact enumeration over drafts and coins) is under test, in rational
arithmetic, on every enumerable curated tree of the tree level (`conformance/case_data/trees.json`)."""

from __future__ import annotations

from ..conformance.tree.cases import TREE_CASES
from ..reference.laws import round_distribution
from ..reference.tree_laws import (
    completed_stream_law,
    depth_rows_length_law,
    length_law,
    target_stream_law,
    tree_round_law,
)
from ..reference.tree_models import ContextRows
from ..reference.tree_rules import shape_from_branching

from .registry import CheckResult, check, expect, run_guarded

#: Extra shapes beyond the curated cases: (branching, replacement, vocab_size, min_support).
EXTRA_SHAPES = (
    ([2, 3], True, 3, 1),
    ([3, 2], False, 4, 3),
    ([4, 1], False, 5, 4),
    ([1, 2, 2], True, 3, 1),
    ([2, 2, 2], False, 3, 2),
)


def _tree_cases() -> list[tuple[str, object, ContextRows, bool]]:
    cases: list[tuple[str, object, ContextRows, bool]] = [
        (c.name, c.parent, c.model, c.replacement) for c in TREE_CASES if c.enumerable
    ]
    for i, (branching, replacement, vocab, support) in enumerate(EXTRA_SHAPES):
        for by in ("path", "depth"):
            model = ContextRows(
                vocab_size=vocab, seed=100 + i, by=by, q_zeros=0.25, min_support=support
            )
            cases.append(
                (f"extra_{branching}_{by}", shape_from_branching(branching), model, replacement)
            )
    return cases


@check("C13")
def exact_tree_target_law() -> CheckResult:
    """Every enumerable curated tree (and extra shapes): the completed emitted path has the target's law, exactly."""

    def body():
        cases = _tree_cases()
        for name, parent, model, replacement in cases:
            law = tree_round_law(parent, model, replacement, rational=True)
            length = int(max(len(path) for path in law))
            expect(sum(law.values()) == 1, f"{name}: the path law sums to {sum(law.values())}")
            expect(
                completed_stream_law(law, model, length, True)
                == target_stream_law(model, length, True),
                f"{name}: the completed emitted path does not have the target's law",
            )
        return (
            len(cases),
            f"{len(cases)} trees (widths 1-4, depths 1-5, with and without replacement): exact equality",
        )

    return run_guarded("exact_tree_target_law", body)


@check("C13")
def tree_length_law() -> CheckResult:
    """Per-depth rows, drafts with replacement: the enumerated length law equals the closed form prod (1 - alpha_i) alpha_j."""

    def body():
        shapes = [[1], [3], [2, 2], [4, 1], [1, 3, 2], [2, 1, 1, 1, 1]]
        count = 0
        for i, branching in enumerate(shapes):
            for draft in ("independent", "near"):
                model = ContextRows(
                    vocab_size=4, seed=200 + i, by="depth", draft=draft, q_zeros=0.2
                )
                parent = shape_from_branching(branching)
                law = tree_round_law(parent, model, True, rational=True)
                closed = depth_rows_length_law(parent, model, rational=True)
                expect(
                    length_law(law, len(branching) + 1) == closed,
                    f"{branching}/{draft}: enumerated {length_law(law, len(branching) + 1)} != closed form {closed}",
                )
                count += 1
        return count, f"{count} trees: length law = closed form, exactly"

    return run_guarded("tree_length_law", body)


@check("C13", "C3")
def tree_chain_special_case() -> CheckResult:
    """One child per node: the tree law is `round_distribution`'s dictionary, bit for bit (float64) and exactly."""

    def body():
        count = 0
        for k in (1, 2, 3, 4):
            for seed, q_zeros in ((300 + k, 0.0), (400 + k, 0.4)):
                model = ContextRows(vocab_size=4, seed=seed, by="depth", q_zeros=q_zeros)
                parent = shape_from_branching([1] * k)
                p = [model.rows((0,) * d)[0] for d in range(k + 1)]
                q = [model.rows((0,) * d)[1] for d in range(k)]
                expect(
                    tree_round_law(parent, model, True) == round_distribution(p, q),
                    f"k={k}, seed {seed}: float64 tree law differs from round_distribution",
                )
                p_r = [model.rational_rows((0,) * d)[0] for d in range(k + 1)]
                q_r = [model.rational_rows((0,) * d)[1] for d in range(k)]
                expect(
                    tree_round_law(parent, model, True, rational=True)
                    == round_distribution(p_r, q_r),
                    f"k={k}, seed {seed}: rational tree law differs from round_distribution",
                )
                count += 1
        return count, f"{count} chains (k = 1..4): identical dictionaries, float64 and rational"

    return run_guarded("tree_chain_special_case", body)
