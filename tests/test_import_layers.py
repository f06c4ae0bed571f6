"""The package's imports run one way: no import cycle anywhere, and no import inside a function but a deliberate lazy
one, which defers an optional or heavy package that the importing module does not load otherwise and says so.

The layers themselves are import-linter's contracts (`[tool.importlinter]` in pyproject.toml, run by
`.ci/torch_free.sh` on a real install: import-linter cannot follow the editable one); this file reads the graph from
the source folders (`tests/import_graph.py`), so it runs in the development venv. The layering: docs/layout.md.
"""

from __future__ import annotations

import ast

from tests.import_graph import (
    REPO,
    Import,
    cycles,
    import_graph,
    imports_of,
    loaded_packages,
    package_modules,
    scan,
)

#: The packages a lazy import may defer: the extras' (`[torch]`, `[engine]`, `[dask]`, and the engines' own packages,
#: installed in their venvs) and matplotlib, which only the plots need.
OPTIONAL = frozenset(
    {
        "torch",
        "transformers",
        "gguf",
        "safetensors",
        "httpx",
        "tenacity",
        "starlette",
        "uvicorn",
        "anyio",
        "jinja2",
        "distributed",
        "vllm",
        "llama_cpp",
        "matplotlib",
    }
)
#: Base dependencies that take seconds to import: only a module that must start fast (`LIGHT`) may defer them.
SLOW = frozenset({"numpy", "scipy", "statsmodels", "sympy", "hypothesis"})
#: Modules that must import fast, and why; they load none of OPTIONAL | SLOW, so a lazy import there may defer any.
#: (`engine serve` and `engine certify` need the [engine] extra: on the base install `exactspec engine` says so in one
#: line, `engine.cli`.)
LIGHT = {
    "exactspec.cli": "every `exactspec` command starts here",
    "exactspec.conformance.plugin": "pytest loads it in every session of any project that has exactspec installed",
    "exactspec.conformance.certify_command": "`exactspec certify --help`",
    "exactspec.conformance.engine.certify_samples": "`exactspec certify-samples --help`",
    "exactspec.gpu_impl.heads.train_heads_cli": "`exactspec train-heads --help`",
    "exactspec.cache_cli": "`exactspec cache`",
}


def deferred(imported: Import) -> frozenset[str]:
    """What a function-level import defers: the packages of OPTIONAL (SLOW too, in a LIGHT module) that importing its
    target loads and its module does not load otherwise."""
    allowed = OPTIONAL | SLOW if imported.importer in LIGHT else OPTIONAL
    target = (
        loaded_packages(imported.target)
        if imported.target in package_modules()
        else frozenset({imported.top})
    )
    return (target - loaded_packages(imported.importer)) & allowed


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(
        isinstance(name, ast.Name) and name.id in ("ImportError", "ModuleNotFoundError")
        for name in caught
    )


def _explained(module: str, imported: Import) -> bool:
    """The lazy import says why: a comment on its lines or above its run of import statements (above the block's
    header too, when the run opens a block), or a `try:` around it whose handler catches ImportError (the handler
    says what is missing and what follows)."""
    source = package_modules()[module].read_text()
    lines = [""] + source.splitlines()
    for node in ast.walk(ast.parse(source)):
        for field in ("body", "orelse", "finalbody"):
            body, run = getattr(node, field, None), []
            for statement in body if isinstance(body, list) else []:
                run = (
                    run + [statement] if isinstance(statement, (ast.Import, ast.ImportFrom)) else []
                )
                if run and statement.lineno == imported.line:
                    if (
                        isinstance(node, ast.Try)
                        and field == "body"
                        and any(map(_catches_import_error, node.handlers))
                    ):
                        return True
                    above = run[0].lineno - 1
                    header = lines[above].rstrip().endswith(":")
                    text = (
                        lines[statement.lineno : statement.end_lineno + 1]
                        + lines[above - header : above + 1]
                    )
                    return any("#" in line for line in text)
    return False


def test_the_graph_reads_relative_lazy_and_type_checking_imports():
    source = (
        "from __future__ import annotations\nfrom typing import TYPE_CHECKING\nfrom .. import rules\n"
        "from .core import levels\nif TYPE_CHECKING:\n    from .level import Level\n"
        "def f():\n    import torch  # why\n    from ..cache import cache_root\n"
    )
    found = scan(
        source,
        "exactspec.conformance.loader",
        False,
        {"exactspec.conformance.core.levels", "exactspec.conformance.level"},
    )
    assert [(i.target, i.in_function, i.type_checking) for i in found] == [
        ("__future__", False, False),
        ("typing", False, False),
        ("exactspec", False, False),
        ("exactspec.conformance.core.levels", False, False),
        ("exactspec.conformance.level", False, True),
        ("torch", True, False),
        ("exactspec.cache", True, False),
    ]
    lazy = scan(
        "from . import SpeculativeGenerator\n",
        "exactspec.gpu_impl.cli.cli_run",
        False,
        set(),
        {"exactspec.gpu_impl.cli": {"SpeculativeGenerator": "exactspec.gpu_impl.loop.generator"}},
    )
    assert lazy[0].target == "exactspec.gpu_impl.loop.generator"


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_whole_package_is_read():
    modules = package_modules()
    assert len(modules) > 200
    assert {
        "exactspec.cli",
        "exactspec.reference.rules",
        "exactspec.conformance.engine.collect.campaign",
        "exactspec.gpu_impl.sampling.sampler",
        "exactspec.proofs.registry",
    } <= set(modules)


def test_no_import_cycle():
    """No module reaches itself through imports of any kind (at module level, in functions, under TYPE_CHECKING)."""
    found = cycles(import_graph())
    assert found == [], (
        "import cycles (break each by moving code down, not by hiding an import in a function):\n"
        + "\n".join(" <-> ".join(cycle) for cycle in found)
    )


def test_light_modules_stay_light():
    heavy = {module: sorted(loaded_packages(module) & (OPTIONAL | SLOW)) for module in LIGHT}
    assert {module: loaded for module, loaded in heavy.items() if loaded} == {}


def test_every_import_inside_a_function_defers_an_optional_or_slow_package_and_says_why():
    unjustified, silent = [], []
    for module, path in package_modules().items():
        for imported in imports_of(module):
            if not imported.in_function:
                continue
            where = f"{path.relative_to(REPO)}:{imported.line} {imported.target}"
            if not deferred(imported):
                unjustified.append(where)
            elif not _explained(module, imported):
                silent.append(where)
    assert unjustified == [], (
        "imports inside functions that defer nothing optional (move them to module level):\n"
        + "\n".join(unjustified)
    )
    assert silent == [], "lazy imports without a comment saying why:\n" + "\n".join(silent)


def test_the_justification_rule_can_fail():
    lazy_numpy = Import("exactspec.reference.laws", 1, "numpy", True, False)
    assert deferred(lazy_numpy) == frozenset()
    lazy_torch = Import("exactspec.reference.laws", 1, "torch", True, False)
    assert deferred(lazy_torch) == {"torch"}
    assert not _explained(
        "exactspec.reference.laws", Import("exactspec.reference.laws", 10**6, "torch", True, False)
    )
