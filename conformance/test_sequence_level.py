"""Sequence-level conformance (conformance/sequence): the law of whole generated sequences.

Uses the suite's ``--impl`` / ``--profile`` options when they are registered: every ``--impl`` that offers
the generation-level ``generate`` is certified here; rule-level adapters (``verify`` only) are left to the
rule-level suite. Without a generation-level ``--impl`` it certifies exactspec's own generator
(gpu_impl) and the reference loop.
"""

from __future__ import annotations

import pytest

from conformance.sequence import load_adapter, run_sequence_suite
from conformance.sequence.report import to_markdown

DEFAULT_GENERATION_IMPLS = ["reference", "gpu_impl"]


def _impls(config) -> list[str]:
    given = config.getoption("--impl", default=None) or []
    if isinstance(given, str):
        given = [given]
    chosen = []
    for spec in given:
        try:
            if load_adapter(spec) is not None:
                chosen.append(spec)
        except Exception:  # noqa: BLE001 - a rule-level spec the generation loader cannot build
            continue
    return chosen or DEFAULT_GENERATION_IMPLS


def pytest_generate_tests(metafunc):
    if "generation_impl" in metafunc.fixturenames:
        metafunc.parametrize("generation_impl", _impls(metafunc.config))


@pytest.mark.slow
def test_sequence_level(generation_impl, request):
    profile = request.config.getoption("--profile", default="quick") or "quick"
    report = run_sequence_suite(generation_impl, profile=profile)
    assert report["passed"], to_markdown(report)
