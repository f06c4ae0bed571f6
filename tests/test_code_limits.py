"""The code stays readable: no product module over ~400 lines, no function over ~60 (the project's
standard). Counted on the source text by the `ast` module, so a breach fails here, not in review."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("reference", "stat_tests", "conformance", "proofs", "gpu_impl", "exactspec", "benchmarks")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def product_modules() -> list[Path]:
    return sorted(path for folder in PRODUCT for path in (REPO / folder).rglob("*.py"))


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """(name, lines) of every function or method of `source` longer than `limit` lines."""
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > limit]


def test_the_limit_checker_finds_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(70))
    assert long_functions(f"def f():\n{body}\n") == [("f", 71)]
    assert long_functions("def g():\n    return 1\n") == []


@pytest.mark.parametrize("path", product_modules(), ids=lambda p: str(p.relative_to(REPO)))
def test_module_and_function_sizes(path):
    source = path.read_text()
    assert source.count("\n") <= MAX_MODULE_LINES, f"{path.name}: {source.count(chr(10))} lines"
    assert long_functions(source) == [], f"{path.name}: functions over {MAX_FUNCTION_LINES} lines"
