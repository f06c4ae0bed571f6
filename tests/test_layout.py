"""The tree reads as it installs: inside the folders that install as `exactspec.*`, every import of the
package's own code is relative (`from .core import registry`, `from ..reference import rules`), so the same
statement names the same file on disk and in site-packages, for a reader, a tool or an IDE."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: The folders `pyproject.toml` maps into the one import root.
MAPPED = ("exactspec", "reference", "stat_tests", "conformance", "proofs", "gpu_impl")


def absolute_self_imports(source: str) -> list[tuple[int, str]]:
    """(line, statement) of every absolute import of `exactspec` or a module under it in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [
            (node.lineno, name)
            for name in names
            if name == "exactspec" or name.startswith("exactspec.")
        ]
    return found


def test_the_scanner_finds_absolute_imports():
    source = "import exactspec\nfrom exactspec.reference import rules\nfrom .core import registry\nimport numpy\n"
    assert absolute_self_imports(source) == [(1, "exactspec"), (2, "exactspec.reference")]
    assert absolute_self_imports("def f():\n    from exactspec import cache\n") == [
        (2, "exactspec")
    ]


@pytest.mark.parametrize("folder", MAPPED)
def test_every_self_import_in_a_mapped_folder_is_relative(folder):
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {name}"
        for path in sorted((REPO / folder).rglob("*.py"))
        for line, name in absolute_self_imports(path.read_text())
    ]
    assert offenders == [], "absolute imports of exactspec inside the package:\n" + "\n".join(
        offenders
    )


#: Calls that make a test's outcome depend on what it checks (pytest's own, or the project's assert_* helpers).
CHECKING_CALLS = ("raises", "fail", "warns", "xfail", "skip", "importorskip")


def _checks_something(function: ast.FunctionDef, helpers: set[str]) -> bool:
    for node in ast.walk(function):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if name in CHECKING_CALLS or name.startswith("assert") or name in helpers:
                return True
    return False


def silent_tests(source: str) -> list[str]:
    """Names of the test functions of `source` with no assert, no pytest.raises/fail/skip and no call to a helper
    of the same module that asserts."""
    functions = {n.name: n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
    helpers = {
        name
        for name, fn in functions.items()
        if not name.startswith("test_") and _checks_something(fn, set())
    }
    return [
        name
        for name, fn in functions.items()
        if name.startswith("test_") and not _checks_something(fn, helpers)
    ]


def test_the_assert_scanner_finds_a_test_that_checks_nothing():
    source = (
        "def _ok(x):\n    assert x\n\ndef test_a():\n    _ok(1)\n\ndef test_b():\n    print('hi')\n\n"
        "def test_c():\n    with pytest.raises(ValueError):\n        int('x')\n"
    )
    assert silent_tests(source) == ["test_b"]


def test_every_test_asserts_something():
    files = sorted((REPO / "tests").glob("test_*.py")) + sorted(
        (REPO / "conformance").rglob("test_*.py")
    )
    empty = [
        f"{path.relative_to(REPO)}::{name}"
        for path in files
        for name in silent_tests(path.read_text())
    ]
    assert empty == [], "tests that assert nothing:\n" + "\n".join(empty)
