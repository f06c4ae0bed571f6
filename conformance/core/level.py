"""What a level declares to the core, and the hooks the driver (`core.driver`) calls, in this order per case:

    plan (core.planning, from the level's registered checks) -> invariants -> sample -> registered checks
    -> confirmation (only where nothing but standard-rule checks failed) -> verdict (core.records) -> report

A level is a subclass of `Level` with its name, its registered statistical checks (`core.registry.StatCheck`,
each carrying its runner and its plan), its reference adapter and its mutant zoo; it overrides the hooks it
needs. The defaults are those of a level with nothing to add at that step.
"""

from __future__ import annotations

import importlib
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..loader import load_adapter

from .mutants import REJECTED, MutantSpec  # noqa: F401 -- REJECTED: re-exported
from .profiles import Profile
from .records import CheckRecord
from .registry import StatCheck
from .report import SuiteResult


def named_cases(
    cases: Sequence[Any], names: Sequence[str] | None, level: str, where: str = ""
) -> list:
    """`cases` (`names` None), else those named, in `cases`' order; a ValueError names the unknown ones."""
    if names is None:
        return list(cases)
    unknown = sorted(set(names) - {c.name for c in cases})
    if unknown:
        raise ValueError(
            f"cases: unknown {level}-level case names {unknown}{where}; known: {[c.name for c in cases]}"
        )
    return [c for c in cases if c.name in set(names)]


@dataclass
class CaseOutcome:
    """What one case produced, wherever it ran (returned by a worker: plain data, picklable)."""

    case: str
    records: list[CheckRecord] = field(default_factory=list)
    entry: dict = field(default_factory=dict)  # the case's summary in the report
    inconclusive: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # exactspec / numpy / torch versions where it ran
    environment: dict = field(default_factory=dict)
    # what the level's confirmation reads from the case's sample (`Level.confirm_input`)
    sampled: Any = None


class Level:
    """Base declaration of a level; see the module docstring."""

    name: str = ""
    checks: tuple[StatCheck, ...] = ()
    #: The level's settings at each profile name (`core.settings.Settings` subclasses from its `settings.py`).
    profile_settings: Mapping[str, Any] = {}
    #: The method an adapter of this level offers, for messages ("verify(target_probs, ...)"); None: the level
    #: certifies something else than an adapter (`own_input`), and `input_hint` says what.
    adapter_signature: str | None = None
    input_hint: str = ""
    #: Where an object offers several levels, "auto" takes the one with the highest priority.
    auto_priority: int = 0
    #: The level runs confirmatory tests after a standard-rule failure (`confirm`; the alpha table states their share).
    has_confirmation: bool = False
    reference_spec: str | None = None  # "MODULE:NAME" of the level's exact reference adapter
    #: "MODULE:NAME" of the level's mutant zoo (`mutants`): its `MutantSpec`s, or a function of the profile name that
    #: returns them. Named, not imported: a zoo may need what the declaration must not (torch, servers, the campaign
    #: that collects a served mutant's samples, which itself certifies with this level).
    zoo: str | None = None
    default_impls: tuple[
        str, ...
    ] = ()  # what the pytest suite certifies at this level when no --exactspec-impl is given
    #: Smallest n the planner returns for a case with a planning check.
    min_n: int = 2
    #: Each case on a fresh instance, so cases can run in workers (False: one shared object, in this process).
    per_case_instances: bool = True

    # --- cases and planning ------------------------------------------------------------------------
    def select_cases(
        self, profile: Profile, impl: Any = None, names: Sequence[str] | None = None
    ) -> list:
        """The cases a run of `profile` uses (`names`: only those; an unknown name is a ValueError)."""
        raise NotImplementedError

    def representative_cases(self, profile: Profile) -> list:
        """The cases the alpha table states (default: those a run of `profile` selects without an implementation)."""
        return self.select_cases(profile)

    def case_epsilon(self, case: Any, profile: Profile) -> float:
        """The binned TV a case's n is planned to detect (the profile's target of this level by default)."""
        return float(profile.settings(self.name).target_tv)

    def fixed_n(self, case: Any, profile: Profile) -> int | None:
        """n of a case that no registered check plans (PIT and greedy cases; None: nothing to sample)."""
        return None

    def max_n(self, profile: Profile) -> int | None:
        """Cap on a case's n (reported in the plan when it binds); None: never capped."""
        return getattr(profile.settings(self.name), "max_rounds", None)

    # --- implementations ---------------------------------------------------------------------------
    def offers(self, obj: Any) -> bool:
        """Does `obj` offer this level's interface (`adapter_signature`)? The loader asks every level."""
        return False

    def own_input(self, impl: Any) -> tuple[Any, str] | None:
        """(what is certified, its name) for a level that certifies something else than an adapter (the engine
        level's pair of sample files); None: `impl` names an adapter, which the loader loads."""
        return None

    def load(self, spec: str) -> Any:
        """A fresh instance of the adapter `spec` names, at this level."""
        return load_adapter(spec, level=self.name).adapter

    def harness(self, impl: Any, name: str) -> Any:
        """What the hooks below run on (a harness around the implementation, by default the object itself)."""
        return impl

    # --- one case ------------------------------------------------------------------------------------
    def invariants(self, subject: Any, case: Any, profile: Profile) -> list[CheckRecord]:
        """Hard checks before sampling (contract, invariants, determinism)."""
        return []

    def sample(
        self, subject: Any, case: Any, profile: Profile, plan: dict
    ) -> tuple[Any, list[CheckRecord]]:
        """The statistical sample of the case (None: nothing to test) and hard records about it. By default the
        case itself: a level whose cases carry their data (the engine level's prompts) samples nothing."""
        return case, []

    def case_entry(self, case: Any, sample: Any, records: list[CheckRecord]) -> dict:
        """The case's summary in the report."""
        summary = getattr(case, "summary", None)
        return dict(summary() if callable(summary) else {}, name=case.name)

    def confirm_input(self, sample: Any) -> Any:
        """What `confirm` needs from the case's sample (plain, picklable data: the confirmation may run elsewhere)."""
        return None

    def confirm(
        self,
        subject: Any,
        case: Any,
        profile: Profile,
        records: list[CheckRecord],
        rate: float,
        plan: dict,
        sampled: Any = None,
    ) -> tuple[list[CheckRecord], list[str]]:
        """Confirmatory exactness records after a standard-rule failure (`sampled`: `confirm_input` of the case's
        sample), and reasons the case stays unsettled."""
        return [], []

    # --- the run -------------------------------------------------------------------------------------
    def running(self) -> AbstractContextManager[None]:
        """What the level's cases run inside when they run in this process (the sequence level: one torch thread)."""
        return nullcontext()

    def about(self, impl: Any) -> tuple[list[str], dict]:
        """Notes and report fields the implementation states about itself (its `certificate_notes`)."""
        return list(getattr(impl, "certificate_notes", []) or []), {}

    def run_extras(self, subject: Any, profile: Profile) -> list[CheckRecord]:
        """Records of the run as a whole, after every case (the rule level's generated edge cases)."""
        return []

    def new_result(self, impl_name: str, profile: Profile) -> SuiteResult:
        return SuiteResult(level=self.name, impl=impl_name, profile=profile)

    def finish(self, result: SuiteResult, cases: list, impl: Any = None) -> None:
        """Level-specific fields of the finished result (findings, evidence, reasons)."""

    # --- reports and the mutant zoo --------------------------------------------------------------------
    def summary(self, result: SuiteResult) -> str:
        """The text `exactspec certify` and the pytest summary print."""
        return f"exactspec {self.name} level: {result.impl} [profile {result.profile.name}] -> {result.verdict}"

    def write_report(
        self, result: SuiteResult, out_dir: str | Path, impl_spec: str | None = None
    ) -> dict:
        """certificate.json and CERTIFICATE.md (and plots) of `result` under `out_dir`."""
        raise NotImplementedError

    def mutants(self, profile: str = "quick") -> list[MutantSpec]:
        """The level's kill-table rows: its mutants, then its valid variants (a level whose rows collect their samples
        up front sizes them for `profile`; the others run at the profile the driver is given): read from `zoo`."""
        if self.zoo is None:
            return []
        module, _, name = self.zoo.partition(":")
        rows = getattr(importlib.import_module(module), name)
        return list(rows(profile) if callable(rows) else rows)

    def first_token_failure(self, record: CheckRecord) -> bool:
        """Would a test of the first emitted token alone (plus the contract) have failed this record?"""
        return record.category == "contract"
