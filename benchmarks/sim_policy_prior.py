"""The cost policy's prior for later draft positions, swept on the tests' simulated machines.

    python benchmarks/sim_policy_prior.py [--seeds 200] [--priors 0.6,0.7,0.75,0.8]

For each prior mean of the later positions' acceptance (`CostModelK(later_prior_acceptance_rate=...)`;
the first position's stays 0.6) and each scenario (per-position acceptance, the slope of v(n) = 1 + slope
(n - 1), and an answer length or 40 rounds), the policy's mean throughput over `--seeds` seeds divided by
the best fixed k's in 0..8, with `simulate` from tests/test_gpu_k_policy.py (the simulator the regret tests
use).  The scenarios are the regret tests' four, the same acceptance on machines where width is nearly
free (slope 0.03, as the packed CPU kernels made it), 23- and 64-token copies, chat through a prompt
lookup that finds a match in 35 % of the rounds (the others are plain steps whatever k was chosen), and
code and the demo at T = 0 as the machine measured them (cost_policy_7daa0f3.json@03759a6).  Writes
benchmarks/results/policy_prior_sweep.json; LATER_PRIOR_ACCEPTANCE in gpu_impl/cost/k_policy.py quotes it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import log, write_result  # noqa: E402

from tests.test_gpu_k_policy import throughputs  # noqa: E402

#: (name, acceptance per position, slope of v(n), answer tokens or None for 40 rounds[, share of rounds with
#: a draft to propose: prompt lookup finds no match in the others])
SCENARIOS = [
    ("copy, width nearly free", [0.9] * 8, 0.05, None),
    ("doubtful first token, then a copy", [0.4] + [0.9] * 7, 0.12, None),
    ("weak draft at T = 0.7", [0.6, 0.5, 0.4, 0.3, 0.2, 0.2, 0.2, 0.2], 0.15, None),
    ("chat, width dear", [0.1] * 8, 0.3, None),
    ("chat, width nearly free", [0.1] + [0.5] * 7, 0.03, None),
    ("weak draft, width nearly free", [0.6, 0.5, 0.4, 0.3, 0.2, 0.2, 0.2, 0.2], 0.03, None),
    ("23-token copy", [0.92] * 8, 0.03, 23),
    ("23-token answer, doubtful first token", [0.4] + [0.95] * 7, 0.03, 23),
    ("64-token copy", [0.92] * 8, 0.05, 64),
    ("64-token answer, doubtful first token", [0.4] + [0.9] * 7, 0.05, 64),
    ("code at T = 0.7, width nearly free", [0.3, 0.9, 0.8, 0.8, 0.7, 0.7, 0.7, 0.7], 0.03, None),
    # roughly SmolLM2 chat through prompt lookup at T = 0.7 with one thread: a match in ~35 % of the rounds
    ("chat, lookup matching 35 % of rounds", [0.13] + [0.4] * 7, 0.0625, None, 0.35),
    # as cost_policy_7daa0f3.json@03759a6 measured SmolLM2 through prompt lookup at T = 0, idle (alpha per position in the
    # policy's notes, v(9) = 1.27): code (64 tokens) and the README's demo (23 tokens)
    ("code at T = 0, as measured", [0.76, 0.88, 0.88] + [0.99] * 5, 0.034, 64),
    ("demo, as measured", [0.76, 0.88, 0.88] + [0.99] * 5, 0.034, 23),
]


def kept_of_best_fixed(
    later_prior: float,
    acceptance: list[float],
    slope: float,
    answer: int | None,
    seeds: int,
    match_rate: float = 1.0,
) -> float:
    """The policy's mean throughput over the best fixed k's (0..8) on one simulated machine and draft."""
    policy, fixed = throughputs(
        acceptance,
        slope,
        64 if answer else 40,
        seeds,
        {"later_prior_acceptance_rate": later_prior},
        answer_tokens=answer,
        match_rate=match_rate,
    )
    return policy / max(fixed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--priors", default="0.6,0.7,0.75,0.8,0.85")
    args = parser.parse_args()
    results = {}
    for prior in [float(p) for p in args.priors.split(",")]:
        kept = {
            name: kept_of_best_fixed(prior, *rest[:3], args.seeds, *rest[3:])
            for name, *rest in SCENARIOS
        }
        worst = min(kept, key=kept.get)
        mean = statistics.geometric_mean(kept.values())
        results[str(prior)] = {
            "kept_of_best_fixed": kept,
            "worst": worst,
            "worst_kept": kept[worst],
            "geometric_mean_kept": mean,
        }
        log(
            f"later prior {prior}: worst {kept[worst]:.3f} ({worst}), geometric mean {mean:.3f}; "
            + ", ".join(f"{name} {value:.3f}" for name, value in kept.items())
        )
    path = write_result(
        "policy_prior_sweep", {"seeds": args.seeds, "scenarios": SCENARIOS, "priors": results}
    )
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
