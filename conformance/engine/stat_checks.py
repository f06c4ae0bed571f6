"""The engine level's statistical checks on one prompt, each run at its per-check false-fail rate (the registry's
budget) and each anytime-valid, so the one command may look after every round (proofs/ARGUMENT.md, C14, C15):

* `law_drift` (candidate, positions 2..m): the stratified PIT drift e-process; its record also states the anytime
  upper bound a CERTIFIED rules out by the law route (`routes`);
* `context_law` (candidate, positions 1..m): the per-prefix bettors (deviations in any direction where prefixes
  come back; position 1's prefix comes back every completion);
* `near_zero_tokens` (candidate, positions 1..m): tokens the report all but excludes;
* `reference_law` (reference, positions 1..m): the three on the reference's own tokens against its own reports, in
  one mixture: a failure voids every check that reads the reports (the prompt's reports are not the law it samples);
* `greedy_spread` (temperature 0, a reference whose output varies with the seed): is the candidate off the pooled
  modal output more often than the reference? (Fisher's exact test, one-sided.)
"""

from __future__ import annotations

import math
from typing import Any

from scipy import stats

from ..core.profiles import Profile
from ..core.records import CheckRecord
from .cases import EngineCase
from .law_checks import context_log_e, drift_stream, near_zero_log_e
from .law_stream import token_stream
from ...stat_tests import TestResult
from ...stat_tests.sequential import drift_bound, drift_log_e, assert_drift, log_e_process_reject, mixture_log

#: The law route's share of the false-pass rate (the coupling route has the other half: `routes`).
LAW_ROUTE_SHARE = 0.5


def _record(case: EngineCase, result: TestResult) -> CheckRecord:
    return CheckRecord(case.data.impl, case.name, result.name, "exactness", result)


def _e_result(name: str, log_e: float, n: int, rate: float, what: str, details: dict) -> TestResult:
    passed = not log_e_process_reject(log_e, rate)
    e_text = f"{math.exp(log_e):.3g}" if log_e < 700 else f"e^{log_e:.0f}"
    message = (f"{name}: {'PASS' if passed else 'FAIL'}: {what}; e-value {e_text} against 1/{rate:.3g} "
               "(anytime-valid, Ville)")
    return TestResult(name, log_e, float(min(1.0, math.exp(-log_e))) if log_e > 0 else 1.0, n, rate, float("nan"),
                      float("nan"), passed, message, {"log_e_value": log_e, **details})


def law_drift_check(case: Any, rate: float, profile: Profile) -> list[CheckRecord]:
    """The candidate's stratified PIT drift at positions 2..m, and what the law route rules out."""
    data = case.data
    tokens = token_stream(data.pid, data.cand, data.reports, 2, case.positions)
    stream = drift_stream(tokens)
    result = assert_drift(stream, rate, name="law_drift")
    bound = drift_bound(stream, profile.false_pass_rate * LAW_ROUTE_SHARE) if stream.count else math.inf
    beta = profile.false_pass_rate * LAW_ROUTE_SHARE
    details = {**result.details, "completions": len(data.cand), "positions": [2, case.positions],
               "values_per_completion": stream.count / max(1, len(data.cand)), "drift_bound": bound,
               "ruled_out_tv": 2.0 * bound, "mean_slack": stream.slack / max(1, stream.count), "false_pass_rate": beta}
    ruled = 2.0 * bound if 2.0 * bound <= 1.0 else float("nan")  # a bound above 1 rules out nothing
    result = TestResult(result.name, result.statistic, result.p_value, result.n, result.false_fail_rate, beta, ruled,
                        result.passed, result.message, details)
    return [_record(case, result)]


def context_law_check(case: Any, rate: float, profile: Profile) -> list[CheckRecord]:
    """The candidate's tokens at positions 1..m, bet on per prefix (`law_checks.context_log_e`)."""
    data = case.data
    tokens = token_stream(data.pid, data.cand, data.reports, 1, case.positions)
    log_e, revisits = context_log_e(tokens)
    return [_record(case, _e_result("context_law", log_e, len(tokens), rate,
                                    f"{len(tokens)} tokens, {revisits} at a prefix seen before",
                                    {"revisits": revisits, "positions": [1, case.positions]}))]


def near_zero_check(case: Any, rate: float, profile: Profile) -> list[CheckRecord]:
    """The candidate's tokens at positions 1..m the report all but excludes (`law_checks.near_zero_log_e`)."""
    data = case.data
    tokens = token_stream(data.pid, data.cand, data.reports, 1, case.positions)
    log_e, hits, trials, examples = near_zero_log_e(tokens)
    return [_record(case, _e_result("near_zero_tokens", log_e, len(tokens), rate,
                                    f"{hits} near-zero tokens among {trials} with a near-zero set",
                                    {"hits": hits, "trials": trials, "examples": examples}))]


def reference_law_check(case: Any, rate: float, profile: Profile) -> list[CheckRecord]:
    """The reference's own tokens at positions 1..m against its own reports: the mixture of the three bettors."""
    data = case.data
    tokens = token_stream(data.pid, data.ref, data.self_reports, 1, case.positions)
    stream = drift_stream(tokens)
    parts = {"drift": drift_log_e(stream) if tokens else 0.0, "context": context_log_e(tokens)[0],
             "near_zero": near_zero_log_e(tokens)[0]}
    log_e = mixture_log([v if math.isfinite(v) else -1e300 for v in parts.values()])
    return [_record(case, _e_result("reference_law", log_e, len(tokens), rate,
                                    f"the reference's {len(tokens)} tokens against its own reports",
                                    {"log_e_parts": parts}))]


def greedy_spread_check(case: Any, rate: float, profile: Profile) -> list[CheckRecord]:
    """Temperature 0 with a reference that varies: Fisher's exact test that the candidate is off the pooled modal
    output no more often than the reference (valid under exchangeability: the mode is chosen from the pooled data)."""
    data = case.data
    pooled: dict[tuple[int, ...], int] = {}
    for c in [*data.ref, *data.cand]:
        pooled[c.tokens] = pooled.get(c.tokens, 0) + 1
    mode = max(pooled, key=lambda tokens: (pooled[tokens], tokens))
    off = [sum(c.tokens != mode for c in sample) for sample in (data.cand, data.ref)]
    table = [[off[0], len(data.cand) - off[0]], [off[1], len(data.ref) - off[1]]]
    p_value = float(stats.fisher_exact(table, alternative="greater").pvalue)
    passed = p_value >= rate
    message = (f"greedy_spread: {'PASS' if passed else 'FAIL'}: off the modal output in {off[0]} of {len(data.cand)} "
               f"candidate and {off[1]} of {len(data.ref)} reference completions (Fisher exact, one-sided, p = "
               f"{p_value:.3g}, false_fail_rate={rate:.3g})")
    result = TestResult("greedy_spread", float(off[0]), p_value, len(data.cand) + len(data.ref), rate, float("nan"),
                        float("nan"), passed, message, {"table": table, "variants": len(pooled)})
    return [_record(case, result)]


__all__ = ["LAW_ROUTE_SHARE", "context_law_check", "greedy_spread_check", "law_drift_check", "near_zero_check",
           "reference_law_check"]
