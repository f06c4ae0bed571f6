"""Certificates of llama.cpp's, vLLM's and llama-cpp-python's speculative decoding: a loop over the commands a user
runs.

    .venv/bin/python benchmarks/engine_certificates.py --config selfdraft-probabilistic-t0.7 [--seed-key KEY]
    .venv/bin/python benchmarks/engine_certificates.py --config all

For a named configuration: `exactspec engine serve --engine E --mode M` starts the reference (plain) and the
candidate (speculative) servers on 127.0.0.1 and prints the `exactspec engine certify` command for them; that
command runs, with the chat prompts of examples/engine_chat_prompts.jsonl, the configuration's sampler chain and
the standard profile, in rounds until its verdict or the time limit; then the servers are stopped by PID. The
campaign's directory becomes docs/certificates/engine/<config>/: certificate.json (with `certificate_run`, the sample
files' sha256 included), CERTIFICATE.md, run.json, the two sample files (gzipped when over 2 MB) and command.txt (the
command that reruns it with its seed key, then the commands as run, with portable paths). The seed key is fresh
(`--seed-key` reuses one: the same seeds). The index docs/certificates/engine/README.md is regenerated from every
certificate present after each configuration (`exactspec.conformance.docs`).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
from exactspec.conformance.docs.catalogue import content_sha256  # noqa: E402
from exactspec.conformance.docs.pages import rendered  # noqa: E402
from exactspec.conformance.engine.collect.design import new_key  # noqa: E402
from exactspec.conformance.paths import portable_args, portable_path  # noqa: E402

OUT_ROOT = Path("docs/certificates/engine")
PROMPTS = REPO / "examples/engine_chat_prompts.jsonl"
PROFILE = "standard"
MAX_SAMPLE_BYTES = 2_000_000
# the venv's command, as a user runs it
EXACTSPEC = [str(Path(sys.executable).parent / "exactspec")]


@dataclass(frozen=True)
class Config:
    """One certified configuration: the engine, the candidate's speculation and the sampled law."""

    engine: str  # "llama.cpp", "vllm", "llama-speculative" (served by `engine serve`) or "llama-cpp-python"
    mode: str  # `engine serve --mode`: ngram, draft (the target as its own draft) or selfdraft; prompt-lookup
    temperature: float
    draft_sampling: str = "greedy"
    top_k: int = 0
    top_p: float = 1.0
    max_tokens: int = 16  # every position 1..max_tokens is read
    time_limit_s: float = 3600.0
    prompts: str = ""  # a prompt set by name (`engine certify --prompts`), else the chat prompts
    pooled: bool = False  # the prompts certified together


def _configs() -> dict[str, Config]:
    out = {}
    for mode, prefix, tokens in (
        ("ngram", "ngram", 16),
        ("draft", "draft-greedy", 8),
        ("selfdraft", "selfdraft-greedy", 16),
    ):
        out[f"{prefix}-t0"] = Config("llama.cpp", mode, 0.0, max_tokens=tokens)
        out[f"{prefix}-t0.7"] = Config(
            "llama.cpp",
            mode,
            0.7,
            max_tokens=tokens,
            time_limit_s=1200.0 if mode == "selfdraft" else 600.0,
        )
        if mode != "selfdraft":
            out[f"{prefix}-t0.7-k40-p0.95"] = Config(
                "llama.cpp", mode, 0.7, top_k=40, top_p=0.95, max_tokens=tokens
            )
    out["ngram-t0.7-humaneval"] = Config(
        "llama.cpp", "ngram", 0.7, time_limit_s=1200.0, prompts="humaneval", pooled=True
    )
    out["draft-probabilistic-t0.7"] = Config(
        "llama.cpp", "draft", 0.7, "probabilistic", max_tokens=8
    )
    out["selfdraft-probabilistic-t0.7"] = Config(
        "llama.cpp", "selfdraft", 0.7, "probabilistic", time_limit_s=900.0
    )
    for mode, prefix in (("ngram", "vllm-ngram"), ("selfdraft", "vllm-selfdraft")):
        tokens = 16 if mode == "ngram" else 8
        out[f"{prefix}-t0"] = Config("vllm", mode, 0.0, max_tokens=tokens, time_limit_s=1200.0)
        out[f"{prefix}-t0.7"] = Config("vllm", mode, 0.7, max_tokens=tokens, time_limit_s=1200.0)
        out[f"{prefix}-t0.7-k40-p0.95"] = Config(
            "vllm", mode, 0.7, top_k=40, top_p=0.95, max_tokens=tokens, time_limit_s=1200.0
        )
    # llama.cpp's examples/speculative program (`engine serve --engine llama-speculative`), the target as its own draft
    out["speculative-example-t0.7"] = Config(
        "llama-speculative", "draft", 0.7, max_tokens=16, time_limit_s=900.0
    )
    out["lcp-lookup-t0"] = Config("llama-cpp-python", "prompt-lookup", 0.0)
    out["lcp-lookup-t0.7"] = Config("llama-cpp-python", "prompt-lookup", 0.7, time_limit_s=900.0)
    # its OpenAI server (`engine serve --engine llama-cpp-python`): raw logprobs give the sampled law under top-k only
    out["lcp-server-t0"] = Config("llama-cpp-python", "ngram", 0.0)
    out["lcp-server-t0.7-k40"] = Config(
        "llama-cpp-python", "ngram", 0.7, top_k=40, max_tokens=8, time_limit_s=5400.0
    )
    return out


CONFIGS = _configs()
#: Engines certified in process (`exactspec engine certify --engine-adapter`), run with their own venv's exactspec.
IN_PROCESS = {
    "llama-cpp-python": (
        "exactspec.conformance.engine.serve.llama_cpp_adapter:LlamaCppPython",
        ["--speculation-type", "prompt-lookup", "--expect-seed-coupled"],
    )
}


def _is_in_process(config: Config) -> bool:
    """Certified in process (its adapter), not through `engine serve` (llama-cpp-python's server is the ngram mode)."""
    return config.engine in IN_PROCESS and config.mode == "prompt-lookup"


def _in_process(config: Config) -> list[str]:
    """The certify command of an in-process engine: its venv's exactspec (built once) with the adapter."""
    from exactspec.conformance.engine.serve.llama_cpp_python import ensure_llama_cpp_python

    spec, flags = IN_PROCESS[config.engine]
    return [
        str(ensure_llama_cpp_python().parent / "exactspec"),
        "engine",
        "certify",
        "--engine-adapter",
        spec,
        *flags,
    ]


def _serve(config: Config, logs: Path) -> tuple[subprocess.Popen, list[str], float]:
    """Start `exactspec engine serve` for `config`; -> the process, the certify command it printed, its start time."""
    command = [
        *EXACTSPEC,
        "engine",
        "serve",
        "--engine",
        config.engine,
        "--mode",
        config.mode,
        "--draft-sampling",
        config.draft_sampling,
        "--logs",
        str(logs),
    ]
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("certify: "):
            # minus the placeholders "--prompts PROMPTS.jsonl --out DIR --temperature T"
            return (
                process,
                shlex.split(line[len("certify: ") :])[:-6],
                time.monotonic() - started,
            )
    raise RuntimeError(
        f"exactspec engine serve exited ({process.wait()}) before printing its certify command; see "
        f"{logs}"
    )


def _stop(process: subprocess.Popen) -> None:
    """Stop `engine serve` by its PID (it stops both servers by theirs)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def _shrink(path: Path) -> str:
    """Keep a sample file as is when small, else gzip it; -> the file name kept."""
    if path.stat().st_size <= MAX_SAMPLE_BYTES:
        return path.name
    with open(path, "rb") as src, gzip.open(f"{path}.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()
    return f"{path.name}.gz"


def _certify_args(config: Config, certify: list[str], out: Path, seed_key: str) -> list[str]:
    """The printed certify command (run with this venv's exactspec, or the in-process engine's), the prompts, the law,
    the profile and the seed key."""
    command = certify if _is_in_process(config) else [*EXACTSPEC, *certify[1:]]
    # raw top-k: all k reported
    reports = ["--teacher-n-probs", str(config.top_k)] if config.top_k > 20 else []
    prompts = ["--prompts", config.prompts or str(PROMPTS)] + (
        ["--pooled"] if config.pooled else []
    )
    return [
        *command,
        *reports,
        *prompts,
        "--out",
        str(out),
        "--profile",
        PROFILE,
        "--temperature",
        str(config.temperature),
        "--top-k",
        str(config.top_k),
        "--top-p",
        str(config.top_p),
        "--max-tokens",
        str(config.max_tokens),
        "--time-limit-s",
        str(int(config.time_limit_s)),
        "--seed-key",
        seed_key,
    ]


#: Options whose value `engine certify` itself opens: recorded as a path a checkout set up by the README resolves.
OPENED_BY_CERTIFY = ("--tokenizer",)


def resolvable(portable: str) -> str:
    """A portable path (`conformance.paths`) as a shell word that resolves in a checkout set up as the README says:
    ``site-packages:X`` in `.venv`'s site-packages, ``venv:X`` in `.venv`, ``cache:X`` in exactspec's cache."""
    kind, _, rest = portable.partition(":")
    if kind == "site-packages" and rest:
        return f".venv/lib/python3*/site-packages/{rest}"
    if kind == "venv" and rest:
        return f".venv/{rest}"
    if kind == "cache" and rest:
        return f'"${{EXACTSPEC_CACHE:-${{XDG_CACHE_HOME:-$HOME/.cache}}/exactspec}}/{rest}"'
    return shlex.quote(portable)


def _portable(args: list[str]) -> str:
    """The command as recorded: this machine's paths (alone, or inside a flags string) named portably, and the paths
    `engine certify` opens named as a checkout resolves them."""

    def one(arg: str) -> str:
        # a flags string (--engine-flags' value); JSON and text stay whole
        if " " in arg and arg.startswith("-"):
            return shlex.join(portable_args(shlex.split(arg)))
        return portable_path(arg) if "/" in arg and not arg.startswith("{") else arg

    words = [shlex.quote(one(arg)) for arg in args[1:]]
    for i, arg in enumerate(args[1:-1], start=1):
        if arg in OPENED_BY_CERTIFY:
            words[i] = resolvable(one(args[i + 1]))
    return " ".join(["exactspec", *words])


def command_text(name: str, config: Config, args: list[str], seed_key: str) -> str:
    """command.txt: the command that reruns the configuration with the same seeds, then the commands it ran."""
    served = (
        ""
        if _is_in_process(config)
        else (
            f"exactspec engine serve --engine {config.engine} --mode "
            f"{config.mode} --draft-sampling {config.draft_sampling}\n"
        )
    )
    where = (
        "in its cached venv, `exactspec.conformance.engine.serve.llama_cpp_python`"
        if _is_in_process(config)
        else "the URLs are the ones `engine serve` printed for this run"
    )
    return (
        f".venv/bin/python benchmarks/engine_certificates.py --config {name} --seed-key {seed_key}\n\n"
        f"# which ran ({where}):\n{served}{_portable(args)}\n"
    )


def certify(name: str, seed_key: str | None = None) -> str:
    """Serve, certify in rounds and write docs/certificates/engine/<name>/; -> the verdict (or ENGINE_ERROR)."""
    config, out, seed_key = CONFIGS[name], OUT_ROOT / name, seed_key or new_key()
    shutil.rmtree(out, ignore_errors=True)  # a certificate is one fresh run, never a resumed one
    start = time.monotonic()
    if _is_in_process(config):
        args, serve_s = _certify_args(config, _in_process(config), out, seed_key), 0.0
        start = time.monotonic()  # the build of its venv (once) is not the certificate's time
        status = subprocess.run(args).returncode
    else:
        with tempfile.TemporaryDirectory(prefix=f"engine-cert-{name}-") as tmp:
            process, certify_command, serve_s = _serve(config, Path(tmp))
            try:
                args = _certify_args(config, certify_command, out, seed_key)
                status = subprocess.run(args).returncode
            finally:
                _stop(process)
    seconds = round(time.monotonic() - start, 1)
    if not (out / "certificate.json").is_file():
        out.mkdir(parents=True, exist_ok=True)
        (out / "ENGINE_ERROR.txt").write_text(
            f"exactspec engine certify exited {status} without a certificate; "
            f"see its output for the engine's error ({seconds} s)\n"
        )
        return "ENGINE_ERROR"
    hashes = {
        n: content_sha256((out / n).read_bytes(), n) for n in ("reference.jsonl", "candidate.jsonl")
    }
    files = [_shrink(out / "reference.jsonl"), _shrink(out / "candidate.jsonl")]
    doc = json.loads((out / "certificate.json").read_text())
    # as certified
    doc["certificate_run"] = {
        "config": name,
        "engine": config.engine,
        "mode": config.mode,
        "draft_sampling": config.draft_sampling,
        "temperature": config.temperature,
        "top_k": config.top_k,
        "top_p": config.top_p,
        "max_tokens": config.max_tokens,
        "server_start_s": round(serve_s, 1),
        "runtime_s": seconds,
        "sample_files": files,
        "sample_sha256": {f: hashes[f.removesuffix(".gz")] for f in files},
    }
    (out / "certificate.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    (out / "command.txt").write_text(command_text(name, config, args, seed_key))
    print(f"{name}: {doc['verdict']} in {seconds} s (servers {serve_s:.0f} s) -> {out}", flush=True)
    return str(doc["verdict"])


def write_index(root: Path = OUT_ROOT, configs: object = None) -> Path:
    """docs/certificates/engine/README.md: its generated regions (`exactspec.conformance.docs`) rendered anew from
    every certificate present (`configs` is accepted for older callers and unused)."""
    path = REPO / root / "README.md"
    path.write_text(rendered(REPO, path.relative_to(REPO)))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help=f"one of {', '.join(CONFIGS)}, or all")
    parser.add_argument(
        "--seed-key",
        default=None,
        help="hex key of the random seeds (default: a fresh one per "
        "configuration; the one in a certificate's command.txt reruns it with the same seeds)",
    )
    args = parser.parse_args(argv)
    if args.config != "all" and args.config not in CONFIGS:
        parser.error(f"--config must be one of {', '.join(CONFIGS)} or all, got {args.config!r}")
    os.chdir(REPO)  # certificate paths are repository-relative
    verdicts = {}
    for name in list(CONFIGS) if args.config == "all" else [args.config]:
        verdicts[name] = certify(name, args.seed_key)
        write_index(OUT_ROOT)
    print(json.dumps(verdicts, indent=1))
    return (
        0
        if all(
            v in ("CERTIFIED", "QUALIFIED", "NOT_EXACT", "INCONCLUSIVE", "ENGINE_ERROR")
            for v in verdicts.values()
        )
        else 1
    )


if __name__ == "__main__":
    raise SystemExit(main())
