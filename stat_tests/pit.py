"""Randomised probability integral transform (PIT) for token sequences.

For token x emitted from its exact conditional distribution p_t (which may depend on the
prefix), U_t = F_t(x-) + W_t * p_t(x), W_t ~ U(0,1) independent, where F_t is the CDF of
p_t under a chosen vocabulary ordering.  Under exactness U_1..U_n are iid U(0,1), so
continuous uniformity tests (KS) are valid -- unlike KS on raw token ids, which is
discrete and must never be done.

Ordering matters for power: "id" (token-id order) or "prob" (descending probability,
ties by id), which puts the head of the distribution at U near 0, so a temperature
error shows up as a monotone CDF distortion that KS sees well.

For fixed p_t = p and tokens drawn from q, U has density q_x/p_x on token x's interval,
so TV(law of U, U(0,1)) = TV(q, p) exactly; binning U into B equal cells keeps the
w >= 2*TV planning of `power` for the binned law.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ..reference.validation import as_prob_rows, check_error_rates, check_int_array
from .gof import assert_chisquare_gof
from .power import min_discrepancy_chisquare_gof, min_num_samples_chisquare_gof
from .result import TestResult
from .search import fewest_samples

_CHUNK_ELEMS = 4_000_000


def pit_values(tokens, probs, rng=None, ordering: str = "id") -> np.ndarray:
    """Randomised PIT values U (n,) for tokens (n,) under per-token distributions probs (n, V).

    ``rng``: numpy Generator or seed.  Raises ValueError if a token has probability 0
    (run `assert_within_support` for that failure mode).
    """
    if ordering not in ("id", "prob"):
        raise ValueError(f"ordering must be 'id' or 'prob', got {ordering!r}")
    P = as_prob_rows(probs, "probs")
    n, V = P.shape
    x = check_int_array(tokens, "tokens", lo=0, hi=V)
    if x.size != n:
        raise ValueError(f"tokens has length {x.size} but probs has {n} rows")
    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    w = g.random(n)
    rows = np.arange(n)
    px = P[rows, x]
    zero = np.flatnonzero(px == 0)
    if zero.size:
        t = int(zero[0])
        raise ValueError(
            f"tokens: token {int(x[t])} at position {t} has probability 0 under probs "
            f"({zero.size} such positions); PIT undefined -- this is a hard failure"
        )
    F = np.empty(n)
    ids = np.arange(V)
    step = max(1, _CHUNK_ELEMS // V)
    for s in range(0, n, step):  # chunks of rows, vectorised within
        Pc, xc, pc = P[s : s + step], x[s : s + step, None], px[s : s + step, None]
        if ordering == "id":
            before = ids[None, :] < xc
        else:
            before = (Pc > pc) | ((Pc == pc) & (ids[None, :] < xc))
        F[s : s + step] = np.einsum("ij,ij->i", Pc, before)
    return np.clip(F + w * px, 0.0, 1.0)


def assert_pit_uniform(
    u,
    false_fail_rate=None,
    *,
    false_pass_rate: float = 0.001,
    method: str = "ks",
    bins: int | None = None,
    min_expected: float = 20.0,
    slack: float = 0.0,
    name: str = "pit_uniformity",
) -> TestResult:
    """Test that PIT values are iid U(0,1): Kolmogorov-Smirnov ("ks") or equal-cell
    chi-square ("chisquare", ``bins`` cells, default min(100, n // min_expected)).

    KS: the exact finite-n law of D (scipy's `kstwo`, Simard & L'Ecuyer), so the false-fail rate is exact for
    continuous U; ``detectable_tv`` is NaN (KS bounds Kolmogorov distance, which is <= TV);
    details['detectable_kolmogorov'] is the distance detected w.p. >= 1 - false_pass_rate via DKW.
    ``slack`` (KS only): each value is known to lie within `slack` of an exact PIT value (e.g. computed from
    rounded probabilities). Then D <= D_exact + slack, so rejecting when D > crit + slack (p-value
    P(D_exact >= D - slack)) keeps the false-fail rate at most `false_fail_rate`, a theorem.
    Chi-square: ``detectable_tv`` is the TV of the binned law of U.
    """
    if not (isinstance(slack, (int, float)) and 0.0 <= float(slack) < 1.0):
        raise ValueError(f"slack must be a number in [0, 1), got {slack!r}")
    if slack and method != "ks":
        raise ValueError("slack: only the KS test (method='ks') takes a slack")
    a, be = check_error_rates(false_fail_rate, false_pass_rate)
    uu = np.asarray(u, dtype=np.float64)
    if uu.ndim != 1:
        raise ValueError(f"u must be 1-D, got shape {uu.shape}")
    if not np.all(np.isfinite(uu)):
        raise ValueError("u contains NaN or infinite values")
    if uu.size and (uu.min() < 0 or uu.max() > 1):
        raise ValueError("u must lie in [0, 1]")
    n = uu.size
    if method == "ks":
        if n < 2:
            raise ValueError(f"u: n={n} too small for KS (need >= 2)")
        statistic = float(stats.kstest(uu, "uniform", method="exact").statistic)
        # the finite-n law
        pvalue = float(stats.kstwo.sf(statistic - slack, n)) if statistic > slack else 1.0
        crit = float(stats.kstwo.isf(a, n)) + float(slack)
        d = min_discrepancy_pit_uniform(n, a, be, slack=slack)
        passed = bool(pvalue >= a)
        widened = f", critical value widened by slack {slack:.3g}" if slack else ""
        msg = (
            f"{name}: {'PASS' if passed else 'FAIL'}: KS D={statistic:.4g} p={pvalue:.3g} "
            f"(false_fail_rate={a:.3g}, n={n}{widened}); detects Kolmogorov distance >= {d:.3g} w.p. >= {1 - be:g}"
        )
        return TestResult(
            name,
            statistic,
            pvalue,
            n,
            a,
            be,
            float("nan"),
            passed,
            msg,
            {
                "method": "ks",
                "critical_D": crit,
                "slack": float(slack),
                "detectable_kolmogorov": d,
                "detectable_metric": "Kolmogorov distance of the law of U (<= TV)",
            },
        )
    if method != "chisquare":
        raise ValueError(f"method must be 'ks' or 'chisquare', got {method!r}")
    if bins is None:
        bins = int(min(100, n // max(1.0, float(min_expected))))
    if int(bins) != bins or bins < 2:
        raise ValueError(f"bins must be an integer >= 2 (u: n={n} may be too small), got {bins!r}")
    bins = int(bins)
    if n / bins < min_expected:
        raise ValueError(f"u: n={n} too small for {bins} bins at min_expected={min_expected:g}")
    cell = np.minimum((uu * bins).astype(np.int64), bins - 1)
    r = assert_chisquare_gof(
        counts=np.bincount(cell, minlength=bins),
        p=np.full(bins, 1.0 / bins),
        false_fail_rate=a,
        false_pass_rate=be,
        min_expected=min_expected,
        name=name,
    )
    det = dict(r.details, detectable_metric=f"TV of the law of U binned into {bins} equal cells")
    return TestResult(
        r.name,
        r.statistic,
        r.p_value,
        r.n,
        r.false_fail_rate,
        r.false_pass_rate,
        r.detectable_tv,
        r.passed,
        r.message,
        det,
    )


def min_discrepancy_pit_uniform(
    n: int,
    false_fail_rate: float,
    false_pass_rate: float = 0.001,
    method: str = "ks",
    bins: int | None = None,
    slack: float = 0.0,
) -> float:
    """What `assert_pit_uniform` on n values detects w.p. >= 1 - false_pass_rate. "ks": a Kolmogorov distance
    (<= TV) of the law of U: the critical D (plus `slack`) plus the DKW margin sqrt(log(2 / false_pass_rate) / 2n).
    "chisquare": the TV of U binned into `bins` equal cells (chi-square planning; `bins` required here)."""
    a, be = check_error_rates(false_fail_rate, false_pass_rate)
    if method == "ks":
        crit = float(stats.kstwo.isf(a, n)) + float(slack)
        return crit + math.sqrt(math.log(2.0 / be) / (2.0 * n))
    if method == "chisquare":
        if bins is None:
            raise ValueError(
                "bins: min_discrepancy_pit_uniform needs the cell count for method='chisquare'"
            )
        return min_discrepancy_chisquare_gof(n, bins, a, be)
    raise ValueError(f"method must be 'ks' or 'chisquare', got {method!r}")


def min_num_samples_pit_uniform(
    discrepancy: float,
    false_fail_rate: float,
    false_pass_rate: float = 0.001,
    method: str = "ks",
    bins: int | None = None,
    slack: float = 0.0,
    min_expected: float = 20.0,
    limit: int = 10**9,
) -> int | None:
    """Fewest values at which `min_discrepancy_pit_uniform` <= discrepancy (None past `limit`); for "chisquare"
    also at least bins * min_expected, the test's own floor."""
    if not 0.0 < discrepancy <= 1.0:
        raise ValueError(f"discrepancy must be in (0, 1], got {discrepancy!r}")
    if method == "chisquare":
        if bins is None:
            raise ValueError(
                "bins: min_num_samples_pit_uniform needs the cell count for method='chisquare'"
            )
        n = min_num_samples_chisquare_gof(discrepancy, bins, false_fail_rate, false_pass_rate)
        return max(n, int(math.ceil(bins * min_expected)))
    return fewest_samples(
        lambda n: (
            min_discrepancy_pit_uniform(n, false_fail_rate, false_pass_rate, method, slack=slack)
            <= discrepancy
        ),
        2,
        limit,
    )
