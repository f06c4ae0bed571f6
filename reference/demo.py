"""`exactspec reference-demo`: the seed article's four-word demo, computed by the oracle.

Target p = (0.50, 0.30, 0.15, 0.05) against three drafts (uniform, 60% of the way to the target,
identical), k = 4: acceptance rate, expected tokens per target call, a simulated first-token law, and
the exact rational check that the first emitted token has law p.
"""

from __future__ import annotations

import argparse
from fractions import Fraction

import numpy as np

from .laws import acceptance_rate, first_token_marginal, round_distribution
from .rules import verify_batch
from .speedup import expected_tokens

TARGET = [Fraction(50, 100), Fraction(30, 100), Fraction(15, 100), Fraction(5, 100)]
UNIFORM = [Fraction(1, 4)] * 4


def demo_drafts() -> dict[str, list[Fraction]]:
    """The three drafts of the seed demo, as exact rationals."""
    sixty_percent = [Fraction(6, 10) * p + Fraction(4, 10) * u for p, u in zip(TARGET, UNIFORM)]
    return {"uniform": UNIFORM, "60% of the way": sixty_percent, "identical": list(TARGET)}


def simulate_first_token(
    p: np.ndarray, q: np.ndarray, k: int, rounds: int, seed: int
) -> np.ndarray:
    """Empirical law of the first emitted token over `rounds` independent rounds (drafts drawn from q)."""
    rng = np.random.default_rng(seed)
    drafts = rng.choice(p.size, size=(rounds, k), p=q)
    tokens, _ = verify_batch(
        np.broadcast_to(p, (rounds, k + 1, p.size)),
        np.broadcast_to(q, (rounds, k, p.size)),
        drafts,
        rng,
    )
    return np.bincount(tokens[:, 0], minlength=p.size) / rounds


def demo_rows(k: int = 4, rounds: int = 20_000, seed: int = 0) -> list[dict]:
    """One record per draft: acceptance rate, E[tokens per target call], simulated and exact first-token law."""
    p = np.array([float(v) for v in TARGET])
    records = []
    for name, q_exact in demo_drafts().items():
        q = np.array([float(v) for v in q_exact])
        rate = float(acceptance_rate(TARGET, q_exact))
        law = round_distribution([TARGET] * (k + 1), [q_exact] * k)
        exact_marginal = first_token_marginal(law, len(TARGET))
        records.append(
            {
                "draft": name,
                "acceptance_rate": rate,
                "expected_tokens": expected_tokens(rate, k),
                "simulated_first_token": simulate_first_token(p, q, k, rounds, seed).tolist(),
                "exact_first_token_equals_p": exact_marginal == TARGET,
                "exact_law_sums_to_one": sum(law.values()) == 1,
            }
        )
    return records


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-k", type=int, default=4, help="draft tokens per round (default 4)")
    parser.add_argument(
        "--rounds", type=int, default=20_000, help="simulated rounds (default 20,000)"
    )
    parser.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    print("Target p = (0.50, 0.30, 0.15, 0.05), k =", args.k)
    print(
        f"{'draft':<16}{'alpha':>7}{'E[tokens/call]':>16}   simulated first-token law ({args.rounds:,} rounds)   exact == p"
    )
    all_exact = True
    for record in demo_rows(args.k, args.rounds, args.seed):
        simulated = " / ".join(f"{v:.3f}" for v in record["simulated_first_token"])
        exact = record["exact_first_token_equals_p"] and record["exact_law_sums_to_one"]
        all_exact &= exact
        print(
            f"{record['draft']:<16}{record['acceptance_rate']:>7.2f}{record['expected_tokens']:>16.2f}   {simulated:<48}{'yes (rational)' if exact else 'NO'}"
        )
    return 0 if all_exact else 1
