"""Sequence-level conformance (conformance/sequence): the law of whole generated sequences.

Uses the suite's ``--exactspec-impl`` / ``--exactspec-profile`` options: every ``--exactspec-impl`` that offers
the generation-level ``generate`` is certified here; rule-level adapters (``verify`` only) are left to the
rule-level suite, and when every ``--exactspec-impl`` is rule-level this test is skipped. Without any ``--exactspec-impl`` it
certifies exactspec's own generator (gpu_impl) and the reference loop. The verdict goes into pytest's
JUnit properties (``exactspec_verdict``, ``exactspec_level``, ``exactspec_profile``, ``exactspec_impl``);
with ``--exactspec-report DIR`` the certificate is written to DIR/<impl>-sequence/.
"""

from __future__ import annotations

import pytest

#: pytest's default junit_family (xunit2) warns on record_property yet writes the properties; the
#: warning would repeat once per test (set junit_family = legacy for schema-valid XML).
pytestmark = pytest.mark.filterwarnings("ignore:record_property is incompatible:pytest.PytestWarning")

import re

pytest.importorskip("torch", reason="the sequence level runs real models: pip install 'exactspec[torch]'")
pytest.importorskip("transformers", reason="the sequence level runs real models: pip install 'exactspec[torch]'")

from .sequence import load_adapter  # noqa: E402
from .sequence.report import to_markdown, write_report  # noqa: E402
from .sequence.suite import run_sequence_result  # noqa: E402
from ..errors import AdapterLoadError, ImplUnavailable  # noqa: E402

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
        except ImplUnavailable:
            continue  # cannot run here: the rule-level tests report the skip with its reason
        except AdapterLoadError:
            chosen.append(spec)  # the test loads it again and fails with the import error, never silently
    skip = pytest.mark.skip(reason="no --impl offers generate(target, draft, prompt_ids, max_new_tokens, k, "
                                   "sampling, seed): the sequence level does not apply")
    return chosen or [pytest.param(None, id="no-generation-adapter", marks=skip)]


def pytest_generate_tests(metafunc):
    if "generation_impl" in metafunc.fixturenames:
        metafunc.parametrize("generation_impl", _impls(metafunc.config))


@pytest.mark.slow
def test_sequence_level(generation_impl, request, record_property):
    profile = request.config.getoption("--exactspec-profile", default="quick") or "quick"
    result = run_sequence_result(generation_impl, profile=profile)
    for name, value in (("exactspec_level", "sequence"), ("exactspec_profile", result.profile.name),
                        ("exactspec_impl", result.impl), ("exactspec_verdict", result.verdict)):
        record_property(name, value)
    out_dir = request.config.getoption("--exactspec-report", default=None)
    spec = generation_impl if isinstance(generation_impl, str) else result.impl
    paths = write_report(result, f"{out_dir}/{re.sub(r'[^A-Za-z0-9_.-]', '_', spec)}-sequence", spec) if out_dir else None
    report = paths["document"] if paths else None
    if not result.passed:
        from .core.report import document

        pytest.fail(to_markdown(report or document(result, spec)), pytrace=False)
