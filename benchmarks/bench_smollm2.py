"""Speculative decoding on SmolLM2-135M-Instruct (CPU): drafts x temperatures x prompt kinds, k sweep, batch sweep.

    python benchmarks/bench_smollm2.py --section costs|drafts|ksweep|batch|all [--max-new-tokens 64] [--repeats 3]

Each section writes benchmarks/results/smollm2_<section>.json (rewritten after every configuration, so a
partial run leaves its finished part). Speeds are ratios against a baseline run in the same process,
interleaved rep by rep; every ratio is the median over the repetitions with its min/max.

What is measured, per configuration:
* tokens/s of plain decoding with our loop (`generate_plain`) and with `transformers.generate`;
* tokens/s of our speculative decoding (fixed k, and the "cost" k policy) and of transformers' assisted
  generation with the same draft (prompt lookup: `prompt_lookup_num_tokens=k`; int8: `assistant_model=` the
  same int8 copy, constant k);
* ours twice: with the machine's measured CPU kernel plan (`gpu_impl.cost.cpu_matmul`, the default) and with
  stock `F.linear` kernels, which is what transformers runs (the like-for-like comparison);
* alpha (overall and per position), tokens per target call, c = draft cost per drafted token / target
  cost per plain step and v(k+1) = target time to score k+1 tokens / time to score 1, both from
  micro-benchmarks ("micro") and from the loop's own timers ("loop");
* the cost-model prediction E[N] / (c k + v(k+1)), E[N] = (1 - alpha^(k+1)) / (1 - alpha), beside the
  measured speedup of the decoding phase (wall time minus the prompt's prefill, which both runs pay and the
  model leaves out) and its ratio to the prediction.

There is no second SmolLM2 size on this machine (no model hub), so the "separate small model" draft is
a randomly initialised tiny Llama with SmolLM2's vocabulary; it only demonstrates alpha ~ 0.
"""

from __future__ import annotations

import argparse
import statistics
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
    kernels,
    left_pad,
    log,
    spread,
    verification_costs,
    write_result,
)

import torch  # noqa: E402

from _speculation import cost_model, draft_model_of, hf_assisted_kwargs, make_draft, summarise_stats  # noqa: E402

from exactspec.reference.warping import SamplingParams  # noqa: E402


def load() -> tuple[Any, Any]:
    from exactspec.gpu_impl.models import LAST_LOAD_INFO, load_default_model

    model, tokenizer = load_default_model()
    log("loaded", dict(LAST_LOAD_INFO))
    return model, tokenizer


def section_costs(model: Any, tokenizer: Any, args: argparse.Namespace) -> dict[str, Any]:
    from exactspec.gpu_impl import SpeculativeGenerator, generate_plain

    from exactspec.gpu_impl.cost.cpu_matmul import cpu_plan, measure_plan

    out: dict[str, Any] = {
        "section": "costs",
        "v": {},
        "v_stock": {},
        "c": {},
        "c_stock": {},
        "alpha_probe": [],
    }
    path_name = "smollm2_costs"
    seconds: dict[int, dict[str, float]] = {}
    out["cpu_matmul"] = {
        "plan_in_use": cpu_plan("auto"),
        "remeasured_plan": measure_plan(seconds=seconds),
        "seconds_per_64MB_of_weights": seconds,
    }
    log("cpu_matmul plan", out["cpu_matmul"]["plan_in_use"])
    drafts: dict[Any, Any] = {}
    for kind, text in PROMPTS.items():
        ids = encode_prompt(tokenizer, text)
        for mode, key in (("auto", "v"), ("stock", "v_stock")):
            with kernels(mode, model):
                out[key][kind] = verification_costs(
                    model, ids, [2, 3, 4, 5, 6, 7, 9], repeats=args.micro_repeats
                )
            log(key, kind, {n: round(x["median"], 2) for n, x in out[key][kind]["v"].items()})
        write_result(path_name, out)
    ids = encode_prompt(tokenizer, PROMPTS["code"])
    for name in [
        "int8-dynamic",
        "int8-weight-only",
        "early-exit:8",
        "early-exit:15",
        "early-exit:22",
        "tiny-random",
    ]:
        for mode, key in (("auto", "c"), ("stock", "c_stock")):
            draft = make_draft(name, model, drafts, mode)
            with kernels(mode, model, draft_model_of(draft)):
                out[key][name] = draft_cost_ratio(
                    draft_model_of(draft), model, ids, repeats=args.micro_repeats
                )
            log(key, name, round(out[key][name]["c"]["median"], 3))
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
                out["alpha_probe"].append(
                    {
                        "draft": name,
                        "temperature": temperature,
                        "prompt": kind,
                        "k": 2,
                        "max_new_tokens": n_tokens,
                        "alpha": res.stats.acceptance_rate,
                        "alpha_per_position": res.stats.acceptance_rate_per_position,
                        "tokens_per_target_call": res.stats.tokens_per_target_call,
                        "speedup_single_run": t_plain / res.stats.wall_time_s,
                    }
                )
                log("alpha", name, temperature, kind, round(res.stats.acceptance_rate, 3))
                write_result(path_name, out)
    return out


def _interleaved(
    runs: dict[str, Any], repeats: int
) -> tuple[dict[str, list[float]], dict[str, list[Any]]]:
    """Every run once per repetition, rep by rep (so drifts of the machine cancel): seconds and results per run."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    values: dict[str, list[Any]] = {name: [] for name in runs}
    for rep in range(repeats):
        for name, fn in runs.items():
            start = time.perf_counter()
            value = fn(rep)
            times[name].append(time.perf_counter() - start)
            values[name].append(value)
    return times, values


def _draft_entry(
    name: str,
    k: int,
    model: Any,
    ids: Any,
    args: argparse.Namespace,
    drafts: dict[str, Any],
    times: dict[str, list[float]],
    values: dict[str, list[Any]],
    t_step: list[float],
    v_micro_all: dict[str, Any],
    temperature: float,
    with_hf: bool,
) -> dict[str, Any]:
    """One draft's figures in a configuration: measured speedups, acceptance, costs and the model's prediction."""
    ratio = lambda num, den: spread([a / b for a, b in zip(times[num], times[den])])
    spec = f"spec:{name}"
    pooled = summarise_stats(values[spec])
    c_loop = pooled["draft_time_per_round_s"] / k / statistics.median(t_step)
    v_loop = pooled["target_time_per_round_s"] / statistics.median(t_step)
    model_d = draft_model_of(drafts[(name, "auto")])
    if model_d is not None:
        with kernels("auto", model, model_d):
            c_micro = draft_cost_ratio(model_d, model, ids, repeats=args.micro_repeats)["c"][
                "median"
            ]
    else:
        c_micro = c_loop
    v_micro = v_micro_all["v"][str(k + 1)]["median"]
    decode = spread(
        [
            (tp - p.stats.prefill_time_s) / (ts - q.stats.prefill_time_s)
            for tp, p, ts, q in zip(times["plain"], values["plain"], times[spec], values[spec])
        ]
    )
    model_micro = cost_model(
        pooled["alpha"],
        k,
        c_micro,
        v_micro,
        pooled["tokens_per_target_call"],
        pooled["alpha_per_position"],
    )
    cost_pooled = summarise_stats(values[f"spec_cost:{name}"])
    entry = {
        "k": k,
        "speedup_vs_plain": ratio("plain", spec),
        "decode_speedup_vs_plain": decode,
        "prediction_ratio": decode["median"] / model_micro["predicted_speedup"],
        "speedup_vs_hf_generate": ratio("hf_generate" if with_hf else "plain", spec),
        **{
            key: pooled[key]
            for key in ("alpha", "alpha_per_position", "tokens_per_target_call", "rounds")
        },
        "c_micro": c_micro,
        "v_micro": v_micro,
        "c_loop": c_loop,
        "v_loop": v_loop,
        "accepted_fraction": pooled["accepted_fraction"],
        "model_micro": model_micro,
        "model_loop": cost_model(
            pooled["alpha"],
            k,
            c_loop,
            v_loop,
            pooled["tokens_per_target_call"],
            pooled["alpha_per_position"],
        ),
        "stats": pooled["per_run"],
        "cost_policy": {
            "speedup_vs_plain": ratio("plain", f"spec_cost:{name}"),
            "alpha": cost_pooled["alpha"],
            "tokens_per_target_call": cost_pooled["tokens_per_target_call"],
            "mean_k": sum(r.stats.proposed for r in values[f"spec_cost:{name}"])
            / max(1, sum(r.stats.row_rounds for r in values[f"spec_cost:{name}"])),
            "stats": cost_pooled["per_run"],
        },
        "stock_kernels": {"speedup_vs_plain_stock": ratio("plain_stock", f"spec_stock:{name}")},
    }
    if f"hf_assisted:{name}" in times:
        assisted = f"hf_assisted:{name}"
        entry["hf_assisted_speedup_vs_hf_generate"] = ratio("hf_generate", assisted)
        entry["ours_vs_hf_assisted"] = ratio(assisted, spec)
        entry["cost_policy"]["ours_vs_hf_assisted"] = ratio(assisted, f"spec_cost:{name}")
        entry["stock_kernels"]["ours_vs_hf_assisted"] = ratio(assisted, f"spec_stock:{name}")
    if temperature == 0:
        plain_seq = values["plain"][0].sequences
        entry["greedy_identical_to_plain"] = all(
            v.sequences == plain_seq for key in (spec, f"spec_cost:{name}") for v in values[key]
        )
        entry["greedy_stock_identical_to_plain_stock"] = all(
            v.sequences == values["plain_stock"][0].sequences for v in values[f"spec_stock:{name}"]
        )
    return entry


def run_config(
    model: Any,
    tokenizer: Any,
    kind: str,
    temperature: float,
    draft_names: list[str],
    ks: dict[str, int],
    args: argparse.Namespace,
    drafts: dict[str, Any],
    with_hf: bool = True,
) -> dict[str, Any]:
    """One (prompt kind, temperature), every run interleaved rep by rep.

    Ours with the machine's CPU kernel plan ("auto"): plain, speculative with fixed k, speculative with the
    cost policy; ours with stock F.linear kernels: plain and speculative with fixed k (the like-for-like
    comparison with transformers, which uses stock kernels); transformers: generate and assisted generation.
    """
    from exactspec.gpu_impl import SpeculativeGenerator, generate_plain

    sampling = SamplingParams(temperature=temperature)
    ids = encode_prompt(tokenizer, PROMPTS[kind])
    n = args.max_new_tokens
    hf_kw = hf_generate_kwargs(temperature, n)
    plain = lambda mode: (
        lambda seed: generate_plain(model, ids, n, sampling=sampling, seed=seed, cpu_matmul=mode)
    )
    runs: dict[str, Any] = {"plain": plain("auto"), "plain_stock": plain("stock")}
    if with_hf:
        runs["hf_generate"] = lambda seed: hf_generate(model, ids, None, seed, **hf_kw)
    gen_of = lambda g: lambda seed: g.generate(ids, n, seed=seed)
    for name in draft_names:
        k = ks[name]
        draft, draft_stock = (
            make_draft(name, model, drafts),
            make_draft(name, model, drafts, "stock"),
        )
        runs[f"spec:{name}"] = gen_of(SpeculativeGenerator(model, draft, k=k, sampling=sampling))
        cost_gen = SpeculativeGenerator(model, draft, k=k, sampling=sampling, adaptive_k="cost")
        # measures the costs once (the calibration a long-running process pays once)
        cost_gen.generate(ids, 8)
        runs[f"spec_cost:{name}"] = gen_of(cost_gen)
        runs[f"spec_stock:{name}"] = gen_of(
            SpeculativeGenerator(model, draft_stock, k=k, sampling=sampling, cpu_matmul="stock")
        )
        assisted = hf_assisted_kwargs(name, draft_stock, k) if with_hf else None
        if assisted is not None:
            runs[f"hf_assisted:{name}"] = (
                lambda kw: lambda seed: hf_generate(model, ids, None, seed, **hf_kw, **kw)
            )(assisted)
    times, values = _interleaved(runs, args.repeats)
    ratio = lambda num, den: spread([a / b for a, b in zip(times[num], times[den])])
    t_step = [t / n for t in times["plain"]]
    result: dict[str, Any] = {
        "prompt": kind,
        "temperature": temperature,
        "max_new_tokens": n,
        "prompt_tokens": int(ids.shape[1]),
        "repeats": args.repeats,
        "tokens_per_s": {name: spread([n / t for t in ts]) for name, ts in times.items()},
        "seconds": {name: spread(ts) for name, ts in times.items()},
        "plain_vs_plain_stock": ratio("plain_stock", "plain"),
    }
    if with_hf:
        result["hf_generate_vs_plain"] = ratio("plain", "hf_generate")
        result["plain_vs_hf_generate"] = ratio("hf_generate", "plain")
        result["plain_stock_vs_hf_generate"] = ratio("hf_generate", "plain_stock")
    result["drafts"] = {}
    with kernels("auto", model):
        v_micro_all = verification_costs(
            model, ids, sorted({ks[d] + 1 for d in draft_names}), repeats=args.micro_repeats
        )
    for name in draft_names:
        result["drafts"][name] = _draft_entry(
            name,
            ks[name],
            model,
            ids,
            args,
            drafts,
            times,
            values,
            t_step,
            v_micro_all,
            temperature,
            with_hf,
        )
    return result


def _brief(cfg: dict[str, Any]) -> str:
    parts = []
    for name, d in cfg["drafts"].items():
        hf = d.get("hf_assisted_speedup_vs_hf_generate", {}).get("median")
        parts.append(
            f"{name}: x{d['speedup_vs_plain']['median']:.2f} (pred {d['model_micro']['predicted_speedup']:.2f}, "
            f"alpha {d['alpha']:.2f}, c {d['c_micro']:.2f}, v {d['v_micro']:.2f}"
            + (f", HF assisted x{hf:.2f}" if hf is not None else "")
            + ")"
        )
    return "; ".join(parts)


def section_drafts(model: Any, tokenizer: Any, args: argparse.Namespace) -> dict[str, Any]:
    names = args.drafts.split(",")
    ks = {name: args.k for name in names}
    out: dict[str, Any] = {
        "section": "drafts",
        "configs": [],
        "k": args.k,
        "drafts": names,
        "note": "early-exit and the random tiny draft are in smollm2_costs.json (alpha ~ 0)",
    }
    drafts: dict[str, Any] = {}
    for temperature in (0.0, 0.7):
        for kind in PROMPTS:
            cfg = run_config(model, tokenizer, kind, temperature, names, ks, args, drafts)
            out["configs"].append(cfg)
            log(
                "drafts",
                kind,
                temperature,
                "HF/plain",
                round(cfg["hf_generate_vs_plain"]["median"], 2),
                _brief(cfg),
            )
            write_result("smollm2_drafts", out)
    return out


def section_ksweep(model: Any, tokenizer: Any, args: argparse.Namespace) -> dict[str, Any]:
    from exactspec.gpu_impl import SpeculativeGenerator, generate_plain

    out: dict[str, Any] = {"section": "ksweep", "sweeps": []}
    drafts: dict[str, Any] = {}
    n = args.max_new_tokens
    for name, kind, temperature in [("int8-dynamic", "chat", 0.7), ("prompt-lookup", "code", 0.0)]:
        sampling = SamplingParams(temperature=temperature)
        ids = encode_prompt(tokenizer, PROMPTS[kind])
        draft = make_draft(name, model, drafts)
        ks = [1, 2, 3, 4, 6, 8]
        with kernels("auto", model, draft_model_of(draft)):
            v = verification_costs(model, ids, [k + 1 for k in ks], repeats=args.micro_repeats)
            c = (
                draft_cost_ratio(draft_model_of(draft), model, ids, repeats=args.micro_repeats)[
                    "c"
                ]["median"]
                if draft_model_of(draft) is not None
                else 0.0
            )
        cost_gen = SpeculativeGenerator(model, draft, k=4, sampling=sampling, adaptive_k="cost")
        cost_gen.generate(ids, 8)  # one-time cost calibration
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
            start = time.perf_counter()
            values.setdefault("cost", []).append(cost_gen.generate(ids, n, seed=rep))
            times.setdefault("cost", []).append(time.perf_counter() - start)
        rows = []
        for k in ks:
            pooled = summarise_stats(values[k])
            vk = v["v"][str(k + 1)]["median"]
            rows.append(
                {
                    "k": k,
                    "speedup_vs_plain": spread([p / s for p, s in zip(times["plain"], times[k])]),
                    "alpha": pooled["alpha"],
                    "alpha_per_position": pooled["alpha_per_position"],
                    "tokens_per_target_call": pooled["tokens_per_target_call"],
                    "c_micro": c,
                    "v_micro": vk,
                    "accepted_fraction": pooled["accepted_fraction"],
                    "model_micro": cost_model(
                        pooled["alpha"],
                        k,
                        c,
                        vk,
                        pooled["tokens_per_target_call"],
                        pooled["alpha_per_position"],
                    ),
                    "stats": pooled["per_run"],
                }
            )
            log(
                "ksweep",
                name,
                kind,
                temperature,
                "k",
                k,
                "x%.2f" % rows[-1]["speedup_vs_plain"]["median"],
                "pred %.2f" % rows[-1]["model_micro"]["predicted_speedup"],
                "alpha %.2f" % pooled["alpha"],
            )
        cost_runs = values["cost"]
        cost_row = {
            "policy": "cost (k in 0..8)",
            "speedup_vs_plain": spread([p / s for p, s in zip(times["plain"], times["cost"])]),
            "mean_k": sum(r.stats.proposed for r in cost_runs)
            / max(1, sum(r.stats.row_rounds for r in cost_runs)),
            "alpha": summarise_stats(cost_runs)["alpha"],
        }
        log(
            "ksweep",
            name,
            kind,
            temperature,
            "cost policy",
            "x%.2f" % cost_row["speedup_vs_plain"]["median"],
            "mean k %.2f" % cost_row["mean_k"],
        )
        out["sweeps"].append(
            {
                "draft": name,
                "prompt": kind,
                "temperature": temperature,
                "max_new_tokens": n,
                "repeats": args.repeats,
                "v": v["v"],
                "c_micro": c,
                "rows": rows,
                "cost_policy": cost_row,
            }
        )
        write_result("smollm2_ksweep", out)
    return out


def section_batch(model: Any, tokenizer: Any, args: argparse.Namespace) -> dict[str, Any]:
    from exactspec.gpu_impl import SpeculativeGenerator, generate_plain

    out: dict[str, Any] = {"section": "batch", "rows": []}
    drafts: dict[Any, Any] = {}
    n, k, temperature = args.batch_new_tokens, args.batch_k, 0.7
    sampling = SamplingParams(temperature=temperature)
    encoded = [encode_prompt(tokenizer, text)[0] for text in PROMPTS.values()]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    for name in args.batch_drafts.split(","):
        draft = make_draft(name, model, drafts)
        for batch in [int(b) for b in args.batch_sizes.split(",")]:
            ids, mask = left_pad([encoded[i % len(encoded)] for i in range(batch)], pad)
            gens = {
                "fixed": SpeculativeGenerator(model, draft, k=k, sampling=sampling),
                "cost": SpeculativeGenerator(
                    model, draft, k=k, sampling=sampling, adaptive_k="cost"
                ),
            }
            # one-time cost calibration for this batch size
            gens["cost"].generate(ids, 4, attention_mask=mask)
            t_plain: list[float] = []
            t_spec: dict[str, list[float]] = {p: [] for p in gens}
            res: dict[str, list[Any]] = {p: [] for p in gens}
            reps = args.repeats if batch <= 4 else max(2, args.repeats - 1)
            for rep in range(reps):
                start = time.perf_counter()
                generate_plain(model, ids, n, sampling=sampling, seed=rep, attention_mask=mask)
                t_plain.append(time.perf_counter() - start)
                for policy, gen in gens.items():
                    start = time.perf_counter()
                    res[policy].append(gen.generate(ids, n, seed=rep, attention_mask=mask))
                    t_spec[policy].append(time.perf_counter() - start)
            pooled = summarise_stats(res["fixed"])
            with kernels("auto", model):
                v = verification_costs(
                    model, ids[:, :-1], [k + 1], repeats=max(3, args.micro_repeats // 2)
                )["v"][str(k + 1)]["median"]
            row = {
                "batch": batch,
                "draft": name,
                "k": k,
                "temperature": temperature,
                "max_new_tokens": n,
                "repeats": reps,
                "plain_tokens_per_s": spread([batch * n / t for t in t_plain]),
                "spec_tokens_per_s": spread([batch * n / t for t in t_spec["fixed"]]),
                "speedup_vs_plain": spread([p / s for p, s in zip(t_plain, t_spec["fixed"])]),
                "cost_policy_speedup_vs_plain": spread(
                    [p / s for p, s in zip(t_plain, t_spec["cost"])]
                ),
                "cost_policy_mean_k": sum(r.stats.proposed for r in res["cost"])
                / max(1, sum(r.stats.rounds for r in res["cost"])),
                "alpha": pooled["alpha"],
                "alpha_per_position": pooled["alpha_per_position"],
                "accepted_fraction": pooled["accepted_fraction"],
                "tokens_per_target_call": pooled["tokens_per_target_call"],
                "v_micro": v,
            }
            out["rows"].append(row)
            log(
                "batch",
                name,
                batch,
                "x%.2f" % row["speedup_vs_plain"]["median"],
                "cost x%.2f (mean k %.2f)"
                % (row["cost_policy_speedup_vs_plain"]["median"], row["cost_policy_mean_k"]),
                "plain tok/s %.1f" % row["plain_tokens_per_s"]["median"],
                "alpha %.2f" % pooled["alpha"],
                "v %.2f" % v,
            )
            write_result("smollm2_batch", out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--section", default="all", choices=["costs", "drafts", "ksweep", "batch", "all"]
    )
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--micro-repeats", type=int, default=9)
    parser.add_argument("--k", type=int, default=4, help="k for the drafts section")
    parser.add_argument("--drafts", default="prompt-lookup,int8-dynamic")
    parser.add_argument("--batch-sizes", default="1,2,4,8,16")
    parser.add_argument("--batch-drafts", default="prompt-lookup,int8-dynamic")
    parser.add_argument("--batch-k", type=int, default=3)
    parser.add_argument("--batch-new-tokens", type=int, default=48)
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's default)"
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = load()
    sections = ["costs", "drafts", "ksweep", "batch"] if args.section == "all" else [args.section]
    for section in sections:
        log("section", section)
        {
            "costs": section_costs,
            "drafts": section_drafts,
            "ksweep": section_ksweep,
            "batch": section_batch,
        }[section](model, tokenizer, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
