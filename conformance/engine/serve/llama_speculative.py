"""llama.cpp's `llama-speculative` example (examples/speculative) served over llama.cpp's ``/completion``, so that
`exactspec engine certify` certifies it as it certifies a server.

    python -m exactspec.conformance.engine.serve.llama_speculative --reference-url URL --model GGUF --draft GGUF

The example is a command-line program: one run loads the target and the draft, speculates on one prompt and prints
the text. This server runs it once per request (``-s SEED``, the request's sampler chain as flags, ``-n``) and reads
the token ids of what it emitted from its debug log (``-lv 5``: each accepted draft, "draft token i of sequence s (ID,
...) accepted", and each token sampled from the target's or the residual's law, "the sampled target token (ID, ...)
did not match"), its draft counters from its summary (``n_drafted``, ``n_accept``). The prompt is sent as text: its
ids are decoded by the reference llama-server (`--reference-url`, the same model served plain) and the text is
tokenized back as the example tokenizes it (special tokens added and parsed); a prompt whose ids do not come back is
refused (HTTP 400), so the example is never asked another prompt than the reference. The example runs past
``-n`` to the end of its round; the first ``n_predict`` tokens are returned. A request it cannot honour (a sampler
stage the example cannot be given, reports of its probabilities) is refused, never approximated.

`ensure_llama_speculative` builds the example from the same sdist and flags as `llama_server` (examples on), cached
under ``<cache>/llama.cpp/<version>/examples/``; `LlamaSpeculativeServer` starts this module on 127.0.0.1 and stops it
by PID.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ...paths import portable_path
from .llama_server import (
    SDIST_VERSION,
    LlamaBuildError,
    _fetch_source,
    _require_tools,
    _run_logged,
    build_dir,
    cmake_flags,
    default_gguf,
)
from .local_server import LocalServer, ServerStartError

MODULE = "exactspec.conformance.engine.serve.llama_speculative"
TARGET = "llama-speculative"
#: The example's defaults that a request pins otherwise, as its flags (the collector pins these stages off).
PINNED_FLAGS = {
    "repeat_penalty": "--repeat-penalty",
    "repeat_last_n": "--repeat-last-n",
    "presence_penalty": "--presence-penalty",
    "frequency_penalty": "--frequency-penalty",
    "dry_multiplier": "--dry-multiplier",
    "typical_p": "--typical",
    "xtc_probability": "--xtc-probability",
    "mirostat": "--mirostat",
    "dynatemp_range": "--dynatemp-range",
    "top_n_sigma": "--top-nsigma",
    "temperature": "--temp",
    "top_k": "--top-k",
    "top_p": "--top-p",
    "min_p": "--min-p",
    "adaptive_target": "--adaptive-target",
}
#: Request fields the example has no flag for, with the one value it takes anyway.
FIXED = {"min_keep": 0}
#: Request fields read and passed on, or checked to be what the example does anyway.
KNOWN_FIELDS = {
    *PINNED_FLAGS,
    *FIXED,
    "prompt",
    "seed",
    "n_predict",
    "max_tokens",
    "samplers",
    "return_tokens",
    "stream",
    "cache_prompt",
    "n_probs",
    "post_sampling_probs",
    "ignore_eos",
    "stop",
    "logit_bias",
}
#: An emitted token in the debug log: an accepted draft, or a token sampled from the target's or the residual's law.
#: A token's text may hold a newline, so a match may span lines.
EMITTED = re.compile(
    r"draft token \d+ of sequence \d+ \((\d+), '.{0,64}?'\) (accepted|rejected)"
    r"|the sampled target token \((\d+), '.{0,64}?'\) did not match",
    re.S,
)
COUNTER = re.compile(r"\bn_(drafted|accept)\s*=\s*(\d+)")


class RequestRefused(ValueError):
    """A request the example cannot honour as asked (answered with HTTP 400)."""


@dataclass(frozen=True)
class ExampleRun:
    """What one run of the example emitted: its token ids in order, its draft counters."""

    tokens: tuple[int, ...]
    drafted: int
    accepted: int


def parse_log(log: str) -> ExampleRun:
    """The emitted ids and the draft counters of one run's debug log (`-lv 5`), in the order it emitted them."""
    tokens = tuple(
        int(found.group(1) or found.group(3))
        for found in EMITTED.finditer(log)
        if found.group(2) != "rejected"
    )
    counters = {"drafted": 0, "accept": 0}
    for name, value in COUNTER.findall(log):
        counters[name] = int(value)
    return ExampleRun(tokens, counters["drafted"], counters["accept"])


def example_flags(body: dict) -> list[str]:
    """The example's sampler flags for a request (RequestRefused naming the field it cannot honour)."""
    unknown = sorted(set(body) - KNOWN_FIELDS)
    if unknown:
        raise RequestRefused(
            f"{unknown[0]}: the llama-speculative example cannot be given this field"
        )
    if body.get("n_probs"):
        raise RequestRefused(
            "n_probs: the llama-speculative example reports no probabilities (ask the reference)"
        )
    if body.get("logit_bias") or body.get("stop") or body.get("ignore_eos") or body.get("stream"):
        raise RequestRefused(
            "logit_bias, stop, ignore_eos, stream: the llama-speculative example takes none of them"
        )
    for field, value in FIXED.items():
        if body.get(field, value) != value:
            raise RequestRefused(f"{field}: the llama-speculative example takes only {value!r}")
    flags = []
    for field, flag in PINNED_FLAGS.items():
        if field in body:
            flags += [flag, str(body[field])]
    if "samplers" in body:
        flags += ["--samplers", ";".join(str(stage) for stage in body["samplers"])]
    return flags


class Example:
    """Runs of the example on one target and draft (`threads` each), a request at a time per run."""

    def __init__(
        self,
        binary: Path,
        model: Path,
        draft: Path,
        reference_url: str,
        threads: int = 1,
        draft_max: int = 4,
    ) -> None:
        self.binary, self.model, self.draft = binary, model, draft
        self.reference_url, self.threads, self.draft_max = (
            reference_url.rstrip("/"),
            threads,
            draft_max,
        )

    def prompt_text(self, ids: list[int]) -> str:
        """The text of `ids`, refused unless the example's tokenization of it gives `ids` back."""
        text = httpx.post(
            self.reference_url + "/detokenize", json={"tokens": ids}, timeout=30.0
        ).json()["content"]
        again = httpx.post(
            self.reference_url + "/tokenize",
            json={"content": text, "add_special": True, "parse_special": True},
            timeout=30.0,
        ).json()
        if [int(t) for t in again["tokens"]] != ids:
            raise RequestRefused(
                "prompt: its text does not tokenize back to its ids (the example takes text only)"
            )
        return text

    def complete(self, body: dict) -> dict:
        """The ``/completion`` answer to `body` (RequestRefused when it cannot be honoured)."""
        ids = body.get("prompt")
        if not (isinstance(ids, list) and ids and all(isinstance(t, int) for t in ids)):
            raise RequestRefused("prompt: a non-empty list of token ids")
        n_predict = int(body.get("n_predict", body.get("max_tokens", 16)))
        seed = int(body.get("seed", -1))
        command = [
            str(self.binary),
            "-m",
            str(self.model),
            "-md",
            str(self.draft),
            "-p",
            self.prompt_text(ids),
            "-n",
            str(n_predict),
            "-s",
            str(seed),
            "-t",
            str(self.threads),
            "--spec-draft-n-max",
            str(self.draft_max),
            "-lv",
            "5",
            *example_flags(body),
        ]
        started = time.perf_counter()
        done = subprocess.run(
            command, capture_output=True, text=True, errors="replace", timeout=600
        )
        if done.returncode != 0:
            raise RuntimeError(f"llama-speculative exited {done.returncode}: {done.stderr[-2000:]}")
        run = parse_log(done.stderr)
        tokens = list(run.tokens[:n_predict])
        elapsed_ms = 1000 * (time.perf_counter() - started)
        return {
            "content": "",
            "tokens": tokens,
            "stop": True,
            "stop_type": "limit" if len(tokens) >= n_predict else "eos",
            "tokens_predicted": len(tokens),
            "tokens_evaluated": len(ids),
            "generation_settings": {"seed": seed, "n_predict": n_predict},
            "timings": {
                "predicted_n": len(tokens),
                "predicted_ms": elapsed_ms,
                "draft_n": run.drafted,
                "draft_n_accepted": run.accepted,
            },
        }

    def props(self) -> dict:
        return {
            "build_info": f"llama.cpp examples/speculative ({SDIST_VERSION}, served by exactspec)",
            "model_path": portable_path(str(self.model)),
            "draft_path": portable_path(str(self.draft)),
            "total_slots": 1,
            "exactspec": {"server": MODULE, "draft_max": self.draft_max},
        }


def build_app(example: Example):
    """The starlette application: ``/health``, ``/props``, ``/tokenize`` (the reference's), ``/completion``."""
    # starlette (the [engine] extra): serving needs it
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def completion(request):
        try:
            return JSONResponse(await run_in_threadpool(example.complete, await request.json()))
        except (RequestRefused, ValueError, TypeError) as error:
            return JSONResponse(
                {"error": {"code": 400, "message": str(error), "type": "invalid_request_error"}},
                status_code=400,
            )

    async def tokenize(request):
        body = await request.json()
        answer = await run_in_threadpool(
            lambda: httpx.post(example.reference_url + "/tokenize", json=body, timeout=30.0).json()
        )
        return JSONResponse(answer)

    async def health(request):
        return JSONResponse({"status": "ok"})

    async def props(request):
        return JSONResponse(example.props())

    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/props", props, methods=["GET"]),
            Route("/tokenize", tokenize, methods=["POST"]),
            Route("/completion", completion, methods=["POST"]),
        ]
    )


def ensure_llama_speculative(jobs: int | None = None, niceness: int = 0) -> Path:
    """Path of a built `llama-speculative`, cached under ``<cache>/llama.cpp/<version>/examples/``: the sdist and the
    configure flags of `llama_server` with the examples on."""
    root = build_dir() / "examples"
    binary = root / "bin" / TARGET
    if binary.is_file():
        return binary
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.is_file():
            _build(root, jobs or os.cpu_count() or 1, niceness)
    return binary


def _build(root: Path, jobs: int, niceness: int) -> None:
    tools = _require_tools()
    log_path, start = root / "build.log", time.perf_counter()
    source = _fetch_source(build_dir(), SDIST_VERSION, log_path)
    tree = root / "build"
    flags = [flag for flag in cmake_flags() if not flag.startswith("-DLLAMA_BUILD_EXAMPLES")]
    _run_logged(
        ["cmake", "-S", str(source), "-B", str(tree), *flags, "-DLLAMA_BUILD_EXAMPLES=ON"],
        log_path,
        "cmake configure",
        niceness,
    )
    _run_logged(
        ["cmake", "--build", str(tree), "--target", TARGET, "-j", str(jobs)],
        log_path,
        f"cmake --build --target {TARGET}",
        niceness,
    )
    built = tree / "bin" / TARGET
    if not built.is_file():
        raise LlamaBuildError(f"the build finished but {built} is missing; see {log_path}")
    (root / "bin").mkdir(exist_ok=True)
    shutil.copy2(built, root / "bin" / f".{TARGET}.tmp")
    (root / "build-info.json").write_text(
        json.dumps(
            {
                "target": TARGET,
                "cmake_flags": flags,
                "tools": tools,
                "build_seconds": round(time.perf_counter() - start, 1),
            }
        )
        + "\n"
    )
    (root / "bin" / f".{TARGET}.tmp").rename(root / "bin" / TARGET)
    shutil.rmtree(tree, ignore_errors=True)


class LlamaSpeculativeServer(LocalServer):
    """This module's server on 127.0.0.1 (a context manager; `LocalServer`). `reference`: the plain llama-server of
    the same model, or its URL (read when this server starts, so the reference may start first)."""

    name, health_path = "llama-speculative (served by exactspec)", "/health"
    error = ServerStartError

    def __init__(
        self,
        reference: Any,
        draft: str | os.PathLike | None = None,
        *,
        model: str | None = None,
        threads: int = 1,
        draft_max: int = 4,
        log_path: str | os.PathLike | None = None,
        port: int = 0,
    ) -> None:
        self.reference = reference
        self.model = Path(model) if model else default_gguf()
        self.draft = Path(draft) if draft else self.model
        self.threads, self.draft_max = threads, draft_max
        self.speculation_flags = [
            TARGET,
            "-md",
            str(self.draft),
            "--spec-draft-n-max",
            str(draft_max),
        ]
        log = (
            Path(log_path)
            if log_path
            else Path(tempfile.mkdtemp(prefix=f"{TARGET}-")) / "candidate.log"
        )
        super().__init__(log, 120.0, 10.0, port=port)

    def command(self) -> list[str]:
        url = self.reference if isinstance(self.reference, str) else self.reference.base_url
        return [
            sys.executable,
            "-m",
            MODULE,
            "--binary",
            str(ensure_llama_speculative()),
            "--model",
            str(self.model),
            "--draft",
            str(self.draft),
            "--reference-url",
            url,
            "--threads",
            str(self.threads),
            "--draft-max",
            str(self.draft_max),
            "--port",
            str(self.port),
        ]


def main(argv: list[str] | None = None) -> None:
    """Serve on 127.0.0.1 until SIGTERM or SIGINT."""
    # uvicorn (the [engine] extra): serving needs it
    import uvicorn

    parser = argparse.ArgumentParser(
        prog=f"python -m {MODULE}", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--binary", type=Path, help="the built llama-speculative (default: build it once)"
    )
    parser.add_argument(
        "--model", type=Path, help="the target GGUF (default: the embedded SmolLM2)"
    )
    parser.add_argument("--draft", type=Path, help="the draft GGUF (default: the target itself)")
    parser.add_argument(
        "--reference-url", required=True, help="the same model served plain by llama-server"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--draft-max", type=int, default=4)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    model = args.model or default_gguf()
    example = Example(
        args.binary or ensure_llama_speculative(),
        model,
        args.draft or model,
        args.reference_url,
        args.threads,
        args.draft_max,
    )
    uvicorn.run(
        build_app(example), host="127.0.0.1", port=args.port, log_level="warning", access_log=False
    )


if __name__ == "__main__":
    main()


__all__ = [
    "Example",
    "ExampleRun",
    "LlamaSpeculativeServer",
    "RequestRefused",
    "ensure_llama_speculative",
    "example_flags",
    "parse_log",
]
