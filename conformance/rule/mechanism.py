"""Which mechanism of the zoo a failing rule behaves like: at the rule level the draft's law is known, so the
candidate's outcomes on a failing case are compared with every zoo member's (`mutants.zoo`: the named bugs and the
exact variants) on the same case and the same draft tokens, and the members that explain them best are named.

For each member the outcome law is estimated from `ROUNDS` rounds (the accepted count, and at each position the
token among the rounds that reach it), smoothed by half a count per outcome; the candidate's own rounds (the same
number, the same drafts) are scored under each, and a member's gain is its log-likelihood over the standard rule's
(`Rule`, exact): the best gain names the mechanism. Descriptive: it runs after the verdict and never changes it.
Only cases of at most `MAX_VOCAB` tokens are diagnosed (the outcome laws are estimated token by token).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ContractViolation, ImplementationError
from .cases import Case
from .harness import Harness
from .mutants.zoo import ZOO

#: Rounds per zoo member and for the candidate, the largest vocabulary diagnosed, the failing cases diagnosed.
ROUNDS, MAX_VOCAB, CASES_DIAGNOSED = 10_000, 64, 3
#: The seed of the diagnosis's rounds (the drafts are the same for every member).
SEED = 5150
#: A member is named when it gains at least this over the exact rule (nats): a likelihood ratio of 20 per member.
NAMED_FROM = float(np.log(20.0 * len(ZOO)))


def outcome_counts(tokens: np.ndarray, counts: np.ndarray, k: int, vocab: int) -> np.ndarray:
    """One vector of counts: the accepted count (k + 1 bins), then per position j the emitted token among the rounds
    that reach j (V bins each)."""
    out = [np.bincount(counts, minlength=k + 1)[: k + 1]]
    for j in range(k + 1):
        reached = counts >= j
        out.append(np.bincount(tokens[reached, j], minlength=vocab)[:vocab])
    return np.concatenate(out).astype(float)


def _law(features: np.ndarray, k: int, vocab: int) -> np.ndarray:
    """Log probabilities of each block of `outcome_counts`, smoothed by half a count."""
    logs, start = [], 0
    for size in [k + 1] + [vocab] * (k + 1):
        block = features[start:start + size] + 0.5
        logs.append(np.log(block / block.sum()))
        start += size
    return np.concatenate(logs)


def _features(harness: Harness, case: Case) -> np.ndarray:
    rounds = harness.run(case, ROUNDS, SEED)
    return outcome_counts(np.where(rounds.tokens < 0, 0, rounds.tokens), rounds.counts, case.k, case.V)


def name_mechanism(candidate: Harness, case: Case) -> dict:
    """The zoo members that best explain the candidate's rounds on `case`, best first, with their gain over exact."""
    observed = _features(candidate, case)
    scores, crashed = {}, []
    for spec in ZOO:
        try:
            features = _features(Harness(spec.make(), spec.name), case)
        except (ImplementationError, ContractViolation):  # a member that breaks the contract here explains nothing
            crashed.append(spec.name)
            continue
        scores[spec.name] = float(observed @ _law(features, case.k, case.V))
    exact = scores["Rule"]
    ranked = sorted(((name, score - exact) for name, score in scores.items()), key=lambda item: -item[1])
    best, gain = ranked[0]
    models = {spec.name: spec.models for spec in ZOO}
    named = best if gain >= NAMED_FROM and best != "Rule" else None
    tied = [name for name, g in ranked[1:] if named and abs(g - gain) <= 1e-6 * max(1.0, abs(gain))]
    return {"case": case.name, "named": named, "models": models.get(named) if named else None, "tied": tied,
            "ranking": [{"member": name, "gain_nats": round(g, 2)} for name, g in ranked[:5]],
            "rounds": ROUNDS, "members_that_break_the_contract_here": crashed}


def diagnose_rule(candidate: Any, cases: list[Case], records: list) -> dict | None:
    """The mechanism of the failing cases with the most evidence (at most CASES_DIAGNOSED, small vocabularies
    only), and the member most of them name; None when none can be diagnosed."""
    by_case = {c.name: c for c in cases}
    failing = sorted({r.case for r in records if not r.passed and r.category in ("exactness", "standard_rule")
                      and r.case in by_case and by_case[r.case].V <= MAX_VOCAB},
                     key=lambda name: min(r.result.p_value if r.result.p_value is not None else 1.0
                                          for r in records if r.case == name and not r.passed))
    if not failing or not callable(getattr(candidate.impl if isinstance(candidate, Harness) else candidate,
                                           "verify", None)):
        return None
    harness = candidate if isinstance(candidate, Harness) else Harness(candidate, "candidate")
    per_case = [name_mechanism(harness, by_case[name]) for name in failing[:CASES_DIAGNOSED]]
    named = [entry["named"] for entry in per_case if entry["named"]]
    best = max(set(named), key=named.count) if named else None
    tied = sorted({t for entry in per_case if entry["named"] == best for t in entry["tied"]})
    also = f"; tied with {', '.join(tied)}: the same law on these cases" if tied else ""
    models = {spec.name: spec.models for spec in ZOO}
    text = (f"{best}: {models.get(best)} (the best fit on {named.count(best)} of "
            f"{len(per_case)} failing cases{also})" if best else
            "none of the zoo's mechanisms explains the failing cases better than the exact rule")
    return {"mechanism": {"family": best, "text": text}, "cases": per_case}


__all__ = ["NAMED_FROM", "ROUNDS", "diagnose_rule", "name_mechanism", "outcome_counts"]
