"""The code stays readable: limits on size and complexity that the formatter's layout does not move.

The formatter (`ruff format`, 100 columns) decides how many lines a statement takes, so the limits are not counted
in lines: a product module holds at most `MAX_MODULE_STATEMENTS` statements (counted by the `ast` module), and
each function's cyclomatic complexity is at most the limit in ``[tool.ruff.lint.mccabe]`` (ruff's C901, the one
implementation of that measure). A breach fails here, not in review.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PRODUCT = (
    "reference",
    "stat_tests",
    "conformance",
    "proofs",
    "gpu_impl",
    "exactspec",
    "benchmarks",
)
#: Statements in one product module (the largest held 284 when the limit was set).
MAX_MODULE_STATEMENTS = 300


def product_modules() -> list[Path]:
    return sorted(path for folder in PRODUCT for path in (REPO / folder).rglob("*.py"))


def statements(source: str) -> int:
    """The statements of `source`, nested ones included (its layout does not count)."""
    return sum(isinstance(node, ast.stmt) for node in ast.walk(ast.parse(source)))


def max_complexity() -> int:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    return int(config["tool"]["ruff"]["lint"]["mccabe"]["max-complexity"])


def ruff_command() -> list[str]:
    """ruff (the [test] extra pins it), from the test's venv first."""
    beside = Path(sys.executable).with_name("ruff")
    found = str(beside) if beside.is_file() else shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (the [test] extra installs it)")
    return [found]


def complex_functions(paths: list[Path]) -> list[str]:
    """ruff's C901 findings in `paths` at the project's limit, one line each."""
    done = subprocess.run(
        [
            *ruff_command(),
            "check",
            "--no-cache",
            "--select",
            "C901",
            "--config",
            f"lint.mccabe.max-complexity={max_complexity()}",
            "--output-format",
            "concise",
            *map(str, paths),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode in (0, 1), done.stderr
    return [line for line in done.stdout.splitlines() if "C901" in line]


def test_the_statement_count_ignores_layout():
    one_line = "x = f(a, b, c)\n"
    spread = "x = f(\n    a,\n    b,\n    c,\n)\n"
    assert statements(one_line) == statements(spread) == 1
    assert statements("def g():\n    if x:\n        return 1\n    return 2\n") == 4


def test_the_complexity_check_finds_a_complex_function(tmp_path):
    branches = "\n".join(
        f"    if x == {i}:\n        return {i}" for i in range(max_complexity() + 1)
    )
    path = tmp_path / "complex.py"
    path.write_text(f"def f(x):\n{branches}\n    return -1\n")
    assert len(complex_functions([path])) == 1
    path.write_text("def g(x):\n    return x\n")
    assert complex_functions([path]) == []


@pytest.mark.parametrize("path", product_modules(), ids=lambda p: str(p.relative_to(REPO)))
def test_module_size_in_statements(path):
    count = statements(path.read_text())
    assert count <= MAX_MODULE_STATEMENTS, f"{path.name}: {count} statements"


def test_no_product_function_is_over_the_complexity_limit():
    assert complex_functions([REPO / folder for folder in PRODUCT]) == []
