"""Sequence-level conformance (conformance/sequence): the law of whole generated sequences.

Certifies every --exactspec-impl that offers the generation-level ``generate`` (without any, exactspec's own
generator (gpu_impl) and the reference loop); the others are left to their levels. The verdict goes into
pytest's JUnit properties (``exactspec_verdict``, ``exactspec_level`` = ``sequence``, ...); with
``--exactspec-report DIR`` the certificate is written to DIR/<impl>-sequence/.
"""

from __future__ import annotations

import pytest

pytest.importorskip(
    "torch", reason="the sequence level runs real models: pip install 'exactspec[torch]'"
)
pytest.importorskip(
    "transformers", reason="the sequence level runs real models: pip install 'exactspec[torch]'"
)

from ..plugin import PASSING, certify_level, failures  # noqa: E402

pytestmark = pytest.mark.filterwarnings(
    "ignore:record_property is incompatible:pytest.PytestWarning"
)

LEVEL_UNDER_TEST = "sequence"


@pytest.mark.slow
def test_sequence_level(impl_spec, request, record_property):
    cert = certify_level(LEVEL_UNDER_TEST, impl_spec, request, record_property)
    assert cert.verdict in PASSING, f"{impl_spec}: {failures(cert)}"
