"""The diagnosis's family fits: each family's grid evaluator against its law evaluated value by value (the baseline),
on the candidate tokens of committed NOT_EXACT certificates.

    .venv/bin/python benchmarks/bench_diagnosis.py            # 5 interleaved repeats (~1 min)
    .venv/bin/python benchmarks/bench_diagnosis.py --repeats 2

`fit` reads a family's log-likelihood at every value of its grid (221 temperatures, 101 mixture weights, every k).
The baseline builds the family's whole (n, width) law at each value and reads it at the tokens
(`log_likelihood(table, family.law(table, v))`); the candidate is the family's `grid_log_likelihoods` (the mixture
families from each row's two masses at its token, top-k from running totals). The families that read the draft's law
need a draft file, which these certificates do not have: they are not timed here. Both are run on the same table, interleaved repeat by repeat; the ratio is baseline time / candidate time
(median, min, max), and the largest difference between their log-likelihoods is recorded beside it. Writes
benchmarks/results/diagnosis_fit.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved, log, spread, write_result  # noqa: E402

import numpy as np  # noqa: E402

from exactspec.conformance.engine.checks import prompts  # noqa: E402
from exactspec.conformance.engine.diagnosis.families import FAMILIES, log_likelihood  # noqa: E402
from exactspec.conformance.engine.diagnosis.tokens import token_tables  # noqa: E402
from exactspec.conformance.engine.sample_folder import sample_file_in  # noqa: E402
from exactspec.conformance.engine.samples import read_samples  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
#: NOT_EXACT certificates whose candidate tokens are fitted (committed with their sample files).
CERTIFICATES = ("speculative-example-t0.7", "vllm-selfdraft-t0.7")


def candidate_table(name: str):
    """The candidate's token table of a committed certificate (every position its files hold)."""
    folder = REPO / "docs" / "certificates" / "engine" / name
    reference, candidate = (
        read_samples(sample_file_in(folder, role)) for role in ("reference", "candidate")
    )
    positions = int(reference.header.request_defaults["max_tokens"])
    table, _ = token_tables(prompts(reference, candidate), positions)
    return table


def compare(table, family, repeats: int) -> dict:
    """One family on one table: the per-value baseline against the grid evaluator."""
    grid = family.grid(table)

    def baseline():
        return np.array([log_likelihood(table, family.law(table, float(v))) for v in grid])

    def candidate():
        return family.grid_log_likelihoods(table, grid)

    runs = interleaved({"baseline": baseline, "candidate": candidate}, repeats)
    ratios = [b[0] / c[0] for b, c in zip(runs["baseline"], runs["candidate"])]
    difference = float(np.max(np.abs(runs["baseline"][0][1] - runs["candidate"][0][1])))
    return {
        "grid_values": int(grid.size),
        "baseline_s": spread([t for t, _ in runs["baseline"]]),
        "candidate_s": spread([t for t, _ in runs["candidate"]]),
        "ratio": spread(ratios),
        "largest_difference_nats": difference,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats (default 5)")
    args = parser.parse_args(argv)
    results = {}
    for name in CERTIFICATES:
        table = candidate_table(name)
        log(f"{name}: {table.size} tokens, width {table.probs.shape[1]}")
        results[name] = {"tokens": table.size, "families": {}}
        for family in FAMILIES:
            if family.grid_log_likelihoods is None or family.needs_draft:
                continue
            row = compare(table, family, args.repeats)
            results[name]["families"][family.name] = row
            log(
                f"  {family.name:15s} x{row['ratio']['median']:.1f} "
                f"({row['ratio']['min']:.1f}-{row['ratio']['max']:.1f}); "
                f"largest difference {row['largest_difference_nats']:.2g} nats"
            )
    path = write_result(
        "diagnosis_fit",
        {"repeats": args.repeats, "certificates": results, "what": __doc__.splitlines()[0]},
    )
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
