"""The package's import graph, read from its source folders with `ast` (the folders mapped by pyproject.toml's
`[tool.setuptools.package-dir]`, so it reads the tree as it installs, editable install or not): every import statement
of every module, what it names, and where it stands (module level, inside a function, under `TYPE_CHECKING`). A name
taken from a package that hands its names out on first use (PEP 562: a literal `_LAZY` table of name -> module and a
module `__getattr__`, as `gpu_impl` and `conformance` do) counts as an import of the module that defines it.

Tools that import the package to find it (grimp, import-linter) cannot follow the editable install's finder; CI runs
`lint-imports` on a real install (`.ci/torch_free.sh`), and `tests/test_import_layers.py` reads this graph.
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Import:
    """One name an import statement brings in: `target` is the module it loads (a module of the package when the
    name is one, else the module it is taken from; a third-party or stdlib module as written)."""

    importer: str
    line: int
    target: str
    in_function: bool
    type_checking: bool

    @property
    def top(self) -> str:
        return self.target.split(".")[0]


@cache
def package_modules(repo: Path = REPO) -> dict[str, Path]:
    """Module name -> source file, for every module of the mapped folders (a package is its `__init__.py`)."""
    mapping = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    modules = {}
    for package, folder in mapping.items():
        for path in sorted((repo / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = path.relative_to(repo / folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            modules[".".join((package, *parts))] = path
    return modules


def _type_checking_test(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _relative(name: str, package: str) -> str:
    """`name` ("..reference.warping", ".api" or absolute) resolved against `package`."""
    level = len(name) - len(name.lstrip("."))
    if not level:
        return name
    base = package.split(".")[: len(package.split(".")) - level + 1]
    return ".".join(base + ([name[level:]] if name[level:] else []))


def facade(source: str, package: str) -> dict[str, str]:
    """Name -> module of a package `__init__` that hands names out on first use (its literal `_LAZY` table, whose
    values are a module or a (module, attribute) pair); {} for any other."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        else:
            targets = [node.target] if isinstance(node, ast.AnnAssign) else []
        if (
            any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in targets)
            and node.value is not None
        ):
            try:
                table = ast.literal_eval(node.value)
            except ValueError:  # built, not written out: its names are not followed
                return {}
            return {
                name: _relative(value[0] if isinstance(value, tuple) else value, package)
                for name, value in table.items()
            }
    return {}


def scan(
    source: str,
    module: str,
    is_package: bool,
    known: set[str] | frozenset[str] = frozenset(),
    facades: dict[str, dict[str, str]] | None = None,
) -> list[Import]:
    """The imports of one module's `source` (relative ones resolved against `module`; `from X import a` names the
    module X.a when `known` holds it, or the module X's `facades` table gives for a)."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool, type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend(
                    Import(module, child.lineno, alias.name, in_function, type_checking)
                    for alias in child.names
                )
            elif isinstance(child, ast.ImportFrom):
                parts = base[: len(base) - child.level + 1] if child.level else []
                source_module = ".".join(parts + ([child.module] if child.module else []))
                for alias in child.names:
                    named = f"{source_module}.{alias.name}"
                    lazy = (facades or {}).get(source_module, {}).get(alias.name)
                    found.append(
                        Import(
                            module,
                            child.lineno,
                            named if named in known else lazy or source_module,
                            in_function,
                            type_checking,
                        )
                    )
            inner = in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
            )
            visit(
                child,
                inner,
                type_checking or (isinstance(child, ast.If) and _type_checking_test(child)),
            )

    visit(ast.parse(source), False, False)
    return found


@cache
def package_facades(repo: Path = REPO) -> dict[str, dict[str, str]]:
    """Package -> its `facade` table, for the packages that have one."""
    tables = {
        name: facade(path.read_text(), name)
        for name, path in package_modules(repo).items()
        if path.name == "__init__.py"
    }
    return {name: table for name, table in tables.items() if table}


@cache
def imports_of(module: str, repo: Path = REPO) -> tuple[Import, ...]:
    modules = package_modules(repo)
    path = modules[module]
    return tuple(
        scan(
            path.read_text(),
            module,
            path.name == "__init__.py",
            frozenset(modules),
            package_facades(repo),
        )
    )


def import_graph(repo: Path = REPO) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, by any statement (inside functions and under TYPE_CHECKING too)."""
    modules = package_modules(repo)
    return {
        m: {i.target for i in imports_of(m, repo) if i.target in modules and i.target != m}
        for m in modules
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            step = next(successors, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def loaded_packages(module: str, repo: Path = REPO) -> frozenset[str]:
    """The third-party and stdlib top-level packages that importing `module` loads: its module-level imports outside
    TYPE_CHECKING, followed through the package's own modules (and the packages above each of them)."""
    modules = package_modules(repo)
    seen, todo, found = set(), [module, *_parents(module)], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for imported in imports_of(current, repo):
            if imported.in_function or imported.type_checking:
                continue
            if imported.target in modules:
                todo += [imported.target, *(p for p in _parents(imported.target) if p in modules)]
            elif imported.top != "__future__":
                found.add(imported.top)
    return frozenset(found)


def source_line(module: str, line: int, repo: Path = REPO) -> str:
    return package_modules(repo)[module].read_text().splitlines()[line - 1]
