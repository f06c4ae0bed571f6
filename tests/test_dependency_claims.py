"""The docs say offline certification (`exactspec certify-samples`) needs NumPy, SciPy, statsmodels and matplotlib
only (no torch, no httpx). Checked here against the code: the modules that command loads, with torch, httpx and
transformers blocked, import no other third-party package, and the four are base dependencies."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# as docs/engine-level.md and conformance/CONTRACT.md say
CLAIMED = {
    "numpy",
    "scipy",
    "statsmodels",
    "matplotlib",
}
BLOCKED = ("torch", "httpx", "transformers")

_LOAD = """
import importlib.abc, json, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in %r:
            raise ImportError(name + " is blocked in this test")
        return None
sys.meta_path.insert(0, Block())
import exactspec.cli
import exactspec.conformance.engine.certify_samples
from exactspec.conformance.engine import certificate, engine_level  # certify_samples.main imports these lazily
print(json.dumps(sorted(m.__file__ for name, m in sys.modules.items()
                        if name.split(".")[0] == "exactspec" and m is not None and getattr(m, "__file__", None))))
""" % (BLOCKED,)


def _module_level(tree: ast.AST):
    """The nodes of `tree` outside its functions."""
    for node in ast.iter_child_nodes(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield node
            yield from _module_level(node)


def _third_party_imports(path: Path, lazy: bool = True) -> set[str]:
    """Top-level names of the non-stdlib, non-exactspec packages a module's source imports (anywhere in it; without
    `lazy`, outside its functions only)."""
    names: set[str] = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree) if lazy else _module_level(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {
        n
        for n in names
        if n not in sys.stdlib_module_names and n not in ("exactspec", "__future__")
    }


def test_certify_samples_imports_only_the_packages_the_docs_name():
    done = subprocess.run([sys.executable, "-c", _LOAD], capture_output=True, text=True, cwd="/")
    assert done.returncode == 0, done.stderr[-3000:]
    files = [Path(f) for f in json.loads(done.stdout)]
    assert any(f.name == "certify_samples.py" for f in files)
    # the engine level's own modules, imports in their functions too; the core's driver and executor, loaded here as
    # well, defer to their functions what only other runs use (torch threads of a torch level, a Dask cluster)
    imports = {f: _third_party_imports(f, lazy="engine" in f.parts) for f in files}
    used = {
        name: sorted(str(f) for f in files if name in imports[f])
        for f in files
        for name in imports[f]
    }
    assert set(used) <= CLAIMED, {k: v for k, v in used.items() if k not in CLAIMED}
    assert "statsmodels" in used  # the docs must name it: stat_tests uses it on this path


def test_the_named_packages_are_base_dependencies_and_the_docs_name_them():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    base = {re.split(r"[<>=!~ \[]", dep, maxsplit=1)[0].lower() for dep in project["dependencies"]}
    assert CLAIMED <= base
    text = " ".join((REPO / "docs" / "engine-level.md").read_text().split())
    assert "NumPy, SciPy, statsmodels and matplotlib" in text
    contract = " ".join((REPO / "conformance" / "CONTRACT.md").read_text().split())
    assert "numpy, scipy, statsmodels and matplotlib only" in contract
