"""Print the SmolLM2 benchmark results (benchmarks/results/smollm2_*.json) as compact tables."""

from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _m(entry, key="median"):
    return entry[key] if isinstance(entry, dict) else entry


def _load(name):
    path = RESULTS / f"smollm2_{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _x(entry) -> str:
    return f"x{entry['median']:.2f} [{entry['min']:.2f}, {entry['max']:.2f}]"


def main() -> int:
    costs = _load("costs")
    if costs:
        print("== costs (v(n) = verify n tokens / decode 1; c = draft step / target step)")
        if "cpu_matmul" in costs:
            print(f"  CPU kernel plan (rows -> kernel): {costs['cpu_matmul']['plan_in_use']}")
        for key, label in (("v", "auto kernels"), ("v_stock", "stock F.linear")):
            for kind, v in costs.get(key, {}).items():
                print(
                    f"  v[{kind}, {label}]: "
                    + " ".join(f"{n}:{x['median']:.2f}" for n, x in v["v"].items())
                    + f"  (t1 = {v['t1_s']['median'] * 1e3:.0f} ms)"
                )
        for key, label in (("c", "auto kernels"), ("c_stock", "stock F.linear")):
            for name, c in costs.get(key, {}).items():
                print(
                    f"  c[{name}, {label}] = {c['c']['median']:.3f}  [{c['c']['min']:.3f}, {c['c']['max']:.3f}]"
                )
        for row in costs.get("alpha_probe", []):
            print(
                f"  alpha {row['draft']:>14} T={row['temperature']} {row['prompt']:>13}: {row['alpha']:.3f}"
                f"  single-run speedup {row['speedup_single_run']:.2f}"
            )
    drafts = _load("drafts")
    if drafts:
        print(f"== drafts (k={drafts['k']}): speedups, median [min, max] over interleaved repeats")
        for cfg in drafts["configs"]:
            tps = cfg["tokens_per_s"]
            print(
                f"  {cfg['prompt']:>13} T={cfg['temperature']}: plain {_m(tps['plain']):.1f} tok/s "
                f"(stock kernels {_m(tps['plain_stock']):.1f}), HF generate {_m(tps['hf_generate']):.1f} tok/s; "
                f"our plain vs HF generate {_x(cfg['plain_vs_hf_generate'])}"
            )
            for name, d in cfg["drafts"].items():
                cp, sk = d["cost_policy"], d["stock_kernels"]
                print(
                    f"    {name:>14}: fixed k {_x(d['speedup_vs_plain'])}, decode phase {_x(d['decode_speedup_vs_plain'])} "
                    f"= {d['prediction_ratio']:.2f} of pred {d['model_micro']['predicted_speedup']:.2f} "
                    f"(alpha {d['alpha']:.2f}, c {d['c_micro']:.2f}, v {d['v_micro']:.2f}, tpc {d['tokens_per_target_call']:.2f})"
                )
                print(
                    f"    {'':>14}  cost policy {_x(cp['speedup_vs_plain'])} (mean k {cp['mean_k']:.2f}); "
                    f"stock kernels {_x(sk['speedup_vs_plain_stock'])}; HF assisted vs HF generate "
                    f"{_x(d['hf_assisted_speedup_vs_hf_generate'])}"
                )
                print(
                    f"    {'':>14}  ours / HF assisted: fixed {_x(d['ours_vs_hf_assisted'])}, cost "
                    f"{_x(cp['ours_vs_hf_assisted'])}, stock kernels {_x(sk['ours_vs_hf_assisted'])}"
                )
    ksweep = _load("ksweep")
    if ksweep:
        print(
            "== k sweep (pred = E[N] from per-position alphas / (c k + v(k+1)); a1 = alpha at position 1)"
        )
        for sweep in ksweep["sweeps"]:
            print(
                f"  {sweep['draft']} {sweep['prompt']} T={sweep['temperature']}: "
                + "  ".join(
                    f"k={r['k']} x{r['speedup_vs_plain']['median']:.2f} (pred "
                    f"{r['model_micro'].get('predicted_speedup_per_position', r['model_micro']['predicted_speedup']):.2f}, "
                    f"a1 {r['alpha_per_position'][0]:.2f})"
                    for r in sweep["rows"]
                )
            )
            cost = sweep.get("cost_policy")
            if cost:
                print(
                    f"    cost policy: {_x(cost['speedup_vs_plain'])}, mean k {cost['mean_k']:.2f}"
                )
    batch = _load("batch")
    if batch:
        print("== batch sweep (T = 0.7, mixed prompts)")
        for r in batch["rows"]:
            print(
                f"  B={r['batch']:>2} {r['draft']:>13} k={r['k']}: {_x(r['speedup_vs_plain'])}  cost policy "
                f"{_x(r['cost_policy_speedup_vs_plain'])} (mean k {r['cost_policy_mean_k']:.2f})  plain "
                f"{r['plain_tokens_per_s']['median']:.1f} tok/s, spec {r['spec_tokens_per_s']['median']:.1f} tok/s, "
                f"alpha {r['alpha']:.2f}, v(k+1) {r['v_micro']:.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
