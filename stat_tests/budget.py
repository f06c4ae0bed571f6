"""Suite-level false-fail control: one stated probability for a whole conformance run.

`ErrorBudget` splits a total false-fail rate over the checks (Bonferroni: the union
bound needs no independence) so that P(any check fails | implementation exact)
<= total_false_fail.  `holm` combines collected p-values with Holm's step-down
procedure (statsmodels), uniformly more powerful at the same family-wise rate.
The false-pass side needs no splitting: each check on its own detects its stated
deviation with probability >= 1 - false_pass_rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from statsmodels.stats.multitest import multipletests

from ..reference.validation import check_rate
from .power import min_discrepancy_chisquare_gof, min_num_samples_chisquare_gof


@dataclass(frozen=True)
class ErrorBudget:
    """Total false-fail rate split over ``n_checks`` checks; ``false_pass_rate`` is the per-check false-pass rate."""

    total_false_fail: float = 1e-6
    n_checks: int = 1
    false_pass_rate: float = 0.001
    tail_safety: float = 1.0

    def __post_init__(self):
        if not (np.isfinite(self.tail_safety) and self.tail_safety >= 1.0):
            raise ValueError(f"tail_safety must be >= 1, got {self.tail_safety!r}")
        check_rate(self.total_false_fail, "total_false_fail")
        check_rate(self.false_pass_rate, "false_pass_rate")
        if int(self.n_checks) != self.n_checks or self.n_checks < 1:
            raise ValueError(f"n_checks must be a positive integer, got {self.n_checks!r}")

    @property
    def per_check_false_fail_rate(self) -> float:
        """Bonferroni share: total_false_fail / (n_checks * tail_safety).  tail_safety = 1 is exact for tests
        with a proven tail (`assert_chisquare_gof(method="lr")`, KS on continuous PIT values, exact binomial), which are
        all the conformance suite runs; asymptotic chi-square tests at rates <= 1e-4 need more (their real tail was
        measured at up to 1.6x nominal, and computed at up to 16x at 8e-9 with <= 4 bins)."""
        return self.total_false_fail / (self.n_checks * self.tail_safety)

    def false_fail_rates(self, weights) -> np.ndarray:
        """Unequal Bonferroni split proportional to ``weights`` (length n_checks, positive)."""
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (self.n_checks,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ValueError(f"weights must be {self.n_checks} positive finite numbers")
        return self.total_false_fail * w / w.sum()

    def _pvals(self, p_values) -> np.ndarray:
        p = np.asarray(p_values, dtype=np.float64)
        if p.ndim != 1 or p.size == 0:
            raise ValueError("p_values must be a non-empty 1-D sequence")
        if p.size > self.n_checks:
            raise ValueError(
                f"p_values has {p.size} entries but the budget covers n_checks={self.n_checks}"
            )
        if not np.all(np.isfinite(p)) or np.any((p < 0) | (p > 1)):
            raise ValueError("p_values must be numbers in [0, 1]")
        return p

    def bonferroni(self, p_values) -> dict:
        """Reject check i iff p_i < per_check_false_fail_rate."""
        p = self._pvals(p_values)
        reject = p < self.per_check_false_fail_rate
        return {
            "method": "bonferroni",
            "reject": reject.tolist(),
            "passed": not bool(reject.any()),
            "total_false_fail": self.total_false_fail,
        }

    def holm(self, p_values) -> dict:
        """Holm step-down at family-wise rate total_false_fail; missing checks (fewer p-values
        than n_checks) are treated as p = 1, which keeps the stated rate."""
        p = self._pvals(p_values)
        padded = np.concatenate([p, np.ones(self.n_checks - p.size)])
        reject, adj, _, _ = multipletests(padded, alpha=self.total_false_fail, method="holm")
        reject = reject[: p.size]
        return {
            "method": "holm",
            "reject": reject.tolist(),
            "adjusted_p": adj[: p.size].tolist(),
            "passed": not bool(reject.any()),
            "total_false_fail": self.total_false_fail,
        }

    def min_discrepancy_chisquare_gof(self, n: float, n_bins: int) -> float:
        """Binned TV a chi-square check with n samples, n_bins bins detects at this budget."""
        return min_discrepancy_chisquare_gof(
            n, n_bins, self.per_check_false_fail_rate, self.false_pass_rate
        )

    def min_num_samples_chisquare_gof(self, epsilon_tv: float, n_bins: int) -> int:
        """Samples per check so every check detects binned TV >= epsilon_tv w.p. >= 1 - false_pass_rate."""
        return min_num_samples_chisquare_gof(
            epsilon_tv, n_bins, self.per_check_false_fail_rate, self.false_pass_rate
        )

    def summarize(self, results) -> dict:
        """One verdict for a run: all passed?, false-fail rate actually spent (must be <= budget),
        and the largest (weakest) stated detectable TV."""
        results = list(results)
        spent = float(sum(r.false_fail_rate for r in results))
        tvs = [r.detectable_tv for r in results if np.isfinite(r.detectable_tv)]
        return {
            "passed": all(r.passed for r in results),
            "n_results": len(results),
            "false_fail_rate_spent": spent,
            "total_false_fail": self.total_false_fail,
            "within_budget": spent <= self.total_false_fail * (1 + 1e-9),
            "worst_detectable_tv": max(tvs) if tvs else None,
            "false_pass_rate": self.false_pass_rate,
            "failed": [r.name for r in results if not r.passed],
        }
