"""One result type and one certificate writer for every level.

Every run of the suite, rule, sequence or engine level, ends as a `SuiteResult` and is published as one
versioned JSON document (`document`, schema: conformance/report.schema.json, ``schema_version`` 2.1;
`read_certificate` also reads 2.0) beside
a Markdown rendering and optional plots, in one layout: ``certificate.json``, ``CERTIFICATE.md``, ``*.png``.
The Markdown renderer and the plots stay per level (their content differs), and a level's own sections go
in `SuiteResult.extra` (engine: ``engine``, ``reasons``); the JSON layout does not change.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from ...outcomes import Verdict
from ...stat_tests import ErrorBudget
from ...stat_tests.result import jsonable
from .. import CONTRACT_VERSION
from ..provenance import collect

from .levels import check_level
from .profiles import Profile
from .records import CATEGORIES, VERDICT_TEXT, CheckRecord, verdict_of

SCHEMA_VERSION = "2.1"
#: Versions `read_certificate` reads: 2.0 differs from 2.1 only in the names of the error rates.
READABLE_VERSIONS = ("2.0", "2.1")
#: 2.0 key -> 2.1 key, in checks[], budget and profile.
RENAMED_IN_2_1 = {"alpha": "false_fail_rate", "beta": "false_pass_rate"}
JSON_NAME, MARKDOWN_NAME = "certificate.json", "CERTIFICATE.md"


@dataclass
class SuiteResult:
    """Everything one run of one level on one implementation produced."""

    level: str
    impl: str
    profile: Profile
    records: list[CheckRecord] = field(default_factory=list)
    plan: dict = field(default_factory=dict)  # case name -> how its sample size was chosen
    cases: list[dict] = field(default_factory=list)  # case summaries for the report
    budget: dict = field(default_factory=dict)  # see summarize_budget
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)  # level-specific top-level fields of the document
    # why the run cannot certify though nothing counted failed
    inconclusive: list[str] = field(default_factory=list)
    # why its claim covers only a class of deviations
    qualified: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_level(self.level)

    @property
    def counted(self) -> list[CheckRecord]:
        """The records the verdict is taken from (a level's result may leave some out: `ignored`)."""
        ignored = set(self.ignored)
        return [r for r in self.records if f"{r.case}/{r.check}" not in ignored]

    @property
    def ignored(self) -> list[str]:
        """ "case/check" of the records the verdict ignores (none here; the engine level's void reports)."""
        return []

    @property
    def verdict(self) -> str:
        return verdict_of(self.counted, self.inconclusive, self.qualified)

    @property
    def passed(self) -> bool:
        return self.verdict == Verdict.CERTIFIED

    @property
    def failed(self) -> list[CheckRecord]:
        return [r for r in self.records if not r.passed]

    @property
    def statistical(self) -> list[CheckRecord]:
        return [r for r in self.records if r.statistical]

    def first_failure(self) -> CheckRecord | None:
        order = {c: i for i, c in enumerate(CATEGORIES)}
        bad = sorted(self.failed, key=lambda r: order[r.category])
        return bad[0] if bad else None


def summarize_budget(budget: ErrorBudget, records: Iterable[CheckRecord]) -> dict:
    """The run's error budget: what was promised (total, per check) and what the statistical records spent."""
    stat = [r.result for r in records if r.statistical]
    tvs = [t.detectable_tv for t in stat if np.isfinite(t.detectable_tv)]
    kolmogorov = [
        t.details["detectable_kolmogorov"] for t in stat if t.details.get("detectable_kolmogorov")
    ]
    spent = float(sum(t.false_fail_rate for t in stat))
    return {
        "total_false_fail": budget.total_false_fail,
        "n_checks": int(budget.n_checks),
        "per_check_false_fail_rate": budget.per_check_false_fail_rate,
        "false_pass_rate": budget.false_pass_rate,
        "n_statistical_records": len(stat),
        "false_fail_rate_spent": spent,
        "within_budget": spent <= budget.total_false_fail * (1 + 1e-9),
        "worst_detectable_tv": max(tvs) if tvs else None,
        "best_detectable_tv": min(tvs) if tvs else None,
        "worst_detectable_kolmogorov": max(kolmogorov) if kolmogorov else None,
        "failed": [f"{r.case}/{r.check}" for r in records if r.statistical and not r.passed],
    }


def provenance(impl_spec: str) -> dict:
    """Where and with what the run happened (`conformance.provenance.collect`), as plain JSON."""
    return jsonable(collect(impl_spec))


def document(result: SuiteResult, impl_spec: str | None = None) -> dict:
    """The versioned JSON certificate of `result` (same top-level layout at every level)."""
    doc = {
        "schema_version": SCHEMA_VERSION,
        "level": result.level,
        "contract_version": CONTRACT_VERSION,
        "impl": result.impl,
        "verdict": result.verdict,
        "verdict_text": VERDICT_TEXT[result.verdict],
        "passed": result.passed,
        "profile": result.profile.to_dict(result.level),
        "budget": result.budget,
        "seconds": round(float(result.seconds), 2),
        "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "provenance": provenance(impl_spec or result.impl),
        "plan": result.plan,
        "cases": result.cases,
        "notes": list(result.notes),
        "inconclusive": list(result.inconclusive),
        "voided": list(result.ignored),
        "checks": [r.to_dict() for r in result.records],
    }
    for key, value in result.extra.items():
        doc.setdefault(key, value)
    return jsonable(doc)


def read_certificate(source: str | Path | dict) -> dict:
    """A certificate document (a path to certificate.json, or the parsed dict) in the 2.1 layout: a 2.0 document
    gets its renamed keys (`RENAMED_IN_2_1`); any other version is a ValueError naming it."""
    doc = json.loads(Path(source).read_text()) if isinstance(source, (str, Path)) else dict(source)
    version = doc.get("schema_version")
    if version not in READABLE_VERSIONS:
        raise ValueError(f"schema_version: this reader reads {READABLE_VERSIONS}, got {version!r}")
    if version == "2.0":
        rename = lambda d: {RENAMED_IN_2_1.get(k, k): v for k, v in d.items()}  # noqa: E731
        doc["checks"] = [rename(c) for c in doc.get("checks", [])]
        for key in ("budget", "profile"):
            if isinstance(doc.get(key), dict):
                doc[key] = rename(doc[key])
        doc["schema_version"] = SCHEMA_VERSION
        doc["read_from_version"] = version
    return doc


MarkdownRenderer = Callable[[SuiteResult, dict, list[str]], str]
PlotWriter = Callable[[SuiteResult, Path], list[str]]


def write_report(
    result: SuiteResult,
    out_dir: str | Path,
    render_markdown: MarkdownRenderer,
    plots: PlotWriter | None = None,
    impl_spec: str | None = None,
) -> dict:
    """Write certificate.json, CERTIFICATE.md and the plots into `out_dir`; return their paths and the document."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    doc = document(result, impl_spec)
    plot_files = plots(result, out) if plots is not None else []
    (out / JSON_NAME).write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    (out / MARKDOWN_NAME).write_text(render_markdown(result, doc, plot_files))
    return {
        "json": str(out / JSON_NAME),
        "markdown": str(out / MARKDOWN_NAME),
        "plots": [str(out / p) for p in plot_files],
        "document": doc,
    }
