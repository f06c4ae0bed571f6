"""Print results/cost_policy.json as the Markdown table in benchmarks/README.md, so the table is regenerated, not typed."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

LOADS = {0: "idle", 1: "1 busy core", 2: "2 busy cores"}
HEADER = (
    "| configuration | cost policy | fixed k = 4 | best fixed k | cost ÷ best fixed | transformers (k = 4) "
    "| plain A/A |\n|---|---|---|---|---|---|---|"
)


def _median(entry) -> str:
    """A ×-figure from a {median, ...} block, or a dash where the contender did not run."""
    return f"×{entry['median']:.2f}" if isinstance(entry, dict) else "–"


def row(configuration: dict) -> str:
    """One configuration's line: medians over its repeats (ratios are medians of per-repeat ratios)."""
    name = (
        f"{configuration['family']}, T = {configuration['temperature']:g}, "
        f"{LOADS.get(configuration['background_cores'], str(configuration['background_cores']))}"
    )
    best = f"{_median(configuration['best_fixed_speedup'])} (k = {configuration['best_fixed_k']})"
    regret = configuration["cost_over_best_fixed"]["median"]
    return (
        f"| {name} | {_median(configuration['cost_speedup'])} | {_median(configuration['fixed_speedup'])} "
        f"| {best} | {regret:.2f} | {_median(configuration.get('hf_prompt_lookup_speedup'))} "
        f"| {_median(configuration['plain_again_ratio'])} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "path",
        nargs="?",
        type=Path,
        default=Path(__file__).resolve().parent / "results" / "cost_policy.json",
    )
    results = json.loads(parser.parse_args().path.read_text())
    print(HEADER)
    for configuration in sorted(results["configurations"], key=lambda c: c["background_cores"]):
        print(row(configuration))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
