"""Provenance of a conformance run: what was certified (module, file, source hash, distribution), by which
exactspec (version, git commit), where (machine, Python, libraries) and how (command line, UTC time). Files
are named portably (`paths.portable_path`: relative to the project, the venv or the cache), never by this
machine's absolute path.

    from exactspec.conformance.provenance import collect
    report["provenance"] = collect("mypkg.spec:Verifier")

Never imports torch or transformers: their versions are recorded only when the run already imported them.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, packages_distributions, version
from pathlib import Path
from typing import Any

from .. import __version__
from .loader import import_module_from_cwd
from .paths import portable_args, portable_path

GIT_TIMEOUT_SECONDS = 2.0
#: Libraries whose version is recorded; torch and transformers only if already imported.
ALWAYS_LIBRARIES = ("numpy", "scipy")
IF_IMPORTED_LIBRARIES = ("torch", "transformers")


def exactspec_version() -> str | None:
    """The installed distribution's version, else the package's __version__."""
    try:
        return version("exactspec")
    except PackageNotFoundError:
        return __version__


def _git(args: list[str], path: str | Path | None) -> subprocess.CompletedProcess | None:
    """Run git in the checkout holding `path` (default: the exactspec package); None if git is missing or slow."""
    if path is None:
        path = Path(__file__).resolve().parent
    try:
        return subprocess.run(
            ["git", *args],
            cwd=str(path),
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None


def git_commit(path: str | Path | None = None) -> str | None:
    """HEAD of the git checkout holding `path` (default: the exactspec package), or None when it is not in
    a checkout, git is missing or slow."""
    done = _git(["rev-parse", "HEAD"], path)
    commit = done.stdout.strip() if done is not None else ""
    return commit if done is not None and done.returncode == 0 and len(commit) >= 40 else None


def git_uncommitted_changes(path: str | Path | None = None) -> bool | None:
    """Whether tracked files of that checkout differ from HEAD (the commit then does not identify the code);
    None when unknown."""
    done = _git(["status", "--porcelain", "--untracked-files=no"], path)
    return bool(done.stdout.strip()) if done is not None and done.returncode == 0 else None


def sha256_of_file(path: str | Path) -> str | None:
    """Hex sha256 of a file's bytes, None if it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def distribution_of(module_name: str) -> dict | None:
    """{"name", "version"} of the installed distribution providing the module's top-level package, or None."""
    top = module_name.split(".")[0]
    names = packages_distributions().get(top) or []
    if not names:
        return None
    try:
        return {"name": names[0], "version": version(names[0])}
    except PackageNotFoundError:
        return {"name": names[0], "version": None}


def implementation_info(impl_spec: str) -> dict:
    """Module, file, source sha256 and distribution of `impl_spec` ("MODULE:NAME"; builtin names have no module)."""
    module_name = impl_spec.partition(":")[0] if ":" in impl_spec else None
    info: dict[str, Any] = {
        "spec": impl_spec,
        "module": module_name,
        "file": None,
        "source_sha256": None,
        "distribution": None,
    }
    if module_name is None:
        return info
    module = sys.modules.get(module_name)
    if module is None:
        try:
            module = import_module_from_cwd(module_name, impl_spec)
        except Exception:  # noqa: BLE001 -- provenance is best effort, never a crash
            return info
    path = getattr(module, "__file__", None)
    if path:
        info["file"] = portable_path(path, hash_files=False)  # the hash is source_sha256
        info["source_sha256"] = sha256_of_file(path)
    try:
        info["distribution"] = distribution_of(module_name)
    except Exception:  # noqa: BLE001
        info["distribution"] = None
    return info


def library_versions() -> dict:
    """Versions of numpy and scipy, plus torch/transformers when they are already imported (None: absent)."""
    versions: dict[str, str | None] = {}
    for name in ALWAYS_LIBRARIES:
        try:
            versions[name] = getattr(importlib.import_module(name), "__version__", None)
        except ImportError:
            versions[name] = None
    for name in IF_IMPORTED_LIBRARIES:
        if name in sys.modules:
            versions[name] = getattr(sys.modules[name], "__version__", None)
    return versions


def machine_info() -> dict:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
    }


def collect(impl_spec: str, argv: list[str] | None = None) -> dict:
    """Everything needed to reproduce and attribute a run of `impl_spec`, as a JSON-serializable dict."""
    if not isinstance(impl_spec, str):
        raise ValueError(
            f"impl_spec must be a str such as 'mypkg.spec:Verifier', got {type(impl_spec).__name__}"
        )
    return {
        "exactspec": {
            "version": exactspec_version(),
            "git_commit": git_commit(),
            "uncommitted_changes": git_uncommitted_changes(),
        },
        "implementation": implementation_info(impl_spec),
        "machine": machine_info(),
        "libraries": library_versions(),
        "command_line": portable_args(sys.argv if argv is None else argv),
        "timestamp_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


__all__ = [
    "collect",
    "distribution_of",
    "exactspec_version",
    "git_commit",
    "git_uncommitted_changes",
    "implementation_info",
    "library_versions",
    "machine_info",
    "sha256_of_file",
]
