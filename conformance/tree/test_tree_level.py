"""Tree-level conformance (conformance/tree): one round of tree verification, `verify_tree(tree, rng)`.

Certifies every --exactspec-impl that offers ``verify_tree`` (without any, exactspec's NumPy tree oracle); the
others are left to their levels. The verdict goes into pytest's JUnit properties (``exactspec_verdict``,
``exactspec_level`` = ``tree``, ...); with ``--exactspec-report DIR`` the certificate is written to
DIR/<impl>-tree/. EXACT_NOT_STANDARD passes (exact; the message says it is not the multi-round rule).
"""

from __future__ import annotations

import pytest

from ..plugin import PASSING, certify_level, failures

pytestmark = pytest.mark.filterwarnings(
    "ignore:record_property is incompatible:pytest.PytestWarning"
)

LEVEL_UNDER_TEST = "tree"


def test_tree_level(impl_spec, request, record_property):
    cert = certify_level(LEVEL_UNDER_TEST, impl_spec, request, record_property)
    assert cert.verdict in PASSING, f"{impl_spec}: {failures(cert)}"
