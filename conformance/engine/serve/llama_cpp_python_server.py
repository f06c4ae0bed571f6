"""llama-cpp-python's OpenAI server (``python -m llama_cpp.server``) on 127.0.0.1, run by PID from its cached venv
(`llama_cpp_python.ensure_llama_cpp_python`), plain or with its prompt-lookup speculation
(``--draft_model prompt-lookup-decoding``).

It takes text prompts only and answers with token strings, so it is certified through the generic OpenAI dialect
with ``--text-prompts`` and ``--tokenizer`` (the same GGUF); its logprobs are the raw log-softmax of the logits, which
give the law sampled from under top-k alone (`collect.generic_openai.sampled_from_raw`); its repeat penalty (1.1 by
default) is turned off in every request (`REQUEST_EXTRA`). It serves one request at a time.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from ....gpu_impl.model_config import default_gguf_path
from .llama_cpp_python import VERSION
from .local_server import LocalServer, ServerStartError

MODES = ("plain", "prompt-lookup")
#: What every request adds to the OpenAI fields: the server's repeat penalty (default 1.1) off, as at the reference.
REQUEST_EXTRA = {"repeat_penalty": 1.0}


class LlamaCppPythonServerError(ServerStartError):
    """llama-cpp-python's server did not start or did not become ready in time."""


def default_gguf() -> Path:
    """The embedded default model's GGUF (`gpu_impl`'s lookup, torch-free)."""
    return Path(default_gguf_path())


class LlamaCppPythonServer(LocalServer):
    """The server (a context manager); `flags` and `speculation_flags` are what the sample files' headers record."""

    name, health_path = "llama-cpp-python", "/v1/models"
    error = LlamaCppPythonServerError

    def __init__(
        self,
        python: str | os.PathLike,
        model: str | os.PathLike | None = None,
        *,
        mode: str = "plain",
        num_pred_tokens: int = 10,
        threads: int = 1,
        n_ctx: int = 512,
        log_path: str | os.PathLike | None = None,
        startup_timeout_s: float = 120.0,
        stop_timeout_s: float = 20.0,
        port: int = 0,
    ) -> None:
        self.python = Path(python)
        if not self.python.is_file():
            raise ValueError(
                f"python must be the llama-cpp-python venv's python, got {str(python)!r}"
            )
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.model = Path(model) if model is not None else default_gguf()
        if not self.model.is_file():
            raise ValueError(f"model must be a GGUF file, got {str(self.model)!r}")
        self.mode = mode
        self.speculation_flags = (
            [
                "--draft_model",
                "prompt-lookup-decoding",
                "--draft_model_num_pred_tokens",
                str(num_pred_tokens),
            ]
            if mode == "prompt-lookup"
            else []
        )
        self.flags = [
            "--model",
            str(self.model),
            "--model_alias",
            self.model.name,
            "--n_threads",
            str(threads),
            "--n_threads_batch",
            str(threads),
            "--n_ctx",
            str(n_ctx),
            "--seed",
            "0",
            *self.speculation_flags,
        ]
        log = (
            Path(log_path)
            if log_path
            else Path(tempfile.mkdtemp(prefix="llama-cpp-python-")) / f"{mode}.log"
        )
        super().__init__(
            log, startup_timeout_s, stop_timeout_s, env={"OMP_NUM_THREADS": str(threads)}, port=port
        )

    def command(self) -> list[str]:
        return [
            str(self.python),
            "-m",
            "llama_cpp.server",
            *self.flags,
            "--host",
            self.host,
            "--port",
            str(self.port),
        ]


def certify_arguments(
    reference: LlamaCppPythonServer, candidate: LlamaCppPythonServer
) -> list[str]:
    """The generic dialect's options that certify these two servers (text prompts, the GGUF's tokens, raw reports,
    declared speculation, the repeat penalty off)."""
    return [
        "--dialect",
        "openai",
        "--text-prompts",
        "--force-token-by-token",
        "--tokenizer",
        str(reference.model),
        "--reports",
        "raw",
        "--declare-speculation",
        "--request-extra",
        json.dumps(REQUEST_EXTRA),
        "--engine-name",
        "llama-cpp-python-server",
        "--engine-version",
        VERSION,
    ]


__all__ = [
    "LlamaCppPythonServer",
    "LlamaCppPythonServerError",
    "MODES",
    "REQUEST_EXTRA",
    "certify_arguments",
    "default_gguf",
]
