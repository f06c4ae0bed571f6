"""The traceability check: the table in `ARGUMENT.md` names code and checks that exist, and every claim has a row.

Code locations (`reference/laws.py:residual`, `gpu_impl/sampling/torch_verifier.py:TorchVerifier.verify`) are looked up by
parsing the source file (`ast`), never by importing it, so the check needs no torch and runs the same with
or without it. It runs in one of two modes, and says which in its output:

* **checkout**: the package folders sit in a source checkout (the folder above `proofs/` has a
  `pyproject.toml` naming exactspec and a `tests/` folder): every listed file is checked, `tests/` included;
* **installed**: an installed package (a wheel) has no `tests/`: the code locations and the `conformance/`
  test files it ships are checked, the `tests/` files are counted as not checked.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from .registry import CheckResult, all_checks, check, expect, run_guarded

# The folder holding reference/, gpu_impl/, conformance/, proofs/: the checkout root, or site-packages/exactspec.
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
ARGUMENT = Path(__file__).resolve().parent / "ARGUMENT.md"

_LOCATION = re.compile(r"`((?:reference|gpu_impl|conformance|stat_tests)/[\w/]+\.py):([\w.]+)`")
_CHECK_NAME = re.compile(r"`check:(\w+)`")
_TEST_FILE = re.compile(r"`((?:conformance(?:/\w+)?|tests)/test_\w+\.py)`( \(planned\))?")
_PROJECT_NAME = re.compile(r"""(?ms)^\[project\]\s*$(?:(?!^\[).)*?^name\s*=\s*["']exactspec["']""")


def is_checkout(base: Path) -> bool:
    """Whether `base` is an exactspec source checkout: a pyproject.toml naming the project exactspec, and tests/."""
    pyproject = Path(base) / "pyproject.toml"
    if not (pyproject.is_file() and (Path(base) / "tests").is_dir()):
        return False
    return bool(_PROJECT_NAME.search(pyproject.read_text(encoding="utf-8", errors="replace")))


def traceability_rows(text: str | None = None) -> list[tuple[str, str]]:
    """(claim, table row) for the rows of the traceability table in ARGUMENT.md."""
    text = ARGUMENT.read_text(encoding="utf-8") if text is None else text
    section = text.split("## Traceability", 1)[1] if "## Traceability" in text else ""
    return [
        (line.split("|")[1].strip(), line)
        for line in section.splitlines()
        if re.match(r"\|\s*C\d+", line)
    ]


def defines(source: Path, dotted: str) -> bool:
    """Whether the module file `source` defines `dotted` (a function or class, or Class.method) at its top level."""
    scope: list[ast.stmt] = ast.parse(source.read_text(encoding="utf-8"), filename=str(source)).body
    node: ast.stmt | None = None
    for part in dotted.split("."):
        if node is not None:
            if not isinstance(node, ast.ClassDef):
                return False
            scope = node.body
        node = next(
            (
                n
                for n in scope
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and n.name == part
            ),
            None,
        )
        if node is None:
            return False
    return True


def _check_locations(rows: list[tuple[str, str]], base: Path) -> int:
    """Every `file.py:name` of the table exists in `base`; returns how many were resolved."""
    located = 0
    for claim, line in rows:
        for path, dotted in _LOCATION.findall(line):
            expect((base / path).is_file(), f"{claim}: {path} does not exist")
            expect(
                defines(base / path, dotted),
                f"{claim}: {path}:{dotted} is not a function or class in that module",
            )
            located += 1
    return located


def _check_names(rows: list[tuple[str, str]]) -> None:
    """Every row names checks, each registered for that row's claim."""
    checks = all_checks()
    for claim, line in rows:
        names = _CHECK_NAME.findall(line)
        expect(names, f"{claim}: row names no check")
        for name in names:
            expect(
                name in checks,
                f"{claim}: check {name} is not registered in proofs/ (python -m exactspec.proofs --list)",
            )
            expect(
                claim in checks[name].claims, f"{claim}: check {name} is not registered for {claim}"
            )


def _check_test_files(
    rows: list[tuple[str, str]], base: Path, checkout: bool
) -> dict[str, set[str]]:
    """Listed test files exist (tests/ ones only in a checkout); returns them as present/planned/appeared/unchecked."""
    found: dict[str, set[str]] = {
        "present": set(),
        "planned": set(),
        "appeared": set(),
        "unchecked": set(),
    }
    for claim, line in rows:
        for path, is_planned in _TEST_FILE.findall(line):
            if path.startswith("tests/") and not checkout:
                found["unchecked"].add(path)
                continue
            exists = (base / path).is_file()
            if is_planned:
                found["appeared" if exists else "planned"].add(path)
            else:
                expect(exists, f"{claim}: {path} is listed as present but does not exist")
                found["present"].add(path)
    return found


@check(*(f"C{i}" for i in range(1, 19)))
def traceability(text: str | None = None, base: Path | None = None) -> CheckResult:
    """Every code location in ARGUMENT.md's traceability table exists, every named check exists, every claim has a row."""
    base = PACKAGE_ROOT if base is None else Path(base)

    def body():
        checkout = is_checkout(base)
        rows = traceability_rows(text)
        expect(rows, "no traceability table found in ARGUMENT.md")
        claims_with_rows = {claim for claim, _ in rows}
        all_claims = {c for chk in all_checks().values() for c in chk.claims}
        expect(
            all_claims <= claims_with_rows,
            f"claims without a traceability row: {sorted(all_claims - claims_with_rows)}",
        )
        located = _check_locations(rows, base)
        _check_names(rows)
        files = _check_test_files(rows, base, checkout)
        mode = (
            f"checkout mode ({base})"
            if checkout
            else f"installed-package mode ({base}; no checkout: {len(files['unchecked'])} listed tests/ files not checked)"
        )
        extra = (
            f"; now present, still marked planned: {sorted(files['appeared'])}"
            if files["appeared"]
            else ""
        )
        return located, (
            f"{mode}: {len(rows)} claims, {located} code locations resolved; {len(files['present'])} listed "
            f"test files present, {len(files['planned'])} planned conformance test files not yet written{extra}"
        )

    return run_guarded("traceability", body)
