"""Print results/dtypes.json as the Markdown table in benchmarks/README.md ("Beside llama.cpp"), and the
step costs the bullets under it quote, so the table is regenerated, not typed."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

HEADER = (
    "| prompt | llama.cpp plain | exactspec plain, float32 | best speculative, float32 | plain, bfloat16 "
    "| best speculative, bfloat16 | plain, int8 weights |\n|---|---|---|---|---|---|---|"
)


def _speed(runs: dict, name: str) -> str:
    """End-to-end tokens/s with the decoding phase alone in parentheses (medians), or a dash if `name` did not run."""
    if name not in runs:
        return "–"
    return f"{runs[name]['tokens_per_s']['median']:.1f} ({runs[name]['decode_tokens_per_s']['median']:.1f})"


def best_speculative(runs: dict, dtype: str) -> tuple[str, float]:
    """The fastest speculative run of a dtype (median end-to-end tokens/s): its contender ("cost", "k3") and speed."""
    candidates = {
        name: f["tokens_per_s"]["median"]
        for name, f in runs.items()
        if name.startswith(f"{dtype}:") and not name.endswith(":plain")
    }
    name = max(candidates, key=candidates.__getitem__)
    return name.split(":", 1)[1], candidates[name]


def _best(runs: dict, dtype: str) -> str:
    """`best_speculative` named as the README names it, and marked where its greedy text is not the same
    dtype's plain decoding's (files without the field: unmarked); a dash if the dtype did not run."""
    if f"{dtype}:plain" not in runs:
        return "–"
    run, _ = best_speculative(runs, dtype)
    label = "cost policy" if run == "cost" else f"k = {run.removeprefix('k')}"
    other_text = (
        "" if runs[f"{dtype}:{run}"].get("same_tokens_as_plain", True) else " (text ≠ plain's)"
    )
    return f"{_speed(runs, f'{dtype}:{run}')}, {label}{other_text}"


def row(family: dict) -> str:
    """One prompt family's line."""
    runs = family["runs"]
    return (
        f"| {family['family']} | {_speed(runs, 'llama.cpp:plain')} | {_speed(runs, 'float32:plain')} "
        f"| {_best(runs, 'float32')} | {_speed(runs, 'bfloat16:plain')} | {_best(runs, 'bfloat16')} "
        f"| {_speed(runs, 'int8:plain')} |"
    )


def step_costs(families: list[dict]) -> str:
    """Decode ms per token, the range over the families: llama.cpp's own figure, each dtype's plain step."""
    spans = {
        "llama.cpp": [f["runs"]["llama.cpp:plain"]["ms_per_token"]["median"] for f in families]
    }
    for dtype in ("float32", "bfloat16", "int8"):
        if all(f"{dtype}:plain" in f["runs"] for f in families):
            spans[dtype] = [
                1000 / f["runs"][f"{dtype}:plain"]["decode_tokens_per_s"]["median"]
                for f in families
            ]
    return "step ms per token: " + "; ".join(
        f"{name} {min(v):.1f}–{max(v):.1f} (median {statistics.median(v):.1f})"
        for name, v in spans.items()
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "path",
        nargs="?",
        type=Path,
        default=Path(__file__).resolve().parent / "results" / "dtypes.json",
    )
    results = json.loads(parser.parse_args().path.read_text())
    print(HEADER)
    for family in results["families"]:
        print(row(family))
    print()
    print(step_costs(results["families"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
