"""The one programmatic entry: `certify(impl, level=..., profile=...)` -> a typed `Certificate`.

    from exactspec.conformance import certify
    cert = certify("my_rule:Verifier", profile="quick")            # the level the adapter offers
    cert = certify(MyVerifier(), level="rule", workers=2)          # an object, cases in 2 local processes
    cert = certify("my_rule:Verifier", scheduler="tcp://host:8786")  # cases on a Dask cluster
    cert = certify(("reference.jsonl", "candidate.jsonl"), level="engine")  # a serving engine's sample files
    cert.verdict, cert.passed, cert.false_fail_rate, cert.worst_detectable_tv; cert.write("report/")

What `exactspec certify`, `exactspec certify-samples` and the pytest plugin run, without a command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from .core.driver import run_level
from ..outcomes import Verdict
from .core.executor import case_executor, module_file
from .core.level import CaseOutcome
from .core.levels import get_level
from .core.profiles import get_profile
from .core.report import SuiteResult, document
from .loader import load_adapter


@dataclass(frozen=True)
class Certificate:
    """The outcome of one certification run: its verdict and what it rules out, and the full result."""

    result: SuiteResult
    impl_spec: str | None = None

    @property
    def verdict(self) -> Verdict:
        return Verdict(self.result.verdict)

    @property
    def passed(self) -> bool:
        """CERTIFIED (EXACT_NOT_STANDARD is exact too, but not the standard rule: see `verdict`)."""
        return self.result.passed

    @property
    def level(self) -> str:
        return self.result.level

    @property
    def profile(self) -> str:
        return self.result.profile.name

    @property
    def false_fail_rate(self) -> float:
        """The run's total false-fail rate: P(a check fails | the implementation is exact) is at most this."""
        return float(self.result.budget["total_false_fail"])

    @property
    def false_pass_rate(self) -> float:
        """Per check: P(pass | a deviation of at least the check's detectable size) is at most this."""
        return float(self.result.budget["false_pass_rate"])

    @property
    def worst_detectable_tv(self) -> float | None:
        """The largest binned TV any of the run's statistical checks is sized to detect (None: no such check)."""
        return self.result.budget.get("worst_detectable_tv")

    @property
    def reasons(self) -> list[str]:
        """Why the run is INCONCLUSIVE (empty otherwise)."""
        return list(self.result.inconclusive)

    def document(self) -> dict:
        """The versioned JSON certificate (schema: conformance/report.schema.json)."""
        return document(self.result, self.impl_spec)

    def write(self, out_dir: str | Path) -> dict:
        """certificate.json, CERTIFICATE.md (and plots) under `out_dir`; their paths and the document."""
        return get_level(self.level).write_report(self.result, out_dir, self.impl_spec)


def _builtins(spec: Any) -> dict:
    """Generation-level builtin names ("reference", "gpu_impl", ...) for a spec without ':' (imports torch)."""
    if not isinstance(spec, str) or ":" in spec:
        return {}
    try:
        from .sequence.adapters import BUILTIN
    except ImportError:  # no torch: a builtin name cannot be meant
        return {}
    return BUILTIN


def resolve(impl: Any, level: str = "auto") -> tuple[str, Any, str, str | None]:
    """(level, object to certify, its name in the report, spec a worker can load it from or None)."""
    own = None if level == "auto" else get_level(level).own_input(impl)
    # a level that certifies something else than an adapter (the engine level's sample files)
    if own is not None:
        return level, own[0], own[1], None
    loaded = load_adapter(impl, level=level, builtins=_builtins(impl))
    spec = impl if isinstance(impl, str) else None
    name = spec or str(getattr(loaded.adapter, "name", type(loaded.adapter).__name__))
    return loaded.level, loaded.adapter, name, spec


def certify(
    impl: Any,
    level: str = "auto",
    profile: str = "standard",
    *,
    cases: Sequence[Any] | None = None,
    workers: int = 1,
    scheduler: str | None = None,
    fail_fast: bool = False,
    hypothesis: bool = True,
    progress: Callable[[CaseOutcome], None] | None = None,
) -> Certificate:
    """Certify `impl` at `level` ("auto": the level its adapter offers) and `profile`.

    `impl`: "MODULE:NAME", a generation-level builtin name, an adapter object, or (engine level) a pair of sample
    files. `cases`: case names or case objects (default: the profile's). Cases run serially here (`workers` 1), in
    `workers` local processes, or on the Dask cluster at `scheduler`; the verdicts and p-values are the same either
    way."""
    level_name, obj, name, spec = resolve(impl, level)
    lvl = get_level(level_name)
    selected = None if cases is None else list(cases)
    # names: the level's cases of those names
    if selected is not None and all(isinstance(c, str) for c in selected):
        selected = lvl.select_cases(_profile(profile), obj, selected)
    upload = [path for path in [module_file(spec)] if path is not None and scheduler]
    with case_executor(workers, scheduler, upload) as executor:
        result = run_level(
            lvl,
            obj,
            name,
            profile=profile,
            cases=selected,
            executor=executor,
            fail_fast=fail_fast,
            spec=spec,
            extras=hypothesis,
            progress=progress,
        )
    return Certificate(result, spec or name)


def _profile(name: str) -> Any:
    return get_profile(name)
