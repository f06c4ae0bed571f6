"""Rule-level checks for the cases built to reach specific bugs (declared in `registry.RULE_CHECKS`):

- ``pit_position_j``   (exactness) rows vary from round to round: the randomized PIT of the token at position j
                       under that round's own p_j is U(0,1) for an exact rule, whatever the rows (exact KS);
- ``hashed_position_1`` (exactness) large V: the first token binned by a multiplicative hash of its id, so
                       mass moved between tokens that the p-sorted bins pool together changes the bins;
- ``acceptance_rate``  (standard rule) the first draft is accepted w.p. alpha_1 = sum min(p_1, q_1): exact
                       two-sided binomial test on rounds sized to resolve a bias of `ACCEPTANCE_BIAS`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ...stat_tests import TestResult, assert_chisquare_gof, pit_ks_or_fail
from ...stat_tests.binning import pool_bins
from ...stat_tests.pit import pit_values

from ..core.profiles import Profile
from ..core.records import CheckRecord, case_seed

#: Absolute bias of the first-draft acceptance rate the acceptance check resolves w.p. >= 1 - false_pass_rate.
ACCEPTANCE_BIAS = 0.005
HASH_MULTIPLIER = 2654435761  # Knuth's multiplicative hash


def _skipped(name: str, profile: Profile, why: str) -> TestResult:
    return TestResult(
        name,
        0.0,
        1.0,
        0,
        0.0,
        profile.false_pass_rate,
        float("nan"),
        True,
        f"{name}: {why}: nothing to test",
        {"skipped": True},
    )


def pit_position_checks(
    impl: str, rounds, false_fail_rate: float, profile: Profile
) -> list[CheckRecord]:
    """Pooled cases: position j's tokens, each under its own round's p_j, through the randomized PIT (KS)."""
    case, out = rounds.case, []
    for j in range(1, case.k + 2):
        name = f"pit_position_{j}"
        sel = rounds.counts >= j
        if sel.sum() < 2:
            out.append(
                CheckRecord(
                    impl, case.name, name, "exactness", _skipped(name, profile, "under 2 rounds")
                )
            )
            continue
        tokens, probs = rounds.tokens[sel, j - 1], rounds.target_rows(j - 1, sel)
        rng = np.random.default_rng([case_seed(case.name, name), 3])
        res = pit_ks_or_fail(
            name,
            lambda: pit_values(tokens, probs, rng, ordering="prob"),
            int(sel.sum()),
            false_fail_rate,
            profile.false_pass_rate,
        )
        out.append(CheckRecord(impl, case.name, name, "exactness", res))
    return out


def hash_bins(V: int, n_bins: int) -> np.ndarray:
    """Bin of each token id: a multiplicative hash of the id, mod n_bins (spreads neighbours in p-order)."""
    return (
        (np.arange(V, dtype=np.uint64) * np.uint64(HASH_MULTIPLIER))
        % np.uint64(2**32)
        % np.uint64(n_bins)
    ).astype(np.int64)


def hashed_law_at(case, n: float, profile: Profile) -> tuple[np.ndarray, np.ndarray]:
    """(hash bin of each token id, p_1's mass per hash bin) for n rounds: as many bins as keep 2 x the
    profile's min expected count in each (2 .. max_bins)."""
    n_hash = int(
        max(
            2, min(profile.rule.max_bins, int(n) // max(1.0, 2 * profile.rule.min_expected(int(n))))
        )
    )
    bins = hash_bins(case.V, n_hash)
    return bins, np.bincount(bins, weights=case.target_probs[0], minlength=n_hash)


def hashed_position_check(
    impl: str, rounds, false_fail_rate: float, profile: Profile
) -> CheckRecord:
    """The first token on hash bins, with the share of p_1's mass the p-sorted bins pool (token-level
    deviations inside pooled bins are invisible there; the hash bins split those pools)."""
    case, n = rounds.case, rounds.n
    min_expected = profile.rule.min_expected(n)
    law = case.target_probs[0]
    bins, hashed_law = hashed_law_at(case, n, profile)
    n_hash = hashed_law.size
    counts = np.bincount(bins[rounds.tokens[:, 0]], minlength=n_hash)
    res = assert_chisquare_gof(
        counts=counts,
        p=hashed_law,
        false_fail_rate=false_fail_rate,
        false_pass_rate=profile.false_pass_rate,
        min_expected=min_expected,
        method="lr",
        name="hashed_position_1",
    )
    token_bin, _ = pool_bins(law, float(n), min_expected)
    sizes = np.bincount(token_bin[token_bin >= 0])
    pooled = sizes[token_bin[token_bin >= 0]] > 1
    res.details.update(
        {
            "hash_bins": n_hash,
            "pooled_mass_p_sorted_bins": float(law[token_bin >= 0][pooled].sum()),
            "tokens_alone_in_a_bin": int((~pooled).sum()),
            "token_level_note": (
                "a token-level deviation is detected at the stated binned TV only "
                "outside pooled_mass_p_sorted_bins by the position checks; the hash "
                "bins split those pools at random"
            ),
        }
    )
    return CheckRecord(impl, case.name, "hashed_position_1", "exactness", res)


def acceptance_rounds(
    alpha: float, false_fail_rate: float, false_pass_rate: float, bias: float = ACCEPTANCE_BIAS
) -> int:
    """Rounds so the two-sided binomial test at `false_fail_rate` detects |rate - alpha| >= bias w.p. >= 1 - false_pass_rate."""
    za, zb = stats.norm.isf(false_fail_rate / 2), stats.norm.isf(false_pass_rate)
    worst = max(math.sqrt(a * (1 - a)) for a in (alpha - bias, alpha + bias) if 0 < a < 1)
    return int(math.ceil(((za * math.sqrt(alpha * (1 - alpha)) + zb * worst) / bias) ** 2 * 1.05))


def acceptance_rate_check(
    impl: str, rounds, false_fail_rate: float, profile: Profile
) -> CheckRecord:
    """First draft accepted (N >= 2) ~ Bernoulli(alpha_1) over the rounds (exact two-sided binomial test)."""
    case = rounds.case
    alpha = float(case.alphas[0])
    accepted = int((rounds.counts >= 2).sum())
    p_value = (
        float(stats.binomtest(accepted, rounds.n, alpha).pvalue)
        if 0 < alpha < 1
        else float(accepted == (rounds.n if alpha >= 1 else 0))
    )
    passed = p_value >= false_fail_rate
    rate = accepted / rounds.n
    msg = (
        f"acceptance_rate: {'PASS' if passed else 'FAIL'}: first draft accepted in {accepted}/{rounds.n} rounds "
        f"({rate:.5f}) vs alpha_1 = {alpha:.5f}, exact binomial p={p_value:.3g} (false_fail_rate="
        f"{false_fail_rate:.3g}); resolves a bias of {ACCEPTANCE_BIAS:g} w.p. >= {1 - profile.false_pass_rate:g}"
    )
    res = TestResult(
        "acceptance_rate",
        abs(rate - alpha),
        p_value,
        rounds.n,
        false_fail_rate,
        profile.false_pass_rate,
        float("nan"),
        passed,
        msg,
        {
            "observed_rate": rate,
            "alpha_1": alpha,
            "resolves_bias": ACCEPTANCE_BIAS,
            "observed_bias": rate - alpha,
            "observed_tv_binned": abs(rate - alpha),
            "observed_tv_binned_null_mean": math.sqrt(
                2 * alpha * (1 - alpha) / (math.pi * rounds.n)
            ),
        },
    )
    return CheckRecord(impl, case.name, "acceptance_rate", "standard_rule", res)
