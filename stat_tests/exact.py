"""Multinomial test without asymptotics, for small n*V: exact enumeration of every
outcome when there are few enough, otherwise a Monte-Carlo p-value
(1 + #{T_sim >= T_obs}) / (1 + B), which is valid (never anti-conservative) for any B.
No bins are pooled.  Use it where the chi-square tail cannot be trusted.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy.special import gammaln

from .gof import checked_gof_inputs
from .power import min_discrepancy_chisquare_gof, min_num_samples_chisquare_gof
from .result import TestResult


def _compositions(n: int, k: int) -> np.ndarray:
    """All vectors of k non-negative ints summing to n, shape (C(n+k-1, k-1), k)."""
    m = math.comb(n + k - 1, k - 1)
    flat = np.fromiter(
        itertools.chain.from_iterable(itertools.combinations(range(n + k - 1), k - 1)),
        dtype=np.int64,
        count=m * (k - 1),
    )
    bars = flat.reshape(m, k - 1)
    padded = np.hstack([np.full((m, 1), -1), bars, np.full((m, 1), n + k - 1)])
    return np.diff(padded, axis=1) - 1


def _stat(x: np.ndarray, n: int, p: np.ndarray, logp: np.ndarray, kind: str) -> np.ndarray:
    if kind == "pearson":
        e = n * p
        return np.sum((x - e) ** 2 / e, axis=-1)
    # "prob": minus log-probability of the outcome (rarer = more extreme)
    return -(gammaln(n + 1) - np.sum(gammaln(x + 1), axis=-1) + x @ logp)


def assert_multinomial_exact(
    samples=None,
    p=None,
    false_fail_rate=None,
    *,
    counts=None,
    false_pass_rate: float = 0.001,
    statistic: str = "pearson",
    n_sim: int | None = None,
    rng=0,
    max_enumerate: int = 1_000_000,
    name: str = "multinomial_exact_test",
) -> TestResult:
    """Exact (enumeration) or Monte-Carlo multinomial GoF test on unpooled categories.

    ``statistic``: "pearson" orders outcomes by Pearson's X^2, "prob" by their probability.
    Monte-Carlo uses ``n_sim`` draws (default max(10_000, 20/false_fail_rate)).
    ``detectable_tv`` uses chi-square planning on the support size (approximate here):
    `min_discrepancy_multinomial_exact`.
    """
    if statistic not in ("pearson", "prob"):
        raise ValueError(f"statistic must be 'pearson' or 'prob', got {statistic!r}")
    pp, a, be, c, zr = checked_gof_inputs(
        samples, counts, p, false_fail_rate, false_pass_rate, name
    )
    n = int(c.sum())
    if not zr.passed:
        return TestResult(
            name, float("inf"), 0.0, n, a, be, float("nan"), False, zr.message, zr.details
        )
    sup = pp > 0
    ps, xs = pp[sup], c[sup]
    k = ps.size
    if k == 1:
        return TestResult(
            name,
            0.0,
            1.0,
            n,
            a,
            be,
            0.0,
            True,
            f"{name}: PASS: p is a point mass and every sample hit it",
            {"mode": "trivial"},
        )
    logp = np.log(ps)
    t_obs = float(_stat(xs.astype(np.float64), n, ps, logp, statistic))
    tol = 1e-9 * max(1.0, abs(t_obs))
    n_outcomes = math.comb(n + k - 1, k - 1)
    if n_outcomes <= max_enumerate:
        xall = _compositions(n, k).astype(np.float64)
        t = _stat(xall, n, ps, logp, statistic)
        logprob = gammaln(n + 1) - np.sum(gammaln(xall + 1), axis=1) + xall @ logp
        pval = float(min(1.0, np.exp(logprob[t >= t_obs - tol]).sum()))
        mode = {"mode": "exact", "n_outcomes": n_outcomes}
    else:
        if n_sim is None:
            n_sim = max(10_000, int(math.ceil(20.0 / a)))
        n_sim = int(n_sim)
        if n_sim < 1:
            raise ValueError(f"n_sim must be >= 1, got {n_sim}")
        if n_sim * k > 2_000_000_000:
            raise ValueError(
                f"false_fail_rate={a:g} needs n_sim={n_sim} Monte-Carlo draws of {k} categories: "
                "too many; use assert_chisquare_gof or a larger false_fail_rate"
            )
        g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        chunk = max(1, min(n_sim, 4_000_000 // k))
        exceed, done = 0, 0
        while done < n_sim:
            b = min(chunk, n_sim - done)
            xsim = g.multinomial(n, ps, size=b).astype(np.float64)
            exceed += int(np.count_nonzero(_stat(xsim, n, ps, logp, statistic) >= t_obs - tol))
            done += b
        pval = (1.0 + exceed) / (1.0 + n_sim)
        mode = {
            "mode": "monte_carlo",
            "n_sim": n_sim,
            "n_exceed": exceed,
            "min_attainable_p": 1.0 / (1.0 + n_sim),
        }
    d = min_discrepancy_multinomial_exact(n, k, a, be)
    passed = bool(pval >= a)
    details = {
        "statistic_kind": statistic,
        "n_categories": k,
        "detectable_metric": "TV (approximate: chi-square planning on unpooled categories)",
        **mode,
    }
    msg = (
        f"{name}: {'PASS' if passed else 'FAIL'}: {statistic} T={t_obs:.4g} p={pval:.3g} "
        f"({mode['mode']}, false_fail_rate={a:.3g}, n={n}, {k} categories)"
    )
    return TestResult(name, t_obs, pval, n, a, be, d, passed, msg, details)


def min_discrepancy_multinomial_exact(
    n: float, support_size: int, false_fail_rate: float, false_pass_rate: float = 0.001
) -> float:
    """TV detected w.p. >= 1 - false_pass_rate by `assert_multinomial_exact` with n samples on `support_size`
    categories of positive p: chi-square planning on the unpooled categories (an approximation for this test)."""
    return min_discrepancy_chisquare_gof(n, support_size, false_fail_rate, false_pass_rate)


def min_num_samples_multinomial_exact(
    discrepancy: float, support_size: int, false_fail_rate: float, false_pass_rate: float = 0.001
) -> int:
    """Samples `assert_multinomial_exact` needs to detect TV >= discrepancy on `support_size` categories
    (chi-square planning, as `min_discrepancy_multinomial_exact`)."""
    return min_num_samples_chisquare_gof(
        discrepancy, support_size, false_fail_rate, false_pass_rate
    )
