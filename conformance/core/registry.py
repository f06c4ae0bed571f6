"""A level's statistical checks, each declared once with its runner and its plan; the error budget, the sample
sizes and the alpha table are derived from the declarations.

A `StatCheck` says which cases it applies to, the names of the tests (records) it produces on a case, how it
runs on the level's sample (`run`) and how each of its tests is sized and guaranteed (`plan`: one `CheckPlan`
per test: the test's kind, the null law on its categories, the share of the case's n it sees, and whether the
case's n is planned for it). `budget_for` splits the profile's total false-fail rate over exactly the tests a
run plans, `run_registered` runs them (refusing records that differ from the declaration), `core.planning`
sizes a case from the plans and `alpha_table` states each test's realised false-fail rate from them.

Adding a statistical check to a level is one entry in that level's registry (`<level>/registry.py`) plus its
function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol, Sequence, cast

import numpy as np

from ...stat_tests import ErrorBudget
from .levels import get_level
from .profiles import Profile, get_profile
from .records import STATISTICAL_CATEGORIES, CheckRecord

#: Test kinds whose false-fail guarantee the alpha table knows (`alpha_table.TEST_KINDS`).
TEST_KINDS = (
    "lr",
    "ks",
    "binomial",
    "binomial_upper",
    "permutation",
    "multinomial",
    "sequential",
    "fisher",
)


@dataclass(frozen=True)
class CheckPlan:
    """How one test is sized and guaranteed.

    `law`: the null law on the test's categories (likelihood-ratio tests; None for the others); `reach`: the
    expected number of the test's observations per unit of the case's n (P(N >= j) for position j of a round,
    values per sequence for a PIT); `drives_n`: the case's n is planned so that this test detects the case's
    target TV; `min_expected`: the pooling threshold the test runs with (None: the level's
    `settings.min_expected` at the test's n); `law_at`: instead of `law`, when the test's categories depend on
    its n (the rule level's hash bins)."""

    name: str
    test: str = "lr"
    law: np.ndarray | None = None
    reach: float = 1.0
    drives_n: bool = False
    min_expected: float | None = None
    # a law whose categories depend on the test's n
    law_at: Callable[[float], np.ndarray] | None = None

    def law_for(self, n: float) -> np.ndarray | None:
        """The null law of the test at n observations."""
        return self.law_at(n) if self.law_at is not None else self.law

    def __post_init__(self) -> None:
        if self.test not in TEST_KINDS:
            raise ValueError(f"test must be one of {TEST_KINDS}, got {self.test!r}")
        if self.drives_n and (self.law is None or not self.reach > 0):
            raise ValueError(f"{self.name}: a test that drives n needs a law and a positive reach")


Runner = Callable[[Any, float, Profile], list[CheckRecord]]
Planner = Callable[[Any, Profile], list[CheckPlan]]


@dataclass(frozen=True, kw_only=True)
class StatCheck:
    """One statistical check family of a level: what it tests, on which cases, how it runs and is planned."""

    name: str
    category: str  # "exactness" | "standard_rule"
    applies: Callable[[Any], bool]  # does the check run on this case?
    # names of the tests (records) it produces on an applicable case
    instances: Callable[[Any], list[str]]
    run: Runner  # (the level's sample, per-check false-fail rate, profile) -> exactly those records
    plan: Planner  # (case, profile) -> one CheckPlan per instance, in the same order
    what: str = ""

    def __post_init__(self) -> None:
        if self.category not in STATISTICAL_CATEGORIES:
            raise ValueError(
                f"category must be one of {STATISTICAL_CATEGORIES}, got {self.category!r}"
            )

    def planned(self, case: Any) -> list[str]:
        return list(self.instances(case)) if self.applies(case) else []

    def plans(self, case: Any, profile: Profile) -> list[CheckPlan]:
        """The plan of each test on `case`; RuntimeError if they do not match the declared names."""
        plans = list(self.plan(case, profile))
        if [p.name for p in plans] != self.planned(case):
            raise RuntimeError(
                f"check {self.name!r} on {getattr(case, 'name', case)!r}: plans "
                f"{[p.name for p in plans]}, declares {self.planned(case)}"
            )
        return plans


def one_test(
    name: str,
    category: str,
    applies: Callable[[Any], bool],
    run: Callable[[Any, float, Profile], CheckRecord],
    plan: Callable[[Any, Profile], CheckPlan],
    what: str = "",
    family: str | None = None,
) -> StatCheck:
    """A check family of one test, `name` (the family is called `family`, by default the same): `run` returns its
    one record, `plan` its one CheckPlan."""
    return StatCheck(
        name=family or name,
        category=category,
        applies=applies,
        instances=lambda case: [name],
        run=lambda sample, rate, profile: [run(sample, rate, profile)],
        plan=lambda case, profile: [plan(case, profile)],
        what=what,
    )


class Declared(Protocol):
    """What this module reads of a level's declaration (`core.level.Level`, which is made of the checks declared here):
    its name and its checks."""

    name: str

    @property
    def checks(self) -> Sequence[StatCheck]: ...


def _checks(level: "str | Declared | Sequence[StatCheck]") -> Sequence[StatCheck]:
    if isinstance(level, str):
        return get_level(level).checks
    # a Level, or a sequence of checks
    return cast("Sequence[StatCheck]", getattr(level, "checks", level))


def planned_checks(
    level: "str | Declared | Sequence[StatCheck]", case: Any
) -> list[tuple[StatCheck, list[str]]]:
    """The statistical checks of `level` that run on `case`, each with the names of its tests."""
    return [(check, check.planned(case)) for check in _checks(level) if check.applies(case)]


def planned_names(level: "str | Declared | Sequence[StatCheck]", case: Any) -> list[str]:
    return [name for _, names in planned_checks(level, case) for name in names]


def budget_for(
    level: "str | Declared", profile: Profile | str, cases: Iterable[Any]
) -> ErrorBudget:
    """The profile's total false-fail rate of `level`, split (Bonferroni) over exactly the statistical tests
    that a run on `cases` performs (at least one, so a run without statistical checks has a valid budget)."""
    prof = get_profile(profile)
    name = level if isinstance(level, str) else level.name
    n_checks = sum(len(planned_names(level, case)) for case in cases)
    return ErrorBudget(
        total_false_fail=prof.total_false_fail(name),
        n_checks=max(1, n_checks),
        false_pass_rate=prof.false_pass_rate,
    )


def run_registered(
    level: "str | Declared | Sequence[StatCheck]",
    case: Any,
    sample: Any,
    rate: float,
    profile: Profile,
) -> list[CheckRecord]:
    """Run the planned statistical checks of `case` on `sample`, each at `rate`; each must produce exactly the
    declared records, else RuntimeError (the budget would no longer match what ran)."""
    out: list[CheckRecord] = []
    for check, names in planned_checks(level, case):
        records = check.run(sample, rate, profile)
        got = [r.check for r in records]
        if got != names or any(r.category != check.category for r in records):
            raise RuntimeError(
                f"check {check.name!r} on {getattr(case, 'name', case)!r} produced "
                f"{got} ({[r.category for r in records]}), declared {names} ({check.category})"
            )
        out += records
    return out
