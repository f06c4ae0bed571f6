"""Speculative decoding on SmolLM2-135M-Instruct (CPU): drafts x temperatures x prompt kinds, k sweep, batch sweep.

    python benchmarks/bench_smollm2.py --section costs|drafts|ksweep|batch|all [--max-new-tokens 64] [--repeats 3]

Each section writes benchmarks/results/smollm2_<section>.json (rewritten after every configuration, so a
partial run leaves its finished part). Speeds are ratios against a baseline run in the same process,
interleaved rep by rep; every ratio is the median over the repetitions with its min/max.

What is measured, per configuration:
* tokens/s of plain decoding with our loop (`generate_plain`) and with `transformers.generate`;
* tokens/s of our speculative decoding and of transformers' assisted generation with the same draft
  (prompt lookup: `prompt_lookup_num_tokens=k`; int8: `assistant_model=` the same int8 copy, constant k);
* alpha (overall and per position), tokens per target call, c = draft cost per drafted token / target
  cost per plain step and v(k+1) = target time to score k+1 tokens / time to score 1, both from
  micro-benchmarks ("micro") and from the loop's own timers ("loop");
* the cost-model prediction E[N] / (c k + v(k+1)), E[N] = (1 - alpha^(k+1)) / (1 - alpha), beside the
  measured speedup.

There is no second SmolLM2 size on this machine (no model hub), so the "separate small model" draft is
a randomly initialised tiny Llama with SmolLM2's vocabulary; it only demonstrates alpha ~ 0.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    PROMPTS,
    draft_cost_ratio,
    encode_prompt,
    hf_generate,
    hf_generate_kwargs,
    left_pad,
    log,
    spread,
    verification_costs,
    write_result,
)

import torch  # noqa: E402

from reference.speedup import expected_tokens, expected_tokens_per_position, improvement_factor  # noqa: E402
from reference.warping import SamplingParams  # noqa: E402


def load() -> tuple[Any, Any]:
    from gpu_impl.models import LAST_LOAD_INFO, load_default_model

    model, tokenizer = load_default_model()
    log("loaded", dict(LAST_LOAD_INFO))
    return model, tokenizer


def make_draft(name: str, model: Any, cache: dict[str, Any]) -> Any:
    """Draft sources by name (model-backed drafts built once and reused)."""
    from gpu_impl.drafts import EarlyExitDraft, ModelDraft, PromptLookupDraft, QuantizedSelfDraft

    if name not in cache:
        if name == "prompt-lookup":
            cache[name] = PromptLookupDraft(ngram_max=3)
        elif name == "int8-dynamic":
            cache[name] = QuantizedSelfDraft(model, backend="dynamic")
        elif name == "int8-weight-only":
            cache[name] = QuantizedSelfDraft(model, backend="int8")
        elif name.startswith("early-exit:"):
            cache[name] = EarlyExitDraft(model, int(name.split(":")[1]))
        elif name == "tiny-random":
            from gpu_impl.models import tiny_llama

            cache[name] = ModelDraft(tiny_llama(vocab_size=model.config.vocab_size, hidden_size=64, n_layers=2, seed=0))
        else:
            raise ValueError(name)
    return cache[name]


def draft_model_of(draft: Any) -> Any | None:
    return getattr(draft, "model", None)


def hf_assisted_kwargs(name: str, draft: Any, k: int) -> dict[str, Any] | None:
    """transformers' assisted-generation kwargs for the same draft, or None where generate has no equivalent."""
    if name == "prompt-lookup":
        return {"prompt_lookup_num_tokens": k}
    if name.startswith("early-exit:"):
        return {"assistant_early_exit": int(name.split(":")[1]), "num_assistant_tokens": k}
    model = draft_model_of(draft)
    if model is None:
        return None
    gc = model.generation_config
    gc.num_assistant_tokens = k
    gc.num_assistant_tokens_schedule = "constant"
    gc.assistant_confidence_threshold = 0.0
    return {"assistant_model": model}


def summarise_stats(results: list[Any]) -> dict[str, Any]:
    """Pool the counters of several runs: alpha, per-position alpha, tokens per target call, timers."""
    proposed = sum(r.stats.proposed for r in results)
    accepted = sum(r.stats.accepted for r in results)
    reached = [sum(x) for x in zip(*[r.stats.reached_per_position for r in results])] if results else []
    acc_pos = [sum(x) for x in zip(*[r.stats.accepted_per_position for r in results])] if results else []
    rounds = sum(r.stats.rounds for r in results)
    return {
        # alpha = P(a drafted token is accepted | it is reached): pooled over positions, the estimate the
        # iid model E[N] = (1 - alpha^(k+1)) / (1 - alpha) needs. accepted / proposed (SpecStats.acceptance_rate)
        # also counts the drafts after a rejection, which are never examined, and is reported separately.
        "alpha": sum(acc_pos) / sum(reached) if sum(reached) else 0.0,
        "accepted_fraction": accepted / proposed if proposed else 0.0,
        "alpha_per_position": [a / n if n else None for a, n in zip(acc_pos, reached)],
        "tokens_per_target_call": sum(r.stats.emitted_before_cuts for r in results) / max(1, sum(r.stats.row_rounds for r in results)),
        "rounds": rounds,
        "draft_time_per_round_s": sum(r.stats.draft_time_s for r in results) / max(1, rounds),
        "target_time_per_round_s": sum(r.stats.target_time_s for r in results) / max(1, rounds),
        "per_run": [r.stats.to_dict() for r in results],
    }


def cost_model(alpha: float, k: int, c: float, v: float, tpc: float, alpha_per_position: list | None = None) -> dict[str, float]:
    """E[N] / (c k + v(k+1)) with E[N] from the pooled alpha, and the same with per-position alphas / measured E[N]."""
    alpha_c = min(max(alpha, 0.0), 1.0)
    c = max(c, 0.0)
    out = {
        "E_N": expected_tokens(alpha_c, k),
        "predicted_speedup": improvement_factor(alpha_c, k, c, {k + 1: v}),
        "predicted_speedup_from_measured_tokens_per_call": tpc / (c * k + v),
    }
    if alpha_per_position and len(alpha_per_position) >= k:
        alphas = [0.0 if a is None else a for a in alpha_per_position[:k]]
        out["E_N_per_position"] = expected_tokens_per_position(alphas)
        out["predicted_speedup_per_position"] = out["E_N_per_position"] / (c * k + v)
    return out


# ----------------------------------------------------------------------------------------------------------


def section_costs(model: Any, tokenizer: Any, args: argparse.Namespace) -> dict[str, Any]:
    from gpu_impl import SpeculativeGenerator, generate_plain

    out: dict[str, Any] = {"section": "costs", "v": {}, "c": {}, "alpha_probe": []}
    path_name = "smollm2_costs"
    drafts: dict[str, Any] = {}
    for kind, text in PROMPTS.items():
        ids = encode_prompt(tokenizer, text)
        out["v"][kind] = verification_costs(model, ids, [2, 3, 4, 5, 6, 7, 9], repeats=args.micro_repeats)
        log("v", kind, {n: round(x["median"], 2) for n, x in out["v"][kind]["v"].items()})
        write_result(path_name, out)
    ids = encode_prompt(tokenizer, PROMPTS["code"])
    for name in ["int8-dynamic", "int8-weight-only", "early-exit:8", "early-exit:15", "early-exit:22", "tiny-random"]:
        draft = make_draft(name, model, drafts)
        out["c"][name] = draft_cost_ratio(draft_model_of(draft), model, ids, repeats=args.micro_repeats)
        log("c", name, round(out["c"][name]["c"]["median"], 3))
        write_result(path_name, out)
    # alpha of the drafts that are not worth a full timing run (early exit, random tiny model): one short run each
    n_tokens = 24
    for temperature in (0.0, 0.7):
        sampling = SamplingParams(temperature=temperature)
        for name in ["early-exit:8", "early-exit:15", "early-exit:22", "tiny-random"]:
            draft = make_draft(name, model, drafts)
            for kind in ("code", "chat"):
                ids = encode_prompt(tokenizer, PROMPTS[kind])
                gen = SpeculativeGenerator(model, draft, k=2, sampling=sampling)
                t_plain = time.perf_counter()
                generate_plain(model, ids, n_tokens, sampling=sampling, seed=1)
                t_plain = time.perf_counter() - t_plain
                res = gen.generate(ids, n_tokens, seed=1)
                out["alpha_probe"].append({
                    "draft": name, "temperature": temperature, "prompt": kind, "k": 2, "max_new_tokens": n_tokens,
                    "alpha": res.stats.acceptance_rate, "alpha_per_position": res.stats.alpha_per_position,
                    "tokens_per_target_call": res.stats.tokens_per_target_call,
                    "speedup_single_run": t_plain / res.stats.wall_time_s,
                })
                log("alpha", name, temperature, kind, round(res.stats.acceptance_rate, 3))
                write_result(path_name, out)
    return out


def run_config(model: Any, tokenizer: Any, kind: str, temperature: float, draft_names: list[str], ks: dict[str, int],
               args: argparse.Namespace, drafts: dict[str, Any], with_hf: bool = True) -> dict[str, Any]:
    """One (prompt kind, temperature): plain ours / transformers.generate / spec per draft / HF assisted per draft."""
    from gpu_impl import SpeculativeGenerator, generate_plain

    sampling = SamplingParams(temperature=temperature)
    ids = encode_prompt(tokenizer, PROMPTS[kind])
    n = args.max_new_tokens
    hf_kw = hf_generate_kwargs(temperature, n)
    runs: dict[str, Any] = {"plain": lambda seed: generate_plain(model, ids, n, sampling=sampling, seed=seed)}
    if with_hf:
        runs["hf_generate"] = lambda seed: hf_generate(model, ids, None, seed, **hf_kw)
    gens = {}
    for name in draft_names:
        draft = make_draft(name, model, drafts)
        k = ks[name]
        gens[name] = SpeculativeGenerator(model, draft, k=k, sampling=sampling)
        runs[f"spec:{name}"] = (lambda g: lambda seed: g.generate(ids, n, seed=seed))(gens[name])
        assisted = hf_assisted_kwargs(name, draft, k) if with_hf else None
        if assisted is not None:
            runs[f"hf_assisted:{name}"] = (lambda kw: lambda seed: hf_generate(model, ids, None, seed, **hf_kw, **kw))(assisted)
    for fn in runs.values():  # warm-up: first calls allocate
        pass
    times: dict[str, list[float]] = {name: [] for name in runs}
    values: dict[str, list[Any]] = {name: [] for name in runs}
    for rep in range(args.repeats):
        for name, fn in runs.items():
            start = time.perf_counter()
            value = fn(rep)
            times[name].append(time.perf_counter() - start)
            values[name].append(value)
    t_step = [t / n for t in times["plain"]]
    result: dict[str, Any] = {
        "prompt": kind, "temperature": temperature, "max_new_tokens": n, "prompt_tokens": int(ids.shape[1]),
        "repeats": args.repeats,
        "tokens_per_s": {name: spread([n / t for t in ts]) for name, ts in times.items()},
        "seconds": {name: spread(ts) for name, ts in times.items()},
    }
    if with_hf:
        result["hf_generate_vs_plain"] = spread([p / h for p, h in zip(times["plain"], times["hf_generate"])])
    result["drafts"] = {}
    v_micro_all = verification_costs(model, ids, sorted({ks[d] + 1 for d in draft_names}), repeats=args.micro_repeats)
    for name in draft_names:
        k = ks[name]
        pooled = summarise_stats(values[f"spec:{name}"])
        speedup = spread([p / s for p, s in zip(times["plain"], times[f"spec:{name}"])])
        c_loop = pooled["draft_time_per_round_s"] / k / statistics_median(t_step)
        v_loop = pooled["target_time_per_round_s"] / statistics_median(t_step)
        model_d = draft_model_of(drafts[name])
        c_micro = draft_cost_ratio(model_d, model, ids, repeats=args.micro_repeats)["c"]["median"] if model_d is not None else c_loop
        v_micro = v_micro_all["v"][str(k + 1)]["median"]
        entry = {
            "k": k,
            "speedup_vs_plain": speedup,
            "speedup_vs_hf_generate": spread([h / s for h, s in zip(times.get("hf_generate", times["plain"]), times[f"spec:{name}"])]),
            **{key: pooled[key] for key in ("alpha", "alpha_per_position", "tokens_per_target_call", "rounds")},
            "c_micro": c_micro, "v_micro": v_micro, "c_loop": c_loop, "v_loop": v_loop,
            "accepted_fraction": pooled["accepted_fraction"],
            "model_micro": cost_model(pooled["alpha"], k, c_micro, v_micro, pooled["tokens_per_target_call"], pooled["alpha_per_position"]),
            "model_loop": cost_model(pooled["alpha"], k, c_loop, v_loop, pooled["tokens_per_target_call"], pooled["alpha_per_position"]),
            "stats": pooled["per_run"],
        }
        if f"hf_assisted:{name}" in times:
            entry["hf_assisted_speedup_vs_hf_generate"] = spread(
                [h / a for h, a in zip(times["hf_generate"], times[f"hf_assisted:{name}"])])
            entry["ours_vs_hf_assisted"] = spread(
                [a / s for a, s in zip(times[f"hf_assisted:{name}"], times[f"spec:{name}"])])
        if temperature == 0:
            plain_seq = values["plain"][0].sequences
            entry["greedy_identical_to_plain"] = all(v.sequences == plain_seq for v in values[f"spec:{name}"])
        result["drafts"][name] = entry
    return result


def statistics_median(values: list[float]) -> float:
    import statistics

    return statistics.median(values)


def _brief(cfg: dict[str, Any]) -> str:
    parts = []
    for name, d in cfg["drafts"].items():
        hf = d.get("hf_assisted_speedup_vs_hf_generate", {}).get("median")
        parts.append(f"{name}: x{d['speedup_vs_plain']['median']:.2f} (pred {d['model_micro']['predicted_speedup']:.2f}, "
                     f"alpha {d['alpha']:.2f}, c {d['c_micro']:.2f}, v {d['v_micro']:.2f}"
                     + (f", HF assisted x{hf:.2f}" if hf is not None else "") + ")")
    return "; ".join(parts)


def section_drafts(model: Any, tokenizer: Any, args: argparse.Namespace) -> dict[str, Any]:
    names = args.drafts.split(",")
    ks = {name: args.k for name in names}
    out: dict[str, Any] = {"section": "drafts", "configs": [], "k": args.k, "drafts": names,
                           "note": "early-exit and the random tiny draft are in smollm2_costs.json (alpha ~ 0)"}
    drafts: dict[str, Any] = {}
    for temperature in (0.0, 0.7):
        for kind in PROMPTS:
            cfg = run_config(model, tokenizer, kind, temperature, names, ks, args, drafts)
            out["configs"].append(cfg)
            log("drafts", kind, temperature, "HF/plain", round(cfg["hf_generate_vs_plain"]["median"], 2), _brief(cfg))
            write_result("smollm2_drafts", out)
    return out


def section_ksweep(model: Any, tokenizer: Any, args: argparse.Namespace) -> dict[str, Any]:
    from gpu_impl import SpeculativeGenerator, generate_plain

    out: dict[str, Any] = {"section": "ksweep", "sweeps": []}
    drafts: dict[str, Any] = {}
    n = args.max_new_tokens
    for name, kind, temperature in [("int8-dynamic", "chat", 0.7), ("prompt-lookup", "code", 0.0)]:
        sampling = SamplingParams(temperature=temperature)
        ids = encode_prompt(tokenizer, PROMPTS[kind])
        draft = make_draft(name, model, drafts)
        ks = [1, 2, 3, 4, 6, 8]
        v = verification_costs(model, ids, [k + 1 for k in ks], repeats=args.micro_repeats)
        c = draft_cost_ratio(draft_model_of(draft), model, ids, repeats=args.micro_repeats)["c"]["median"] if draft_model_of(draft) is not None else 0.0
        times: dict[Any, list[float]] = {"plain": []}
        values: dict[Any, list[Any]] = {}
        for rep in range(args.repeats):
            start = time.perf_counter()
            generate_plain(model, ids, n, sampling=sampling, seed=rep)
            times["plain"].append(time.perf_counter() - start)
            for k in ks:
                gen = SpeculativeGenerator(model, draft, k=k, sampling=sampling)
                start = time.perf_counter()
                values.setdefault(k, []).append(gen.generate(ids, n, seed=rep))
                times.setdefault(k, []).append(time.perf_counter() - start)
        rows = []
        for k in ks:
            pooled = summarise_stats(values[k])
            vk = v["v"][str(k + 1)]["median"]
            rows.append({
                "k": k, "speedup_vs_plain": spread([p / s for p, s in zip(times["plain"], times[k])]),
                "alpha": pooled["alpha"], "alpha_per_position": pooled["alpha_per_position"],
                "tokens_per_target_call": pooled["tokens_per_target_call"], "c_micro": c, "v_micro": vk,
                "accepted_fraction": pooled["accepted_fraction"],
                "model_micro": cost_model(pooled["alpha"], k, c, vk, pooled["tokens_per_target_call"], pooled["alpha_per_position"]),
                "stats": pooled["per_run"],
            })
            log("ksweep", name, kind, temperature, "k", k, "x%.2f" % rows[-1]["speedup_vs_plain"]["median"],
                "pred %.2f" % rows[-1]["model_micro"]["predicted_speedup"], "alpha %.2f" % pooled["alpha"])
        out["sweeps"].append({"draft": name, "prompt": kind, "temperature": temperature, "max_new_tokens": n,
                              "repeats": args.repeats, "v": v["v"], "c_micro": c, "rows": rows})
        write_result("smollm2_ksweep", out)
    return out


def section_batch(model: Any, tokenizer: Any, args: argparse.Namespace) -> dict[str, Any]:
    from gpu_impl import SpeculativeGenerator, generate_plain

    out: dict[str, Any] = {"section": "batch", "rows": []}
    drafts: dict[str, Any] = {}
    n = args.batch_new_tokens
    name, k, temperature = args.batch_draft, args.batch_k, 0.7
    sampling = SamplingParams(temperature=temperature)
    draft = make_draft(name, model, drafts)
    encoded = [encode_prompt(tokenizer, text)[0] for text in PROMPTS.values()]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    for batch in [int(b) for b in args.batch_sizes.split(",")]:
        ids, mask = left_pad([encoded[i % len(encoded)] for i in range(batch)], pad)
        gen = SpeculativeGenerator(model, draft, k=k, sampling=sampling)
        t_plain, t_spec, res = [], [], []
        reps = args.repeats if batch <= 4 else max(2, args.repeats - 1)
        for rep in range(reps):
            start = time.perf_counter()
            generate_plain(model, ids, n, sampling=sampling, seed=rep, attention_mask=mask)
            t_plain.append(time.perf_counter() - start)
            start = time.perf_counter()
            res.append(gen.generate(ids, n, seed=rep, attention_mask=mask))
            t_spec.append(time.perf_counter() - start)
        pooled = summarise_stats(res)
        row = {
            "batch": batch, "draft": name, "k": k, "temperature": temperature, "max_new_tokens": n, "repeats": reps,
            "plain_tokens_per_s": spread([batch * n / t for t in t_plain]),
            "spec_tokens_per_s": spread([batch * n / t for t in t_spec]),
            "speedup_vs_plain": spread([p / s for p, s in zip(t_plain, t_spec)]),
            "alpha": pooled["alpha"], "alpha_per_position": pooled["alpha_per_position"],
            "accepted_fraction": pooled["accepted_fraction"], "tokens_per_target_call": pooled["tokens_per_target_call"],
            "v_micro": verification_costs(model, ids[:, :-1], [k + 1], repeats=max(3, args.micro_repeats // 2))["v"][str(k + 1)]["median"],
        }
        out["rows"].append(row)
        log("batch", batch, "x%.2f" % row["speedup_vs_plain"]["median"], "plain tok/s %.1f" % row["plain_tokens_per_s"]["median"],
            "spec tok/s %.1f" % row["spec_tokens_per_s"]["median"], "alpha %.2f" % pooled["alpha"], "v %.2f" % row["v_micro"])
        write_result("smollm2_batch", out)
    return out


def recompute(names: list[str] = ("drafts", "ksweep", "batch")) -> None:
    """Rewrite alpha / cost-model fields of existing result files from their stored per-run counters.

    Results written before alpha was pooled per reached position (it was accepted / proposed) are fixed
    here; timings are untouched.
    """
    import json

    from _common import RESULTS_DIR

    class _Run:  # per-run stats dict -> the attribute access summarise_stats expects
        def __init__(self, d):
            self.stats = type("S", (), {**d, "to_dict": lambda _self: d})()

    def fix(entry: dict[str, Any], k: int, c: float, v: float, loop: bool) -> None:
        runs = entry.get("stats")
        if runs:
            pooled = summarise_stats([_Run(d) for d in runs])
            entry["alpha"], entry["accepted_fraction"] = pooled["alpha"], pooled["accepted_fraction"]
            entry["alpha_per_position"] = pooled["alpha_per_position"]
        else:  # no counters stored: keep alpha_per_position, pool it without weights
            entry.setdefault("accepted_fraction", entry.get("alpha"))
        tpc = entry["tokens_per_target_call"]
        entry["model_micro"] = cost_model(entry["alpha"], k, c, v, tpc, entry.get("alpha_per_position"))
        if loop:
            entry["model_loop"] = cost_model(entry["alpha"], k, entry["c_loop"], entry["v_loop"], tpc, entry.get("alpha_per_position"))

    for name in names:
        path = RESULTS_DIR / f"smollm2_{name}.json"
        if not path.exists():
            continue
        payload = json.loads(path.read_text())
        if name == "drafts":
            for cfg in payload["configs"]:
                for entry in cfg["drafts"].values():
                    fix(entry, entry["k"], entry["c_micro"], entry["v_micro"], loop=True)
        elif name == "ksweep":
            for sweep in payload["sweeps"]:
                for row in sweep["rows"]:
                    fix(row, row["k"], row["c_micro"], row["v_micro"], loop=False)
        payload["recomputed"] = "alpha pooled over reached positions; cost-model fields recomputed (bench_smollm2.recompute)"
        path.write_text(json.dumps(payload, indent=2) + "\n")
        log("recomputed", path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", default="all", choices=["costs", "drafts", "ksweep", "batch", "all", "recompute"])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--micro-repeats", type=int, default=9)
    parser.add_argument("--k", type=int, default=4, help="k for the drafts section")
    parser.add_argument("--drafts", default="prompt-lookup,int8-dynamic")
    parser.add_argument("--batch-sizes", default="1,2,4,8,16")
    parser.add_argument("--batch-draft", default="int8-dynamic")
    parser.add_argument("--batch-k", type=int, default=3)
    parser.add_argument("--batch-new-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's default)")
    args = parser.parse_args(argv)
    if args.section == "recompute":
        recompute()
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = load()
    sections = ["costs", "drafts", "ksweep", "batch"] if args.section == "all" else [args.section]
    for section in sections:
        log("section", section)
        {"costs": section_costs, "drafts": section_drafts, "ksweep": section_ksweep, "batch": section_batch}[section](model, tokenizer, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
