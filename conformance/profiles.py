"""Profiles: how hard the suite looks. Each states a total false-fail rate (split over the
statistical checks with `stat_tests.ErrorBudget`, Bonferroni) and a target total-variation deviation
epsilon; the number of rounds per case is *computed* from epsilon, the per-check alpha, beta and the
bins of that case's law (`stat_tests.required_samples`, iterated to a fixed point because pooling
makes the bin count depend on n) -- never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from exactspec.stat_tests import ErrorBudget, required_samples
from exactspec.stat_tests.binning import pool_bins

from exactspec.conformance.cases import Case


@dataclass(frozen=True)
class Profile:
    name: str
    epsilon_tv: float  # per-case target: the primary check detects binned TV >= this w.p. >= 1 - beta
    total_false_fail: float  # P(any statistical check fails | implementation exact) <= this
    beta: float  # per-check false-pass rate at the stated deviation
    max_bins: int  # cap on bins (min_expected grows with n so bins stay <= max_bins)
    max_rounds: int  # safety cap on rounds per case (reported if it binds)
    invariant_rounds: int  # rounds per case with an ordinary Generator for the hard invariants
    adversarial_rounds: int  # rounds per case with the boundary-heavy Generator
    hypothesis_examples: int  # generated cases for the invariant property test
    hypothesis_rounds: int  # rounds per generated case
    description: str

    def min_expected(self, n: int) -> float:
        return max(20.0, n / self.max_bins)


PROFILES: dict[str, Profile] = {
    "quick": Profile("quick", 0.05, 1e-6, 0.001, 40, 60_000, 200, 200, 15, 40,
                     "CI: certifies a NumPy-speed implementation in well under a minute on 2 cores."),
    "standard": Profile("standard", 0.02, 1e-6, 0.001, 80, 400_000, 1000, 1000, 60, 60,
                        "Default: minutes; detects 2% TV per case."),
    "full": Profile("full", 0.01, 1e-6, 0.001, 150, 2_000_000, 5000, 5000, 300, 100,
                    "Certificate grade: detects 1% TV per case; tens of minutes for NumPy-speed code."),
}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; choose one of {sorted(PROFILES)}") from None


def statistical_checks(case: Case) -> list[str]:
    """Names of the statistical checks run on a case (each gets an equal share of the budget)."""
    names = [f"position_{j}" for j in range(1, case.k + 2)]
    if case.stream_enumerable:
        names.append("completed_stream")
    if case.enumerable:
        names.append("tuple_law")
    names.append("tokens_per_round")
    return names


def budget_for(profile: Profile, cases: list[Case]) -> ErrorBudget:
    n_checks = sum(len(statistical_checks(c)) for c in cases)
    return ErrorBudget(total_false_fail=profile.total_false_fail, n_checks=n_checks, beta=profile.beta)


def primary_laws(case: Case) -> dict[str, np.ndarray]:
    """The laws the case's sample size is planned for: the completed stream and the whole tuple when
    enumerable, else p_1 (the first token, seen in every round)."""
    laws = {}
    if case.stream_enumerable:
        laws["completed_stream"] = case.stream_law
    if case.enumerable:
        laws["tuple_law"] = case.tuple_law[1]
    if not laws:
        laws["position_1"] = case.target_probs[0]
    return laws


def n_bins(law: np.ndarray, n: int, profile: Profile) -> int:
    return max(2, int(pool_bins(np.asarray(law, float), float(n), profile.min_expected(n))[1].size))


#: Large-vocabulary cases cost O(V) per round (a 32k row is ~10 ms on a CPU torch implementation), so
#: their per-case target is looser by this factor; the report states the resulting detectable TV.
LARGE_VOCAB_EPSILON_SCALE = 2.5


def case_epsilon(case: Case, profile: Profile) -> float:
    return profile.epsilon_tv * (LARGE_VOCAB_EPSILON_SCALE if "large_vocab" in case.tags else 1.0)


def plan_rounds(case: Case, profile: Profile, alpha: float) -> dict:
    """Rounds for `case` so its primary check detects TV >= epsilon w.p. >= 1 - beta at level alpha."""
    best = None
    eps = case_epsilon(case, profile)
    for name, law in primary_laws(case).items():
        n = required_samples(eps, 2, alpha, profile.beta)
        for _ in range(60):
            b = n_bins(law, n, profile)
            n_new = required_samples(eps, b, alpha, profile.beta)
            if n_new <= n:
                break
            n = n_new
        if best is None or n > best[1]:
            best = (name, n, law)
    name, n, law = best
    capped = n > profile.max_rounds
    n = min(n, profile.max_rounds)
    return {"n": int(n), "bins": n_bins(law, n, profile), "capped": capped, "primary": name, "epsilon_tv": eps}
