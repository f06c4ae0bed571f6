"""The engines `exactspec engine serve` starts: one table, one entry per engine, as `collect.dialects` is for the
dialects.

A `ServedEngine` says which modes it serves, how to build its reference (plain) and candidate (speculative) servers
(not started yet), which `engine certify` flags reach them (its dialect and that dialect's options), whether the
candidate is expected to be seed-coupled, and whether --draft-sampling applies. Adding an engine is its server
module and one entry in `SERVED_ENGINES`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .llama_cpp_python import ensure_llama_cpp_python
from .llama_cpp_python_server import LlamaCppPythonServer, certify_arguments
from .llama_server import LlamaServer, ensure_llama_server
from .llama_speculative import LlamaSpeculativeServer
from .self_draft import self_draft
from .vllm_server import VllmServer, ensure_vllm

MODES = ("plain", "ngram", "draft", "selfdraft")
#: n-gram drafter sizes small enough to fire on short completions (llama.cpp's defaults look up 12-grams).
NGRAM_ARGS = ("--spec-ngram-simple-size-n", "2", "--spec-ngram-simple-size-m", "8")


@dataclass(frozen=True)
class ServeRequest:
    """What `engine serve` was asked: the mode, llama.cpp's draft verification, slots, threads, ports, logs."""

    mode: str
    draft_sampling: str = "greedy"
    slots: int = 4
    threads: int | None = None  # None: half the machine's threads (two servers share it)
    ports: tuple[int, int] = (0, 0)
    logs: str | None = None

    def log(self, role: str) -> Path | None:
        return Path(self.logs) / f"{role}.log" if self.logs else None

    def thread_count(self) -> int:
        # no spinning threads on each other's cores
        return self.threads or max(1, (os.cpu_count() or 1) // 2)


@dataclass(frozen=True)
class ServedEngine:
    """One engine `engine serve` starts (see the module's docstring)."""

    name: str
    modes: tuple[str, ...]
    # (reference, candidate or None for plain)
    servers: Callable[[ServeRequest], tuple[Any, Any | None]]
    # (reference, candidate) -> engine certify's dialect flags
    dialect_arguments: Callable[[Any, Any], list[str]]
    seed_coupled: Callable[[str, str], bool]  # (mode, draft_sampling) -> expected seed-coupled
    # --draft-sampling is recorded (and applies) in the draft modes
    records_draft_sampling: bool = False


def _llama_cpp(request: ServeRequest) -> tuple[Any, Any | None]:
    binary, threads = ensure_llama_server(), request.thread_count()
    reference = LlamaServer(
        binary,
        mode="plain",
        threads=threads,
        slots=request.slots,
        port=request.ports[0],
        log_path=request.log("reference"),
    )
    if request.mode == "plain":
        return reference, None
    draft_model = self_draft()["gguf"] if request.mode == "selfdraft" else None
    ngram = request.mode == "ngram"
    return reference, LlamaServer(
        binary,
        mode="ngram" if ngram else "draft",
        draft_sampling=request.draft_sampling,
        extra_args=NGRAM_ARGS if ngram else (),
        draft_model=draft_model,
        threads=threads,
        slots=request.slots,
        port=request.ports[1],
        log_path=request.log("candidate"),
    )


def _llama_speculative(request: ServeRequest) -> tuple[Any, Any | None]:
    """llama.cpp's examples/speculative, one run a request (`llama_speculative`), against the plain llama-server."""
    reference = LlamaServer(
        ensure_llama_server(),
        mode="plain",
        threads=request.thread_count(),
        slots=request.slots,
        port=request.ports[0],
        log_path=request.log("reference"),
    )
    if request.mode == "plain":
        return reference, None
    draft = self_draft()["gguf"] if request.mode == "selfdraft" else None
    return reference, LlamaSpeculativeServer(
        reference,
        draft,
        threads=request.thread_count(),
        port=request.ports[1],
        log_path=request.log("candidate"),
    )


def _vllm(request: ServeRequest) -> tuple[Any, Any | None]:
    python, threads = ensure_vllm(), request.thread_count()
    reference = VllmServer(
        python,
        mode="plain",
        threads=threads,
        port=request.ports[0],
        log_path=request.log("reference"),
    )
    if request.mode == "plain":
        return reference, None
    draft = self_draft()["hf_dir"] if request.mode == "selfdraft" else None
    return reference, VllmServer(
        python,
        mode="ngram" if request.mode == "ngram" else "draft",
        draft_dir=draft,
        threads=threads,
        port=request.ports[1],
        log_path=request.log("candidate"),
    )


def _llama_cpp_python(request: ServeRequest) -> tuple[Any, Any | None]:
    """One thread each (it serves one request at a time); only n-gram (prompt-lookup) speculation."""
    python = ensure_llama_cpp_python()
    reference = LlamaCppPythonServer(
        python, port=request.ports[0], log_path=request.log("reference")
    )
    if request.mode == "plain":
        return reference, None
    return reference, LlamaCppPythonServer(
        python, mode="prompt-lookup", port=request.ports[1], log_path=request.log("candidate")
    )


SERVED_ENGINES: dict[str, ServedEngine] = {
    "llama.cpp": ServedEngine(
        "llama.cpp",
        MODES,
        _llama_cpp,
        lambda ref, cand: ["--dialect", "llama.cpp"],
        lambda mode, sampling: mode == "ngram" or sampling == "greedy",
        records_draft_sampling=True,
    ),
    "vllm": ServedEngine(
        "vllm", MODES, _vllm, lambda ref, cand: ["--dialect", "vllm"], lambda mode, sampling: False
    ),
    "llama-speculative": ServedEngine(
        "llama-speculative",
        ("plain", "draft", "selfdraft"),
        _llama_speculative,
        lambda ref, cand: ["--dialect", "llama.cpp"],
        lambda mode, sampling: False,
    ),
    "llama-cpp-python": ServedEngine(
        "llama-cpp-python",
        ("plain", "ngram"),
        _llama_cpp_python,
        certify_arguments,
        lambda mode, sampling: mode == "ngram" or sampling == "greedy",
    ),
}
ENGINES = tuple(SERVED_ENGINES)


def served_engine(name: str, mode: str) -> ServedEngine:
    """The table's entry for `name`, refusing a mode it does not serve (ValueError naming the flag)."""
    if name not in SERVED_ENGINES:
        raise ValueError(f"--engine: {name!r} must be one of {', '.join(ENGINES)}")
    engine = SERVED_ENGINES[name]
    if mode not in engine.modes:
        raise ValueError(f"--mode: {engine.name} serves {', '.join(engine.modes)}, not {mode!r}")
    return engine


__all__ = [
    "ENGINES",
    "MODES",
    "NGRAM_ARGS",
    "SERVED_ENGINES",
    "ServeRequest",
    "ServedEngine",
    "served_engine",
]
