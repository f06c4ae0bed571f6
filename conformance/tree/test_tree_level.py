"""Tree-level conformance (conformance/tree): one round of tree verification, `verify_tree(tree, rng)`.

Uses the suite's ``--exactspec-impl`` / ``--exactspec-profile`` options: every ``--exactspec-impl`` offering
``verify_tree`` is certified here (the others are left to their levels, and when none offers it this test is
skipped); without any ``--exactspec-impl`` it certifies exactspec's NumPy tree oracle. The verdict goes into
pytest's JUnit properties (``exactspec_verdict``, ``exactspec_level`` = ``tree``, ...). EXACT_NOT_STANDARD passes
(exact; the message says it is not the multi-round rule).
"""

from __future__ import annotations

import pytest

from ..loader import load_adapter
from .adapters import DEFAULT_TREE_IMPLS
from .harness import offers_tree
from .suite import run_tree_suite
from ...errors import AdapterLoadError, ImplUnavailable

pytestmark = pytest.mark.filterwarnings("ignore:record_property is incompatible:pytest.PytestWarning")


def _impls(config) -> list:
    given = config.getoption("--exactspec-impl", default=None) or []
    if not given:
        return list(DEFAULT_TREE_IMPLS)
    chosen = []
    for spec in given:
        try:
            if offers_tree(load_adapter(spec).adapter):
                chosen.append(spec)
        except (ImplUnavailable, AdapterLoadError):
            continue  # reported by the level the adapter belongs to
    skip = pytest.mark.skip(reason="no --exactspec-impl offers verify_tree(tree, rng): the tree level does not apply")
    return chosen or [pytest.param(None, id="no-tree-adapter", marks=skip)]


def pytest_generate_tests(metafunc):
    if "tree_impl" in metafunc.fixturenames:
        metafunc.parametrize("tree_impl", _impls(metafunc.config))


def test_tree_level(tree_impl, request, record_property):
    profile = request.config.getoption("--exactspec-profile", default="quick") or "quick"
    adapter = load_adapter(tree_impl).adapter
    result = run_tree_suite(adapter, tree_impl, profile)
    for name, value in (("exactspec_level", "tree"), ("exactspec_profile", result.profile.name),
                        ("exactspec_impl", tree_impl), ("exactspec_verdict", result.verdict)):
        record_property(name, value)
    if result.verdict not in ("CERTIFIED", "EXACT_NOT_STANDARD"):
        failed = [r.result.message for r in result.records if not r.passed]
        pytest.fail(f"{tree_impl}: {result.verdict} at the tree level:\n" + "\n".join(failed[:10]), pytrace=False)
