"""Every --exactspec-impl loads: a spec that cannot be loaded fails here, once, with the import error (the levels'
tests skip it); one that cannot run on this machine (ImplUnavailable) is skipped with its reason."""

from __future__ import annotations

import pytest

from ..errors import ImplUnavailable
from .core.levels import get_level
from .plugin import resolved


def test_adapter_loads(any_impl_spec):
    got = resolved(any_impl_spec)
    if isinstance(got, ImplUnavailable):
        pytest.skip(f"{any_impl_spec} unavailable here: {got}")
    if isinstance(got, Exception):
        pytest.fail(f"--exactspec-impl {any_impl_spec}: {got}", pytrace=False)
    level, adapter = got
    assert get_level(level).offers(adapter)
