"""The checks. Every one takes the outcome of rounds (`harness.Rounds`) and returns a `CheckRecord`
wrapping a `stat_tests.TestResult` (n, false-fail rate, p-value, detectable TV), tagged with its category:

- ``contract``   hard: output type/shape/length, determinism for a fixed seed (false-fail rate 0);
- ``invariant``  hard: emitted prefix equals the draft prefix, no token of target probability 0,
                 also under an adversarial Generator (false-fail rate 0);
- ``exactness``  statistical, true of *every* exact rule: the token at each position j (given N >= j)
                 ~ p_j, p-only binning; the completed stream (the round's tokens followed by fresh
                 draws y_j ~ p_j for j > N, which is what the next rounds would emit for a target
                 whose conditionals do not depend on the context) ~ prod_j p_j, jointly;
- ``standard_rule`` statistical, true of the standard rule only: the whole emitted tuple against
                 `reference.round_distribution` (small V, k), and the law of N (tokens per round)
                 against the standard rule's exact law. An exact rule that accepts less (sampler-match)
                 passes every exactness check and fails here: "exact, but not the standard rule".

The pytest suite and `exactspec certify` call these same functions.
"""

from __future__ import annotations

import numpy as np

from ...stat_tests import TestResult, lr_gof_or_zero, assert_tokens_per_round, assert_within_support
from ...stat_tests.binning import drop_rounding_mass, pool_bins, with_unseen_category

from ..core.contract import invariant_record
from ..core.profiles import Profile
from ..core.records import CATEGORIES, CheckRecord, hard_failure
from .harness import Rounds
from ...reference.sampling import inverse_cdf

#: Every statistical check of the rule level is the likelihood-ratio test with a proven tail (`stat_tests.lr_tail`:
#: exact for <= 3 bins, Agrawal's bound otherwise), so its false-fail rate is a theorem at the rate it runs at.
GOF_METHOD = "lr"

__all__ = [
    "CATEGORIES",
    "CheckRecord",
    "hard_failure",
    "invariant_check",
    "position_checks",
    "tuple_law_check",
    "completed_stream_check",
    "count_law_check",
]


def invariant_check(impl: str, rounds: Rounds, label: str = "invariants") -> CheckRecord:
    """Emitted prefix == draft prefix; every emitted token has target probability > 0 at its position."""
    case, tok, cnt, x = rounds.case, rounds.tokens, rounds.counts, rounds.drafts
    k = case.k
    problems = []
    pos = np.arange(k)[None, :]
    accepted = pos < (cnt[:, None] - 1)
    mismatch = accepted & (tok[:, :k] != x)
    if mismatch.any():
        r, j = map(int, np.argwhere(mismatch)[0])
        problems.append(
            f"{int(mismatch.any(axis=1).sum())} rounds emit a prefix that is not the draft prefix "
            f"(first: round {r}, position {j + 1}: emitted {tok[r, : cnt[r]].tolist()}, drafts {x[r].tolist()})"
        )
    emitted = np.arange(k + 1)[None, :] < cnt[:, None]
    safe = np.where(emitted, tok, 0)
    p_at = rounds.target_at(safe)  # each round's own rows (pooled cases vary by round)
    zero = emitted & (p_at <= 0)
    if zero.any():
        r, j = map(int, np.argwhere(zero)[0])
        problems.append(
            f"{int(zero.any(axis=1).sum())} rounds emit a token of target probability 0 (first: round {r}, "
            f"position {j + 1}, token {int(tok[r, j])}, p_{j + 1}={p_at[r, j]!r}; "
            f"emitted {tok[r, : cnt[r]].tolist()}, drafts {x[r].tolist()})"
        )
    return invariant_record(
        impl,
        case.name,
        label,
        rounds.n,
        problems,
        "emitted prefix == draft prefix and no p=0 token",
    )


def _plot_data(counts: np.ndarray, law: np.ndarray, min_expected: float, labels=None) -> dict:
    """Observed vs expected counts on the test's own (p-only) bins, at most 40 largest bins."""
    n = counts.sum()
    if n == 0:
        return {}
    bins, bin_prob = pool_bins(law, float(n), min_expected)
    pos = bins >= 0
    obs = np.bincount(bins[pos], weights=counts[pos], minlength=bin_prob.size)
    zero_mass = float(counts[~pos].sum()) / n
    order = np.argsort(-bin_prob, kind="stable")[:40]
    tv = 0.5 * (np.abs(obs / n - bin_prob).sum() + zero_mass)
    # Under exactness the observed binned TV is not 0: its mean is about sum_b sqrt(p_b (1-p_b) / (2 pi n)).
    null_tv = float(np.sqrt(bin_prob * (1 - bin_prob) / (2 * np.pi * n)).sum())
    return {
        "observed": obs[order].tolist(),
        "expected": (n * bin_prob[order]).tolist(),
        "bin_tokens": [np.flatnonzero(bins == b)[:3].tolist() for b in order],
        "zero_prob_observed": int(counts[~pos].sum()),
        "observed_tv_binned": float(tv),
        "observed_tv_binned_null_mean": null_tv,
    }


def _add_tv(res: TestResult, plot: dict) -> None:
    """Record the measured deviation (binned TV, and its mean under exactness) in the result."""
    if plot:
        res.details["observed_tv_binned"] = plot["observed_tv_binned"]
        res.details["observed_tv_binned_null_mean"] = plot["observed_tv_binned_null_mean"]


def _gof(
    name: str, counts: np.ndarray, law: np.ndarray, false_fail_rate: float, profile: Profile
) -> tuple[TestResult, dict]:
    me = profile.rule.min_expected(int(counts.sum()))
    return lr_gof_or_zero(
        name, counts, law, false_fail_rate, profile.false_pass_rate, me
    ), _plot_data(counts, law, me)


def position_checks(
    impl: str, rounds: Rounds, false_fail_rate: float, profile: Profile
) -> list[CheckRecord]:
    """For j = 1..k+1: the token at position j, over rounds that emit >= j tokens, has law p_j."""
    case = rounds.case
    out = []
    for j in range(1, case.k + 2):
        sel = rounds.counts >= j
        name = f"position_{j}"
        law = case.target_probs[j - 1]
        if not sel.any():
            res = TestResult(
                name,
                0.0,
                1.0,
                0,
                0.0,
                profile.false_pass_rate,
                float("nan"),
                True,
                f"{name}: no round reached position {j}: nothing to test",
                {"skipped": True},
            )
            out.append(CheckRecord(impl, case.name, name, "exactness", res))
            continue
        counts = np.bincount(rounds.tokens[sel, j - 1], minlength=case.V)
        res, plot = _gof(name, counts, law, false_fail_rate, profile)
        _add_tv(res, plot)
        out.append(CheckRecord(impl, case.name, name, "exactness", res, plot))
    return out


def residual_law(case) -> np.ndarray:
    """norm(max(0, p_1 - q_1)): the law of the token the standard rule emits when it rejects the first draft."""
    residual = np.maximum(case.target_probs[0] - case.draft_probs[0], 0.0)
    return residual / residual.sum()


def residual_check(
    impl: str, rounds: Rounds, false_fail_rate: float, profile: Profile
) -> CheckRecord:
    """The token emitted in rounds that reject the first draft (N = 1) against the normalised residual
    norm(max(0, p_1 - q_1)). The standard rule draws it from there; position 1 mixes it with the accepted
    drafts, so a wrong residual (from p, unclamped, one row late) shows here undiluted."""
    case = rounds.case
    sel = rounds.counts == 1
    counts = np.bincount(rounds.tokens[sel, 0], minlength=case.V)
    res, plot = _gof("residual_1", counts, residual_law(case), false_fail_rate, profile)
    _add_tv(res, plot)
    return CheckRecord(impl, case.name, "residual_1", "standard_rule", res, plot)


def _encode(tokens: np.ndarray, V: int) -> np.ndarray:
    """Tuples padded with -1 -> int64 codes (base V+1 digits, -1 -> 0)."""
    base = np.int64(V + 1)
    code = np.zeros(tokens.shape[0], dtype=np.int64)
    for j in range(tokens.shape[1] - 1, -1, -1):
        code = code * base + (tokens[:, j] + 1)
    return code


def tuple_law_check(
    impl: str, rounds: Rounds, false_fail_rate: float, profile: Profile
) -> CheckRecord:
    """The whole emitted tuple against `reference.round_distribution` (small V, k)."""
    case = rounds.case
    tuples, probs = case.tuple_law
    padded = np.full((len(tuples), case.k + 1), -1, dtype=np.int64)
    for i, t in enumerate(tuples):
        padded[i, : len(t)] = t
    codes = _encode(padded, case.V)
    order = np.argsort(codes)
    codes, probs_sorted = codes[order], probs[order]
    obs = _encode(rounds.tokens, case.V)
    idx = np.searchsorted(codes, obs)
    idx_c = np.minimum(idx, codes.size - 1)
    known = codes[idx_c] == obs
    # last category: any tuple of probability 0 under the rule
    law = with_unseen_category(probs_sorted)
    cats = np.where(known, idx_c, codes.size)
    counts = np.bincount(cats, minlength=law.size)
    res, plot = _gof("tuple_law", counts, law, false_fail_rate, profile)
    _add_tv(res, plot)
    if not known.all():
        r = int(np.flatnonzero(~known)[0])
        res = TestResult(
            res.name,
            res.statistic,
            0.0,
            res.n,
            res.false_fail_rate,
            res.false_pass_rate,
            res.detectable_tv,
            False,
            f"tuple_law: FAIL: {int((~known).sum())} of {rounds.n} rounds emit a tuple the standard rule "
            f"never emits (probability 0), e.g. {rounds.tokens[r, : rounds.counts[r]].tolist()} with drafts "
            f"{rounds.drafts[r].tolist()}",
            res.details,
        )
    return CheckRecord(impl, case.name, "tuple_law", "standard_rule", res, plot)


def completed_stream_check(
    impl: str, rounds: Rounds, false_fail_rate: float, profile: Profile, seed: int
) -> CheckRecord:
    """Joint law of the completed stream y_1..y_{k+1} against prod_j p_j (any exact rule)."""
    case = rounds.case
    rng = np.random.default_rng([seed, 7])
    tok = rounds.tokens.copy()
    for j in range(case.k + 1):
        missing = rounds.counts <= j
        if missing.any():
            tok[missing, j] = inverse_cdf(case.target_probs[j], rng.random(int(missing.sum())))
    code = np.zeros(tok.shape[0], dtype=np.int64)
    for j in range(case.k, -1, -1):
        code = code * case.V + tok[:, j]
    law = case.stream_law
    counts = np.bincount(code, minlength=law.size)
    res, plot = _gof("completed_stream", counts, law, false_fail_rate, profile)
    _add_tv(res, plot)
    return CheckRecord(impl, case.name, "completed_stream", "exactness", res, plot)


def count_law_check(
    impl: str, rounds: Rounds, false_fail_rate: float, profile: Profile
) -> CheckRecord:
    """Tokens per round N against the standard rule's exact law (efficiency: standard rule, not exactness)."""
    case = rounds.case
    # alpha_i = 1 up to rounding: the exact law puts no mass there
    law = drop_rounding_mass(case.count_law)
    n = rounds.n
    me = profile.rule.min_expected(n)
    try:
        res = assert_tokens_per_round(
            rounds.counts,
            law,
            false_fail_rate=false_fail_rate,
            false_pass_rate=profile.false_pass_rate,
            min_expected=me,
            method=GOF_METHOD,
            name="tokens_per_round",
        )
    except ValueError as error:
        c = np.bincount(rounds.counts - 1, minlength=law.size)
        zr = assert_within_support(
            counts=c, p=law, false_pass_rate=profile.false_pass_rate, name="tokens_per_round"
        )
        res = TestResult(
            "tokens_per_round",
            zr.statistic,
            zr.p_value,
            n,
            false_fail_rate if zr.passed else 0.0,
            profile.false_pass_rate,
            float("nan"),
            zr.passed,
            f"{zr.message} (chi-square skipped: {error})",
            zr.details,
        )
    mean_obs = float(rounds.counts.mean())
    mean_exp = float((np.arange(1, case.k + 2) * law).sum())
    details = dict(res.details)
    details.update(
        {
            "mean_tokens_observed": mean_obs,
            "mean_tokens_standard_rule": mean_exp,
            "acceptance_rates": case.alphas.tolist(),
        }
    )
    res = TestResult(
        res.name,
        res.statistic,
        res.p_value,
        res.n,
        res.false_fail_rate,
        res.false_pass_rate,
        res.detectable_tv,
        res.passed,
        res.message + f"; mean N {mean_obs:.4f} vs standard rule {mean_exp:.4f}",
        details,
    )
    plot = _plot_data(np.bincount(rounds.counts - 1, minlength=law.size), law, me)
    _add_tv(res, plot)
    return CheckRecord(impl, case.name, "tokens_per_round", "standard_rule", res, plot)
