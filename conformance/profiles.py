"""Rule-level sample-size planning on the one profile table (`exactspec.conformance.core.profiles`).

Each profile states a total false-fail rate (split over the statistical checks the registry declares,
`core.budget_for`, Bonferroni) and a target total-variation deviation; the number of rounds per case is
*computed* from that target, the per-check false-fail rate, false_pass_rate and the bins of that case's law
(`stat_tests.required_samples`, iterated to a fixed point because pooling makes the bin count depend on
n) -- never guessed. It plans against the critical value of the tests the checks run (`checks.PLANNING_TAIL`:
the likelihood-ratio test's proven tail), so the stated detectable TV is that of the test that runs.
"""

from __future__ import annotations

import numpy as np

from ..stat_tests import required_samples
from ..stat_tests.binning import pool_bins

from .cases import Case
from .checks import PLANNING_TAIL
from .core.profiles import PROFILES, Profile, get_profile
from .core.registry import planned_names

__all__ = ["PROFILES", "Profile", "get_profile", "statistical_checks", "primary_laws", "n_bins", "case_epsilon",
           "plan_rounds", "LARGE_VOCAB_EPSILON_SCALE"]


def statistical_checks(case: Case) -> list[str]:
    """Names of the rule-level statistical checks run on a case (from the registry)."""
    return planned_names("rule", case)


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
    if "deep_draft" in case.tags:  # plan for the last position too (plan_rounds scales it by its reach)
        laws[f"position_{case.k + 1}"] = case.target_probs[-1]
    return laws


def n_bins(law: np.ndarray, n: int, profile: Profile) -> int:
    """Bins of `law` after pooling for n samples at the profile's min_expected."""
    return max(2, int(pool_bins(np.asarray(law, float), float(n), profile.rule.min_expected(n))[1].size))


#: Large-vocabulary cases cost O(V) per round (a 32k row is ~10 ms on a CPU torch implementation), so
#: their per-case target is looser by this factor; the report states the resulting detectable TV.
LARGE_VOCAB_EPSILON_SCALE = 2.5


def case_epsilon(case: Case, profile: Profile) -> float:
    """The case's target binned TV (the profile's, looser on large-vocabulary cases)."""
    return profile.rule.target_tv * (LARGE_VOCAB_EPSILON_SCALE if "large_vocab" in case.tags else 1.0)


def plan_rounds(case: Case, profile: Profile, false_fail_rate: float) -> dict:
    """Rounds for `case` so its primary check detects TV >= the case's target w.p. >= 1 - false_pass_rate when each check
    runs at `false_fail_rate`."""
    if not 0.0 < false_fail_rate < 1.0:
        raise ValueError(f"false_fail_rate must be in (0, 1), got {false_fail_rate!r}")
    best = None
    eps = case_epsilon(case, profile)
    for name, law in primary_laws(case).items():
        n = required_samples(eps, 2, false_fail_rate, profile.false_pass_rate, tail=PLANNING_TAIL)
        for _ in range(60):
            b = n_bins(law, n, profile)
            n_new = required_samples(eps, b, false_fail_rate, profile.false_pass_rate, tail=PLANNING_TAIL)
            if n_new <= n:
                break
            n = n_new
        if name == f"position_{case.k + 1}":  # reached by prod(alphas) of the rounds under the standard rule
            n = int(np.ceil(n / float(np.prod(case.alphas))))
        if best is None or n > best[1]:
            best = (name, n, law)
    name, n, law = best
    capped = n > profile.rule.max_rounds
    n = min(n, profile.rule.max_rounds)
    return {"n": int(n), "bins": n_bins(law, n, profile), "capped": capped, "primary": name, "epsilon_tv": eps}
