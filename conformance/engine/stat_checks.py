"""The engine level's statistical checks on one prompt, each run at its per-check false-fail rate (the registry's
budget) and each anytime-valid but `greedy_spread`, so the one command may look after every round (proofs/ARGUMENT.md,
C15, C18):

* the candidate's checks `law_drift`, `law_lr`, `context_law`, `near_zero_tokens` (positions 1..m): paired
  e-processes against the reference's completions of the same seeds (`paired_checks`), valid whatever the reports;
* `load_law` (candidate, positions 1..m, when a share of its seeds was sampled alone): the candidate alone against
  the candidate under load (a permutation e-process valid whatever the reports): a load-only bug, named as such;
* `reference_law` (reference, positions 1..m): its own tokens against its own reports, a mixture of the drift, the
  tempered likelihood ratio, the per-prefix identity test and the near-zero bettors: a failure says the reports
  are not the law the reference samples, which voids the law routes and the support check (never blamed on the
  candidate);
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
from .law_checks import drift_stream, near_zero_log_e, prefix_law_log_e, tempered_log_e
from .law_stream import token_stream
from .paired_checks import load_check, paired_check
from ...stat_tests import TestResult
from ...stat_tests.sequential import drift_log_e, log_e_process_reject, mixture_log

#: The share of the false-pass rate each certification route spends (`routes`): coupling, and each law route.
ROUTE_SHARE = 0.5


def _record(case: EngineCase, result: TestResult) -> CheckRecord:
    return CheckRecord(case.data.impl, case.name, result.name, "exactness", result)


def _e_result(name: str, log_e: float, n: int, rate: float, what: str, details: dict) -> TestResult:
    passed = not log_e_process_reject(log_e, rate)
    e_text = f"{math.exp(log_e):.3g}" if log_e < 700 else f"e^{log_e:.0f}"
    message = (
        f"{name}: {'PASS' if passed else 'FAIL'}: {what}; e-value {e_text} against 1/{rate:.3g} "
        "(anytime-valid, Ville)"
    )
    return TestResult(
        name,
        log_e,
        float(min(1.0, math.exp(-log_e))) if log_e > 0 else 1.0,
        n,
        rate,
        float("nan"),
        float("nan"),
        passed,
        message,
        {"log_e_value": log_e, **details},
    )


def candidate_check(name: str):
    """The runner of the candidate's paired check `name` (`paired_checks.paired_check`)."""

    def run(case: Any, rate: float, profile: Profile) -> list[CheckRecord]:
        return paired_check(name, case, rate)

    return run


def load_law_check(case: Any, rate: float, profile: Profile) -> list[CheckRecord]:
    """The candidate alone against the candidate under load (`paired_checks.load_check`)."""
    return load_check(case, rate)


def reference_law_check(case: Any, rate: float, profile: Profile) -> list[CheckRecord]:
    """The reference's own tokens at positions 1..m against its own reports: the mixture of four e-processes."""
    data = case.data
    tokens = [
        tok
        for part in data.parts
        for tok in token_stream(
            part.pid, part.ref, part.self_reports, 1, case.positions, part.self_cats
        )
    ]
    parts = {
        "drift": drift_log_e(drift_stream(tokens)) if tokens else 0.0,
        "tempered": tempered_log_e(tokens),
        "prefix_law": prefix_law_log_e(tokens),
        "near_zero": near_zero_log_e(tokens)[0],
    }
    log_e = mixture_log([v if math.isfinite(v) else -1e300 for v in parts.values()])
    return [
        _record(
            case,
            _e_result(
                "reference_law",
                log_e,
                len(tokens),
                rate,
                f"the reference's {len(tokens)} tokens against its own reports",
                {"log_e_parts": parts, "positions": [1, case.positions]},
            ),
        )
    ]


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
    message = (
        f"greedy_spread: {'PASS' if passed else 'FAIL'}: off the modal output in {off[0]} of {len(data.cand)} "
        f"candidate and {off[1]} of {len(data.ref)} reference completions (Fisher exact, one-sided, p = "
        f"{p_value:.3g}, false_fail_rate={rate:.3g})"
    )
    result = TestResult(
        "greedy_spread",
        float(off[0]),
        p_value,
        len(data.cand) + len(data.ref),
        rate,
        float("nan"),
        float("nan"),
        passed,
        message,
        {"table": table, "variants": len(pooled)},
    )
    return [_record(case, result)]


__all__ = [
    "ROUTE_SHARE",
    "candidate_check",
    "greedy_spread_check",
    "load_law_check",
    "reference_law_check",
]
