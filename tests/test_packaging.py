"""Packaging: one import root, the pytest plugin reachable from any directory (also beside
pytest-profiling, which owns `--profile`), and a wheel that holds the `exactspec` package only."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("reference", "stat_tests", "conformance", "proofs", "gpu_impl")
EXAMPLE_RULE = REPO / "examples" / "my_rule.py"


def bare_modules(names) -> list[str]:
    """Top-level modules named like the design card's folders: they must never be imported bare."""
    return sorted(name for name in names if name.split(".")[0] in FOLDERS)


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_every_subpackage_imports_under_exactspec_only(tmp_path):
    code = (
        "import sys, exactspec.reference, exactspec.stat_tests, exactspec.conformance, exactspec.proofs, "
        "exactspec.conformance.plugin, exactspec.conformance.rule.level, exactspec.gpu_impl; "
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in %r)))" % (FOLDERS,)
    )
    done = _python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"bare modules imported: {done.stdout}"


def test_bare_module_detector_can_fail():
    assert bare_modules(["conformance.cases", "exactspec.reference", "numpy"]) == [
        "conformance.cases"
    ]


def test_strategies_import_in_a_fresh_interpreter(tmp_path):
    done = _python(
        "from exactspec.conformance.rule.strategies import round_cases; print(callable(round_cases))",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def _suite(tmp_path: Path, impl: str, *extra: str) -> subprocess.CompletedProcess:
    shutil.copy(EXAMPLE_RULE, tmp_path / "my_rule.py")
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        "exactspec.conformance",
        "--exactspec-impl",
        impl,
        "--exactspec-profile",
        "quick",
        "-q",
        "-p",
        "no:cacheprovider",
        "-k",
        "demo_mixed_draft",
        *extra,
    ]
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_plugin_runs_the_suite_from_any_directory_on_an_adapter_in_the_cwd(tmp_path):
    done = _suite(tmp_path, "my_rule:Verifier")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "my_rule:Verifier [profile quick] -> CERTIFIED" in done.stdout


def test_plugin_run_fails_on_a_buggy_rule(tmp_path):
    done = _suite(tmp_path, "exactspec.conformance.rule.mutants.zoo:SharedCoin")
    assert done.returncode == 1, done.stdout[-3000:]
    assert "NOT_EXACT" in done.stdout or "EXACT_NOT_STANDARD" in done.stdout


def test_options_do_not_collide_with_pytest_profiling(tmp_path):
    pytest.importorskip(
        "pytest_profiling", reason="pytest-profiling is installed by the `test` extra"
    )
    help_text = subprocess.run(
        [sys.executable, "-m", "pytest", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    # both plugins are loaded
    assert "--profile " in help_text and "--exactspec-profile" in help_text
    done = _suite(tmp_path, "my_rule:Verifier")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


@pytest.mark.slow
def test_wheel_holds_the_exactspec_package_only(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = tmp_path.glob("exactspec-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    roots = {name.split("/")[0] for name in names}
    assert {root for root in roots if not root.endswith(".dist-info")} == {"exactspec"}
    for module in (
        "reference/rules.py",
        "conformance/plugin.py",
        "proofs/ARGUMENT.md",
        "gpu_impl/sampling/sampler.py",
        "conformance/CONTRACT.md",
    ):
        assert f"exactspec/{module}" in names, module
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[pytest11]" in text and "exactspec.conformance.plugin" in text


def test_every_folder_with_an_init_is_a_listed_package():
    """A non-editable install ships only the packages pyproject.toml lists: a new folder left out installs broken
    (as `conformance/engine/diagnosis` once did: every `exactspec` command failed on its import)."""
    import tomllib

    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        "exactspec." + ".".join(init.parent.relative_to(REPO).parts)
        for folder in FOLDERS
        for init in (REPO / folder).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert not found - listed, (
        f"folders with an __init__.py missing from [tool.setuptools] packages: {found - listed}"
    )
