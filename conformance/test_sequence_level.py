"""Sequence-level conformance (conformance/sequence): the law of whole generated sequences.

Uses the suite's ``--exactspec-impl`` / ``--exactspec-profile`` options: every ``--exactspec-impl`` that offers
the generation-level ``generate`` is certified here; rule-level adapters (``verify`` only) are left to the
rule-level suite, and when every ``--exactspec-impl`` is rule-level this test is skipped. Without any ``--exactspec-impl`` it
certifies exactspec's own generator (gpu_impl) and the reference loop.
"""

from __future__ import annotations

import pytest

from exactspec.conformance.sequence import load_adapter, run_sequence_suite
from exactspec.conformance.sequence.report import to_markdown

DEFAULT_GENERATION_IMPLS = ["reference", "gpu_impl"]


def _impls(config) -> list:
    given = config.getoption("--exactspec-impl", default=None) or []
    if isinstance(given, str):
        given = [given]
    if not given:
        return DEFAULT_GENERATION_IMPLS
    chosen = []
    for spec in given:
        try:
            if load_adapter(spec) is not None:
                chosen.append(spec)
        except Exception:  # noqa: BLE001 - a rule-level spec the generation loader cannot build
            continue
    skip = pytest.mark.skip(reason="no --impl offers generate(target, draft, prompt_ids, max_new_tokens, k, "
                                   "sampling, seed): the sequence level does not apply")
    return chosen or [pytest.param(None, id="no-generation-adapter", marks=skip)]


def pytest_generate_tests(metafunc):
    if "generation_impl" in metafunc.fixturenames:
        metafunc.parametrize("generation_impl", _impls(metafunc.config))


@pytest.mark.slow
def test_sequence_level(generation_impl, request):
    profile = request.config.getoption("--exactspec-profile", default="quick") or "quick"
    report = run_sequence_suite(generation_impl, profile=profile)
    assert report["passed"], to_markdown(report)
