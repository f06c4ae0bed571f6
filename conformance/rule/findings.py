"""Failed checks grouped by root cause, and whether the adversarial generator reached the implementation.

One root cause often fails several checks (an emitted p = 0 token fails the invariants of three runs and
the position checks of the same case). The report lists *findings* instead:

- ``contract``   the same exception (type and check) or contract breach, with every case it hit;
- ``rng_event``  hard failures seen only under the adversarial Generator and reproduced by one extreme RNG
                 event alone: the event and how often real generators produce it (not a measured deviation);
- ``invariant``  an invariant violation on a case, with every check of that case it touched;
- ``deviation``  statistical exactness failures on a case (no invariant broken there);
- ``standard_rule`` the case accepts differently from the standard rule (exactness not in question).
"""

from __future__ import annotations

import re
from typing import Iterable

from ..core.records import CheckRecord

ADVERSARIAL = "adversarial_rng"


def _label(record: CheckRecord) -> str:
    return f"{record.case}/{record.check}"


def _rng_only(failed: list[CheckRecord]) -> list[dict] | None:
    """The RNG events behind a case's hard failures, when the adversarial run is the only hard failure."""
    hard = [r for r in failed if r.category in ("invariant", "contract")]
    if len(hard) != 1 or hard[0].check != ADVERSARIAL:
        return None
    return hard[0].result.details.get("rng_events") or None


def _contract_key(record: CheckRecord) -> tuple:
    """The same exception (type and message, the case's own context removed) or the same check's breach."""
    exception = record.result.details.get("exception")
    if exception:
        message = re.sub(r" \(case [^)]*\)", "", record.result.message.split(": FAIL: ", 1)[-1])
        return ("contract", exception, message)
    return ("contract", record.check)


def group_findings(records: Iterable[CheckRecord]) -> list[dict]:
    """Findings (dicts: kind, cases, checks, summary, and rng events where relevant), worst kind first."""
    by_case: dict[str, list[CheckRecord]] = {}
    for r in records:
        if not r.passed:
            by_case.setdefault(r.case, []).append(r)
    merged: dict[tuple, dict] = {}

    def add(key: tuple, kind: str, recs: list[CheckRecord], summary: str, **extra) -> None:
        entry = merged.setdefault(
            key, {"kind": kind, "cases": [], "checks": [], "summary": summary, **extra}
        )
        entry["cases"] += [
            c for c in dict.fromkeys(r.case for r in recs) if c not in entry["cases"]
        ]
        entry["checks"] += [_label(r) for r in recs]

    for case, failed in by_case.items():
        for r in [r for r in failed if r.category == "contract"]:
            add(_contract_key(r), "contract", [r], r.result.message[:300])
        rest = [r for r in failed if r.category != "contract"]
        events = _rng_only(failed)
        if events:
            add(
                ("rng_event", tuple(e["event"] for e in events)),
                "rng_event",
                rest,
                "fails only when the RNG returns "
                + "; ".join(
                    f"{e['what']} (real generators: {e['real_probability_per_draw']})"
                    for e in events
                ),
                events=events,
            )
        elif any(r.category == "invariant" for r in rest):
            first = next(r for r in rest if r.category == "invariant")
            add(("invariant", case), "invariant", rest, first.result.message[:300])
        elif any(r.category == "exactness" for r in rest):
            add(("deviation", case), "deviation", rest, _deviation_summary(rest))
        elif rest:
            add(("standard_rule", case), "standard_rule", rest, _deviation_summary(rest))
    order = {"contract": 0, "invariant": 1, "deviation": 2, "rng_event": 3, "standard_rule": 4}
    return sorted(merged.values(), key=lambda f: order[f["kind"]])


def _deviation_summary(records: list[CheckRecord]) -> str:
    tvs = [
        t for t in (r.result.details.get("observed_tv_binned") for r in records) if t is not None
    ]
    worst = f"; largest observed binned TV {max(tvs):.3g}" if tvs else ""
    return f"{len(records)} statistical checks failed ({', '.join(r.check for r in records[:6])}){worst}"


def run_reach(records: Iterable[CheckRecord]) -> dict | None:
    """The run's adversarial-RNG reach, from the adversarial records' `rng_reach` details (None: none ran)."""
    summaries = [
        s
        for s in (r.result.details.get("rng_reach") for r in records if r.check == ADVERSARIAL)
        if s
    ]
    if not summaries:
        return None
    reached = [s for s in summaries if s["reached"]]
    chosen = reached[0] if reached else summaries[0]
    methods: dict[str, int] = {}
    for s in summaries:
        for name, usage in s["methods"].items():
            methods[name] = methods.get(name, 0) + usage["calls"]
    return {
        "reached": bool(reached),
        "cases_reached": len(reached),
        "cases": len(summaries),
        "generator_methods_called": methods,
        "message": chosen["message"],
    }
