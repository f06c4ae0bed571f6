"""The tree oracle: DraftTree validation, the multi-round rule, its exact law, and the chain special case."""

from fractions import Fraction

import numpy as np
import pytest

from exactspec.reference.laws import round_distribution
from exactspec.reference.tree_laws import (
    completed_stream_law,
    depth_rows_length_law,
    length_law,
    target_stream_law,
    tree_law_given,
    tree_round_law,
)
from exactspec.reference.tree_models import ContextRows
from exactspec.reference.tree_rules import (
    sample_tree,
    shape_from_branching,
    verify_tree,
    verify_tree_batch,
)
from exactspec.reference.trees import DraftTree, chain_tree
from exactspec.stat_tests import assert_chisquare_gof

UNIFORM = np.full((4, 4), 0.25)


def _tree(**changes):
    kwargs = dict(
        parent=[-1, 0, 0, 1],
        tokens=[-1, 1, 2, 3],
        target_probs=UNIFORM,
        draft_probs=UNIFORM,
        replacement=False,
    )
    kwargs.update(changes)
    return DraftTree(**kwargs)


@pytest.mark.parametrize(
    "changes, field",
    [
        (dict(parent=[0, 0, 0, 1]), "parent"),
        (dict(parent=[-1, 0, 2, 1]), "parent"),
        (dict(tokens=[-1, 1, 1, 3]), "tokens"),
        (dict(tokens=[-1, 1, 2]), "tokens"),
        (dict(tokens=[-1, 1, 2, 4]), "tokens"),
        (dict(target_probs=np.full((3, 4), 0.25)), "target_probs"),
        (dict(draft_probs=np.full((4, 4), 0.3)), "draft_probs"),
        (dict(draft_probs=np.array([[0.5, 0, 0.5, 0]] + [[0.25] * 4] * 3)), "tokens"),
        (dict(replacement="no"), "replacement"),
    ],
)
def test_draft_tree_refuses_bad_fields(changes, field):
    with pytest.raises(ValueError, match=field):
        _tree(**changes)


def test_draft_tree_is_frozen_copy_and_describes_its_shape():
    rows = UNIFORM.copy()
    tree = _tree(target_probs=rows)
    assert rows.flags.writeable and not tree.target_probs.flags.writeable
    assert (
        tree.depths().tolist() == [0, 1, 1, 2]
        and tree.max_depth == 2
        and tree.path_tokens(3) == [1, 3]
    )
    assert tree.children(0).tolist() == [1, 2] and tree.is_leaf(2) and not tree.is_chain()
    assert chain_tree(np.full((3, 4), 0.25), np.full((2, 4), 0.25), [0, 3]).is_chain()


@pytest.mark.parametrize("k", [1, 2, 3])
def test_tree_law_of_a_chain_is_round_distribution_bit_for_bit(k):
    model = ContextRows(vocab_size=4, seed=3, by="depth", q_zeros=0.3)
    parent = shape_from_branching([1] * k)
    p = np.array([model.rows((0,) * d)[0] for d in range(k + 1)])
    q = np.array([model.rows((0,) * d)[1] for d in range(k)])
    assert tree_round_law(parent, model, True) == round_distribution(p, q)
    p_r = [model.rational_rows((0,) * d)[0] for d in range(k + 1)]
    q_r = [model.rational_rows((0,) * d)[1] for d in range(k)]
    assert tree_round_law(parent, model, True, rational=True) == round_distribution(p_r, q_r)


@pytest.mark.parametrize(
    "branching, replacement, by",
    [
        ([2, 2], True, "path"),
        ([3, 1], False, "path"),
        ([4], False, "depth"),
        ([1, 3], True, "path"),
    ],
)
def test_emitted_path_has_the_target_law_exactly(branching, replacement, by):
    model = ContextRows(vocab_size=4, seed=5, by=by, q_zeros=0.2, min_support=max(branching))
    parent = shape_from_branching(branching)
    law = tree_round_law(parent, model, replacement, rational=True)
    length = len(branching) + 1
    assert sum(law.values()) == 1 and all(isinstance(v, Fraction) for v in law.values())
    assert completed_stream_law(law, model, length, True) == target_stream_law(model, length, True)


def test_length_law_matches_the_closed_form_on_per_depth_rows():
    model = ContextRows(vocab_size=5, seed=8, by="depth")
    parent = shape_from_branching([3, 2])
    law = tree_round_law(parent, model, True, rational=True)
    assert length_law(law, 3) == depth_rows_length_law(parent, model, rational=True)


def test_q_as_one_rule_would_move_the_law():
    """The enumeration distinguishes rules: a different p == q model changes the law (sanity of the check)."""
    parent = shape_from_branching([2])
    a = tree_round_law(parent, ContextRows(vocab_size=3, seed=1), True)
    b = tree_round_law(parent, ContextRows(vocab_size=3, seed=1, draft="equal"), True)
    assert a != b and all(len(t) == 2 for t in b)  # p == q: the first child is always accepted


def test_verify_tree_follows_its_conditional_law():
    """Fixed tree, 20,000 rounds: chi-square (alpha 1e-4, power 0.999 at TV 0.05) against tree_law_given."""
    model = ContextRows(vocab_size=4, seed=9, q_zeros=0.25, min_support=3)
    tree = sample_tree(shape_from_branching([3, 1]), model, False, np.random.default_rng(0))
    law = tree_law_given(tree)
    keys = list(law)
    rng = np.random.default_rng(1)
    outputs = [tuple(verify_tree(tree, rng)) for _ in range(20_000)]
    assert set(outputs) <= set(keys)
    counts = np.array([outputs.count(key) for key in keys])
    result = assert_chisquare_gof(
        counts=counts, p=np.array([law[k] for k in keys]), false_fail_rate=1e-4
    )
    assert result.passed, result.message


def test_verify_tree_is_deterministic_and_batch_agrees():
    model = ContextRows(vocab_size=6, seed=2)
    trees = [
        sample_tree(shape_from_branching([2, 2]), model, True, np.random.default_rng(s))
        for s in range(30)
    ]
    single = [verify_tree(t, np.random.default_rng(5)) for t in trees]
    assert single == [verify_tree(t, np.random.default_rng(5)) for t in trees]
    rng_a, rng_b = np.random.default_rng(7), np.random.default_rng(7)
    assert verify_tree_batch(trees, rng_a) == [verify_tree(t, rng_b) for t in trees]
    with pytest.raises(ValueError, match="rng"):
        verify_tree(trees[0], 5)
    with pytest.raises(ValueError, match="tree"):
        verify_tree("tree", np.random.default_rng(0))


def test_sample_tree_refuses_too_small_draft_support_without_replacement():
    model = ContextRows(vocab_size=4, seed=1, q_zeros=0.9)
    with pytest.raises(ValueError, match="min_support"):
        for seed in range(20):
            sample_tree(shape_from_branching([4]), model, False, np.random.default_rng(seed))


def test_model_rows_are_exact_and_context_dependent():
    model = ContextRows(vocab_size=5, seed=4, p_zeros=0.3, q_zeros=0.3, min_support=2)
    p, q = model.rational_rows((1, 2))
    assert sum(p) == 1 and sum(q) == 1 and sum(v > 0 for v in q) >= 2
    assert np.allclose(model.rows((1, 2))[0], [float(v) for v in p])
    assert not np.array_equal(model.rows((1, 2))[0], model.rows((2, 1))[0])
    with pytest.raises(ValueError, match="by"):
        ContextRows(vocab_size=3, seed=0, by="token")


def test_batch_construction_checks_the_whole_stack():
    parent = np.array([-1, 0, 0])
    rows = np.full((2, 3, 4), 0.25)
    trees = DraftTree.from_checked_batch(
        parent, np.array([[-1, 1, 2], [-1, 3, 3]]), rows, rows, True
    )
    assert [t.tokens.tolist() for t in trees] == [[-1, 1, 2], [-1, 3, 3]] and trees[1].children(
        0
    ).tolist() == [1, 2]
    with pytest.raises(ValueError, match="tokens"):
        DraftTree.from_checked_batch(parent, np.array([[-1, 1, 2], [-1, 3, 3]]), rows, rows, False)
    zero = rows.copy()
    zero[1, 0] = [0.5, 0.5, 0.0, 0.0]
    with pytest.raises(ValueError, match="draft probability 0"):
        DraftTree.from_checked_batch(parent, np.array([[-1, 1, 2], [-1, 3, 3]]), rows, zero, True)
    with pytest.raises(ValueError, match="target_probs"):
        DraftTree.from_checked_batch(parent, np.array([[-1, 1, 2]]), rows * 2, rows, True)
