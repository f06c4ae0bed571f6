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


def main() -> int:
    costs = _load("costs")
    if costs:
        print("== costs (v(n) = verify n tokens / decode 1; c = draft step / target step)")
        for kind, v in costs["v"].items():
            print(f"  v[{kind}]: " + " ".join(f"{n}:{x['median']:.2f}" for n, x in v["v"].items())
                  + f"  (t1 = {v['t1_s']['median'] * 1e3:.0f} ms)")
        for name, c in costs["c"].items():
            print(f"  c[{name}] = {c['c']['median']:.3f}  [{c['c']['min']:.3f}, {c['c']['max']:.3f}]")
        for row in costs.get("alpha_probe", []):
            print(f"  alpha {row['draft']:>14} T={row['temperature']} {row['prompt']:>13}: {row['alpha']:.3f}"
                  f"  single-run speedup {row['speedup_single_run']:.2f}")
    drafts = _load("drafts")
    if drafts:
        print(f"== drafts (k={drafts['k']}): speedup vs our plain loop, median [min, max]; prediction E[N]/(ck+v(k+1))")
        for cfg in drafts["configs"]:
            tps = cfg["tokens_per_s"]
            print(f"  {cfg['prompt']:>13} T={cfg['temperature']}: plain {_m(tps['plain']):.1f} tok/s, "
                  f"HF generate {_m(tps.get('hf_generate', {'median': float('nan')})):.1f} tok/s")
            for name, d in cfg["drafts"].items():
                s = d["speedup_vs_plain"]
                hf = d.get("hf_assisted_speedup_vs_hf_generate")
                print(f"    {name:>14}: x{s['median']:.2f} [{s['min']:.2f}, {s['max']:.2f}]  alpha {d['alpha']:.2f} "
                      f"tpc {d['tokens_per_target_call']:.2f}  c {d['c_micro']:.2f}/{d['c_loop']:.2f}(loop)  "
                      f"v {d['v_micro']:.2f}/{d['v_loop']:.2f}(loop)  pred {d['model_micro']['predicted_speedup']:.2f} "
                      f"(loop {d['model_loop']['predicted_speedup']:.2f})"
                      + (f"  HF assisted x{hf['median']:.2f}" if hf else ""))
    ksweep = _load("ksweep")
    if ksweep:
        print("== k sweep")
        for sweep in ksweep["sweeps"]:
            print(f"  {sweep['draft']} {sweep['prompt']} T={sweep['temperature']}: " + "  ".join(
                f"k={r['k']} x{r['speedup_vs_plain']['median']:.2f} (pred "
                f"{r['model_micro'].get('predicted_speedup_per_position', r['model_micro']['predicted_speedup']):.2f}, "
                f"a1 {r['alpha_per_position'][0]:.2f})" for r in sweep["rows"]))
            print("    (pred = E[N] from per-position alphas / (c k + v(k+1)); a1 = alpha at position 1)")
    batch = _load("batch")
    if batch:
        print("== batch sweep")
        for r in batch["rows"]:
            print(f"  B={r['batch']:>2} {r['draft']} k={r['k']}: x{r['speedup_vs_plain']['median']:.2f} "
                  f"[{r['speedup_vs_plain']['min']:.2f}, {r['speedup_vs_plain']['max']:.2f}]  plain "
                  f"{r['plain_tokens_per_s']['median']:.1f} tok/s, spec {r['spec_tokens_per_s']['median']:.1f} tok/s, "
                  f"alpha {r['alpha']:.2f}, v(k+1) {r['v_micro']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
