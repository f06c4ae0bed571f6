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
        found += [(node.lineno, name) for name in names if name == "exactspec" or name.startswith("exactspec.")]
    return found


def test_the_scanner_finds_absolute_imports():
    source = "import exactspec\nfrom exactspec.reference import rules\nfrom .core import registry\nimport numpy\n"
    assert absolute_self_imports(source) == [(1, "exactspec"), (2, "exactspec.reference")]
    assert absolute_self_imports("def f():\n    from exactspec import cache\n") == [(2, "exactspec")]


@pytest.mark.parametrize("folder", MAPPED)
def test_every_self_import_in_a_mapped_folder_is_relative(folder):
    offenders = [f"{path.relative_to(REPO)}:{line}: {name}" for path in sorted((REPO / folder).rglob("*.py"))
                 for line, name in absolute_self_imports(path.read_text())]
    assert offenders == [], "absolute imports of exactspec inside the package:\n" + "\n".join(offenders)
