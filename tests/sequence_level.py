"""The sequence level's entry points as the project's tests call them (an adapter object or name, case names,
a worker count), on `exactspec.conformance.certify`."""

from __future__ import annotations

from typing import Any, Sequence

from exactspec.conformance.api import certify
from exactspec.conformance.core.report import SuiteResult


def run_sequence_result(
    impl: Any,
    profile: str = "quick",
    cases: Sequence[str] | None = None,
    fail_fast: bool = False,
    workers: int = 1,
) -> SuiteResult:
    return certify(
        impl, "sequence", profile, cases=cases, fail_fast=fail_fast, workers=workers
    ).result


def run_sequence_suite(
    impl: Any, profile: str = "quick", cases: Sequence[str] | None = None, fail_fast: bool = False
) -> dict:
    """The certificate document of a sequence-level run."""
    return certify(impl, "sequence", profile, cases=cases, fail_fast=fail_fast).document()
