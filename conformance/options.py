"""Command-line options of the conformance suite, registered by conformance/conftest.py and by the
repository's root conftest.py (so they work for `pytest conformance ...`, a plain `pytest` from the
root, and `pytest tests/...`). Registering twice is harmless."""

from __future__ import annotations


def register(parser) -> None:
    group = parser.getgroup("conformance", "exactspec conformance suite")
    options = [
        (("--impl",), dict(action="append", default=None, metavar="MODULE:NAME",
                           help="implementation to certify (repeatable): MODULE:NAME imported from sys.path (the "
                                "current directory included); NAME is an object with verify(...) or a zero-argument "
                                "callable returning one. Default: exactspec's own implementations.")),
        (("--profile",), dict(action="store", default="standard", choices=("quick", "standard", "full"),
                              help="conformance profile: quick (CI), standard (default), full (certificate grade)")),
        (("--conformance-report",), dict(action="store", default=None, metavar="DIR",
                                         help="also write a certificate (JSON, Markdown, plots) per implementation "
                                              "into DIR/<impl>/")),
    ]
    for opts, attrs in options:
        try:
            group.addoption(*opts, **attrs)
        except ValueError:  # already registered by the other conftest
            pass


def pytest_addoption(parser):
    """Lets `pytest -p conformance.options --pyargs conformance --impl ...` work from any directory
    (with --pyargs, pytest reads options before it finds conformance/conftest.py)."""
    register(parser)


def pytest_configure(config):
    """The suite's own marker, so runs outside this repository (no pyproject.toml) do not warn."""
    config.addinivalue_line("markers", "slow: long-running statistical or model-backed test")
