"""GPU cost probes for speculative decoding with random Llama-shaped models (no network, no weights needed).

    python benchmarks/cuda_bench.py --out DIR            # ~1B target, ~100M draft, batch 1..128 (GPU, < 8 min)
    python benchmarks/cuda_bench.py --out DIR --small    # tiny shapes, runs on CPU in about a minute

Measures, per batch size B:
* v(n) = latency(target scores n = k+1 new tokens on top of a KV cache) / latency(target decodes 1 token);
* c = latency(draft decodes 1 token) / latency(target decodes 1 token);
* the cost-model speedup E[N] / (c k + v(k+1)) those imply at a few acceptance rates;
and the throughput of the rejection sampler `gpu_impl.sampling.sampler.verify_batch` (one batched call; final token by
the exponential race, the CUDA default, and by the blocked inverse CDF; one generator and one per row)
against a per-row Python loop applying the same rule with host reads and against the NumPy oracle's
`verify` row by row (on the host). Weights are random: latencies depend only on shapes, not values
(acceptance rates are not measured here).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import log, spread, write_result  # noqa: E402

import torch  # noqa: E402

from exactspec.reference.speedup import improvement_factor  # noqa: E402

SHAPES = {
    # ~1.0B parameters (TinyLlama-like, 16 layers) and ~100M parameters, same 32k vocabulary
    "full": {
        "target": dict(
            hidden_size=2048,
            intermediate_size=5632,
            num_hidden_layers=16,
            num_attention_heads=32,
            num_key_value_heads=4,
        ),
        "draft": dict(
            hidden_size=768,
            intermediate_size=2048,
            num_hidden_layers=8,
            num_attention_heads=12,
            num_key_value_heads=4,
        ),
        "vocab": 32000,
        "context": 512,
        "batches": [1, 2, 4, 8, 16, 32, 64, 128],
        "sampler_vocab": 49152,
        "sampler_batches": [1, 8, 32, 128],
        "repeats": 10,
    },
    "small": {
        "target": dict(
            hidden_size=128,
            intermediate_size=256,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
        ),
        "draft": dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=1,
            num_attention_heads=4,
            num_key_value_heads=2,
        ),
        "vocab": 1000,
        "context": 32,
        "batches": [1, 2, 4, 8],
        "sampler_vocab": 1000,
        "sampler_batches": [1, 8, 32],
        "repeats": 3,
    },
}
KS = [1, 2, 4, 8]
ACCEPTANCE_RATES = [0.6, 0.8, 0.9]


def build(shape: dict[str, int], vocab: int, device: str, dtype: torch.dtype, seed: int) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab, max_position_embeddings=4096, tie_word_embeddings=False, **shape
    )
    config._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    with torch.device(device):
        model = LlamaForCausalLM(config)
    return model.to(dtype).eval().requires_grad_(False)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed_forward(
    model: Any, cache: Any, batch: int, n: int, device: str, repeats: int
) -> list[float]:
    x = torch.randint(0, model.config.vocab_size, (batch, n), device=device)
    out = []
    for i in range(repeats + 2):
        sync(device)
        start = time.perf_counter()
        model(x, cache=cache, use_cache=True, logits_to_keep=n)
        sync(device)
        if i >= 2:  # two warm-up calls
            out.append(time.perf_counter() - start)
        cache.crop(-n)
    return out


def prefill(model: Any, batch: int, context: int, device: str) -> Any:
    ids = torch.randint(0, model.config.vocab_size, (batch, context), device=device)
    out = model(ids, use_cache=True, logits_to_keep=1)
    return out.cache if getattr(out, "cache", None) is not None else out.past_key_values


@torch.inference_mode()
def latency_section(
    target: Any, draft: Any, cfg: dict[str, Any], device: str, deadline: float
) -> list[dict[str, Any]]:
    rows = []
    for batch in cfg["batches"]:
        if time.perf_counter() > deadline:
            log("latency: time budget reached, skipping batch", batch)
            break
        try:
            t_cache = prefill(target, batch, cfg["context"], device)
            d_cache = prefill(draft, batch, cfg["context"], device)
            reps = cfg["repeats"]
            t1 = timed_forward(target, t_cache, batch, 1, device, reps)
            d1 = timed_forward(draft, d_cache, batch, 1, device, reps)
            tn = {k + 1: timed_forward(target, t_cache, batch, k + 1, device, reps) for k in KS}
        except torch.OutOfMemoryError:
            log("latency: out of memory at batch", batch)
            break
        finally:
            t_cache = d_cache = None
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
        t1_med = spread(t1)["median"]
        c = spread(d1)["median"] / t1_med
        v = {n: spread(ts)["median"] / t1_med for n, ts in tn.items()}
        row = {
            "batch": batch,
            "context": cfg["context"],
            "target_decode_s": spread(t1),
            "draft_decode_s": spread(d1),
            "target_verify_s": {str(n): spread(ts) for n, ts in tn.items()},
            "v": {str(n): value for n, value in v.items()},
            "c": c,
            "predicted_speedup": {
                str(acceptance_rate): {
                    str(k): improvement_factor(acceptance_rate, k, c, {k + 1: v[k + 1]}) for k in KS
                }
                for acceptance_rate in ACCEPTANCE_RATES
            },
        }
        rows.append(row)
        log(
            f"B={batch:4d} t1={t1_med * 1e3:7.2f} ms c={c:.3f} "
            + " ".join(f"v({n})={x:.2f}" for n, x in v.items())
        )
    return rows


def per_row_loop(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    draft_tokens: torch.Tensor,
    generator: torch.Generator,
) -> list[list[int]]:
    """The rule applied row by row in Python with host reads: the naive implementation verify_batch replaces."""
    out = []
    batch, k, _ = draft_probs.shape
    for b in range(batch):
        emitted = []
        for i in range(k):
            x = int(draft_tokens[b, i])
            p, q = float(target_probs[b, i, x]), float(draft_probs[b, i, x])
            u = float(torch.rand((), generator=generator, device=target_probs.device))
            if u < p / q:
                emitted.append(x)
                continue
            residual = (target_probs[b, i] - draft_probs[b, i]).clamp_min(0)
            emitted.append(
                int(torch.multinomial(residual / residual.sum(), 1, generator=generator))
            )
            break
        else:
            emitted.append(int(torch.multinomial(target_probs[b, k], 1, generator=generator)))
        out.append(emitted)
    return out


def _timed(fn, device: str, repeats: int) -> list[float]:
    out = []
    for i in range(repeats + 1):  # one warm-up call
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        if i:
            out.append(time.perf_counter() - start)
    return out


def _sampler_candidates(p, q, tokens, g, device: str) -> dict[str, Any]:
    """Name -> zero-argument call of one verification round (each returns after its one host read)."""
    import numpy as np

    from exactspec.gpu_impl.sampling.randomness import make_generators
    from exactspec.gpu_impl.sampling.sampler import verify_batch
    from exactspec.reference.rules import verify

    per_row = make_generators(range(p.shape[0]), device)
    batched = lambda gens, method: (
        lambda: verify_batch(p, q, tokens, gens, method=method)[1].tolist()
    )
    p64, q64, x_host = (
        (p.double() / p.double().sum(-1, keepdim=True)).cpu().numpy(),
        q.double().cpu().numpy(),
        tokens.cpu().numpy(),
    )
    q64 /= q64.sum(-1, keepdims=True)
    rng = np.random.default_rng(0)
    return {
        "race_one_generator": batched(g, "race"),
        "race_per_row_generators": batched(per_row, "race"),
        "inverse_cdf_one_generator": batched(g, "inverse_cdf"),
        "inverse_cdf_per_row_generators": batched(per_row, "inverse_cdf"),
        "per_row_torch_loop": lambda: per_row_loop(p, q, tokens, g),
        "numpy_oracle_loop": lambda: [
            verify(p64[b], q64[b], x_host[b], rng) for b in range(p.shape[0])
        ],
    }


@torch.inference_mode()
def sampler_section(cfg: dict[str, Any], device: str, deadline: float) -> list[dict[str, Any]]:
    rows = []
    k, vocab = 4, cfg["sampler_vocab"]
    for batch in cfg["sampler_batches"]:
        if time.perf_counter() > deadline:
            log("sampler: time budget reached, skipping batch", batch)
            break
        g = torch.Generator(device=device).manual_seed(0)
        logits_t = torch.randn(batch, k + 1, vocab, device=device, generator=g) * 3
        logits_d = logits_t[:, :k] + torch.randn(batch, k, vocab, device=device, generator=g)
        p, q = logits_t.softmax(-1), logits_d.softmax(-1)
        tokens = torch.multinomial(q.reshape(-1, vocab), 1, generator=g).reshape(batch, k)
        seconds = {}
        for name, fn in _sampler_candidates(p, q, tokens, g, device).items():
            loop = name.endswith("_loop")
            seconds[name] = spread(
                _timed(fn, device, max(1, cfg["repeats"] // 3) if loop else cfg["repeats"])
            )
        rows.append(
            {
                "batch": batch,
                "k": k,
                "vocab": vocab,
                "seconds": seconds,
                "rows_per_s": {name: batch / s["median"] for name, s in seconds.items()},
                "speedup_vs_per_row_torch_loop": {
                    name: seconds["per_row_torch_loop"]["median"] / s["median"]
                    for name, s in seconds.items()
                },
                "speedup_vs_numpy_oracle_loop": {
                    name: seconds["numpy_oracle_loop"]["median"] / s["median"]
                    for name, s in seconds.items()
                },
            }
        )
        log(
            f"sampler B={batch:4d} "
            + ", ".join(f"{n} {s['median'] * 1e3:.2f} ms" for n, s in seconds.items())
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for cuda_bench.json")
    parser.add_argument(
        "--small", action="store_true", help="tiny shapes (CPU check of the script)"
    )
    parser.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    parser.add_argument(
        "--dtype",
        default=None,
        choices=["float32", "float16", "bfloat16"],
        help="default: bfloat16 on GPU, float32 on CPU",
    )
    parser.add_argument(
        "--budget-s", type=float, default=240.0, help="stop starting new measurements after this"
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = (
        getattr(torch, args.dtype)
        if args.dtype
        else (torch.bfloat16 if device.startswith("cuda") else torch.float32)
    )
    cfg = SHAPES["small" if args.small else "full"]
    if args.small and device == "cpu":
        torch.set_num_threads(1)  # a check of the script on a (shared) CPU: no thread contention
    if not args.small and not device.startswith("cuda"):
        log("warning: full shapes on CPU will be slow; use --small")
    deadline = start + args.budget_s
    target = build(cfg["target"], cfg["vocab"], device, dtype, seed=0)
    draft = build(cfg["draft"], cfg["vocab"], device, dtype, seed=1)
    n_target = sum(p.numel() for p in target.parameters())
    n_draft = sum(p.numel() for p in draft.parameters())
    log(
        f"device {device} {dtype}; target {n_target / 1e6:.0f}M params, draft {n_draft / 1e6:.0f}M params"
    )
    payload: dict[str, Any] = {
        "device": device,
        "dtype": str(dtype),
        "shapes": "small" if args.small else "full",
        "config": cfg,
        "target_params": n_target,
        "draft_params": n_draft,
    }
    # sampler first while the deadline is far: it is quick; latency takes the rest of the budget
    from exactspec.gpu_impl.sampling.categorical import method_for

    payload["sampler_default_method"] = method_for(device)
    payload["sampler"] = sampler_section(cfg, device, deadline)
    write_result("cuda_bench", payload, Path(args.out))
    payload["latency"] = latency_section(target, draft, cfg, device, deadline)
    payload["elapsed_s"] = time.perf_counter() - start
    path = write_result("cuda_bench", payload, Path(args.out))
    log("wrote", path, f"in {payload['elapsed_s']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
