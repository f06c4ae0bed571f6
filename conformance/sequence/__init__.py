"""Sequence-level certification: tests of the *generated sequences* of a speculative generator.

Rule-level tests see one verification round; bugs in the generation loop (draft warped differently from
the q in the ratio, target rows conditioned on rejected tokens, caches not rolled back, batch rows mixed
up, EOS and max-token handling) only show in the law of whole sequences. See conformance/CONTRACT.md (sequence level).

    from exactspec.conformance.sequence import certify_generation, run_sequence_suite
    report = certify_generation("transformers-assisted", profile="quick", out_dir="cert/")
    # cert/certificate.json (schema 2.0, level "sequence") and cert/CERTIFICATE.md
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .adapters import (
    GpuImplAdapter,
    HFAssistedAdapter,
    HFPromptLookupAdapter,
    Unsupported,
    load_adapter,
)
from ..core.profiles import PROFILES
from .cases import CASES, REAL_CASES
from .reference_loop import ReferenceLoop
from .report import to_markdown, write_report
from ..core.report import document
from .suite import run_sequence_result, run_sequence_suite


def offers_generation(impl: Any) -> bool:
    """True when `impl` (object, builtin name or 'MODULE:NAME') offers the generation-level `generate`."""
    try:
        return load_adapter(impl) is not None
    except Exception:  # noqa: BLE001
        return False


def certify_generation(impl: Any, profile: str = "standard", out_dir: str | Path | None = None,
                       real_model: bool = False, impl_spec: str | None = None, **kwargs: Any) -> dict:
    """Run the sequence-level suite on `impl`; write certificate.json + CERTIFICATE.md into `out_dir` if given.

    `impl_spec` ("MODULE:NAME") names the implementation in the provenance when `impl` is an object.
    Returns the report document (``report['verdict']``, ``report['passed']``, ``report['checks']``, per-case
    entries with their evidence), plus ``report['files']`` when written."""
    result = run_sequence_result(impl, profile=profile, real_model=real_model, **kwargs)
    spec = impl_spec or (impl if isinstance(impl, str) else result.impl)
    if out_dir is None:
        return document(result, spec)
    paths = write_report(result, out_dir, spec)
    report = paths["document"]
    report["files"] = [paths["json"], paths["markdown"]]
    return report


__all__ = [
    "CASES", "PROFILES", "REAL_CASES", "GpuImplAdapter", "HFAssistedAdapter", "HFPromptLookupAdapter",
    "ReferenceLoop", "Unsupported", "certify_generation", "load_adapter", "offers_generation",
    "run_sequence_result", "run_sequence_suite", "to_markdown", "write_report",
]
