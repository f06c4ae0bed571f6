"""pytest plumbing for the conformance suite: options, the implementation under test, shared rounds,
and the end-of-run summary (the same text `exactspec certify` prints)."""

from __future__ import annotations

import re

import pytest

from conformance.adapters import DEFAULT_IMPLS
from conformance.cases import SUITE_CASES
from conformance.harness import Harness, ImplUnavailable, load_impl
from conformance.options import register
from conformance.profiles import budget_for, get_profile, plan_rounds
from conformance.runner import SuiteResult, statistical_records

_RECORDS: dict[str, list] = {}
_LOADED: dict[str, object] = {}
_STAT_CACHE: dict[tuple[str, str, str], list] = {}


def pytest_addoption(parser):
    register(parser)


def _specs(config) -> list[str]:
    return list(config.getoption("--impl") or DEFAULT_IMPLS)


def _short(spec: str) -> str:
    return re.sub(r"^conformance\.adapters\.", "", spec).replace(":", ".")


def pytest_generate_tests(metafunc):
    if "impl_spec" in metafunc.fixturenames:
        specs = _specs(metafunc.config)
        metafunc.parametrize("impl_spec", specs, ids=[_short(s) for s in specs], scope="session")
    if "case" in metafunc.fixturenames:
        metafunc.parametrize("case", SUITE_CASES, ids=[c.name for c in SUITE_CASES])


@pytest.fixture(scope="session")
def profile(request):
    return get_profile(request.config.getoption("--profile"))


@pytest.fixture(scope="session")
def harness(impl_spec):
    if impl_spec not in _LOADED:
        try:
            _LOADED[impl_spec] = load_impl(impl_spec)
        except ImplUnavailable as error:
            _LOADED[impl_spec] = error
        except ValueError as error:
            _LOADED[impl_spec] = error
    impl = _LOADED[impl_spec]
    if isinstance(impl, ImplUnavailable):
        pytest.skip(f"{impl_spec} unavailable here: {impl}")
    if isinstance(impl, Exception):
        from conformance.sequence import offers_generation

        if offers_generation(impl_spec):
            pytest.skip(f"{impl_spec} is a generation-level adapter (generate(), no verify()): "
                        "it is certified by conformance/test_sequence_level.py")
        pytest.fail(f"--impl {impl_spec}: {impl}", pytrace=False)
    return Harness(impl, impl_spec)


@pytest.fixture(scope="session")
def alpha(profile):
    return budget_for(profile, SUITE_CASES).per_check_alpha


@pytest.fixture
def record():
    def _record(impl: str, records: list) -> list:
        _RECORDS.setdefault(impl, []).extend(records)
        return records
    return _record


@pytest.fixture
def stat_records(harness, case, profile, alpha, record):
    """Statistical rounds are shared by the exactness and standard-rule tests of a case."""
    key = (harness.name, case.name, profile.name)
    if key not in _STAT_CACHE:
        _STAT_CACHE[key] = record(harness.name, statistical_records(harness, case, profile, alpha))
    return _STAT_CACHE[key]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _RECORDS:
        return
    from conformance.report import format_summary, write_report

    prof = get_profile(config.getoption("--profile"))
    alpha = budget_for(prof, SUITE_CASES).per_check_alpha
    budget = budget_for(prof, SUITE_CASES)
    terminalreporter.section("exactspec conformance summary")
    out_dir = config.getoption("--conformance-report")
    for impl, records in _RECORDS.items():
        result = SuiteResult(impl, prof, list(records))
        seen = {r.case for r in records}
        result.plan = {c.name: plan_rounds(c, prof, alpha) for c in SUITE_CASES if c.name in seen}
        stat = [r.result for r in records if r.category in ("exactness", "standard_rule")]
        result.budget = budget.summarize(stat) if stat else {}
        result.budget.update({"per_check_alpha": alpha, "n_checks_budgeted": budget.n_checks})
        result.seconds = sum(float(r.result.details.get("seconds", 0.0)) for r in records
                             if r.check == "position_1")
        terminalreporter.write_line(format_summary(result))
        if out_dir:
            import os
            paths = write_report(result, os.path.join(out_dir, re.sub(r"[^A-Za-z0-9_.-]", "_", impl)))
            terminalreporter.write_line(f"  report: {paths['markdown']}")
