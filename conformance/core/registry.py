"""The statistical checks of each level, declared once; the error budget is derived from them.

Each level lists its statistical checks (name, category, which cases it applies to, the names of the
tests it runs on a case). The level's runner runs exactly what `planned_checks` says, through
`run_registered` (which refuses a check function whose records differ from the declaration), and
`budget_for` splits the profile's total false-fail rate over exactly those tests. Adding a check is one
entry here plus its function in the level's runner table: the stated false-fail rate follows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from ...stat_tests import ErrorBudget

from .profiles import LEVELS, Profile, get_profile
from .records import STATISTICAL_CATEGORIES, CheckRecord


@dataclass(frozen=True, kw_only=True)
class StatCheck:
    """One statistical check family of a level."""

    name: str
    category: str  # "exactness" | "standard_rule"
    applies: Callable[[Any], bool]  # does the check run on this case?
    instances: Callable[[Any], list[str]]  # names of the tests (records) it produces on an applicable case
    what: str = ""

    def __post_init__(self) -> None:
        if self.category not in STATISTICAL_CATEGORIES:
            raise ValueError(f"category must be one of {STATISTICAL_CATEGORIES}, got {self.category!r}")

    def planned(self, case: Any) -> list[str]:
        return list(self.instances(case)) if self.applies(case) else []


def _row_tags(case: Any) -> list[str]:
    return [""] if case.batch == 1 else [f"_row{b}" for b in range(case.batch)]


RULE_CHECKS: tuple[StatCheck, ...] = (
    StatCheck(name="position", category="exactness", applies=lambda c: not getattr(c, "varying", False),
              instances=lambda c: [f"position_{j}" for j in range(1, c.k + 2)],
              what="token at position j (rounds with N >= j) ~ p_j"),
    StatCheck(name="pit_position", category="exactness", applies=lambda c: getattr(c, "varying", False),
              instances=lambda c: [f"pit_position_{j}" for j in range(1, c.k + 2)],
              what="rows vary by round: randomized PIT of the token at position j under its round's p_j ~ U(0,1) (KS)"),
    StatCheck(name="hashed_position", category="exactness", applies=lambda c: c.V >= 1024 and not getattr(c, "varying", False),
              instances=lambda c: ["hashed_position_1"],
              what="large V: token at position 1 binned by a hash of its id (separates tokens the p-sorted bins pool)"),
    StatCheck(name="completed_stream", category="exactness", applies=lambda c: c.stream_enumerable,
              instances=lambda c: ["completed_stream"], what="completed stream ~ prod_j p_j"),
    StatCheck(name="tuple_law", category="standard_rule", applies=lambda c: c.enumerable,
              instances=lambda c: ["tuple_law"], what="emitted tuple ~ the standard rule's exact law"),
    StatCheck(name="tokens_per_round", category="standard_rule", applies=lambda c: True,
              instances=lambda c: ["tokens_per_round"], what="tokens per round ~ the standard rule's law"),
    StatCheck(name="acceptance_rate", category="standard_rule", applies=lambda c: "acceptance_rate" in c.tags,
              instances=lambda c: ["acceptance_rate"],
              what="first draft accepted ~ Bernoulli(alpha_1) (exact binomial), rounds sized for a 0.5 % bias"),
)

SEQUENCE_CHECKS: tuple[StatCheck, ...] = (
    StatCheck(name="sequence_law", category="exactness", applies=lambda c: c.level == "exact",
              instances=lambda c: [f"sequence_chisquare{t}" for t in _row_tags(c)],
              what="whole generated sequence ~ the enumerated exact law (per batch row)"),
    StatCheck(name="position_marginals", category="exactness", applies=lambda c: c.level == "exact",
              instances=lambda c: [f"position_{t}_chisquare{tag}" for tag in _row_tags(c)
                                   for t in range(c.max_new_tokens)],
              what="token at each position ~ its exact marginal (per batch row)"),
    StatCheck(name="pit_ks", category="exactness", applies=lambda c: c.level == "pit",
              instances=lambda c: ["pit_ks_id", "pit_ks_prob"],
              what="randomized PIT of every token uniform (KS), id and probability orderings"),
)

#: The engine level's reference self-check: its failure voids the prompt's PIT and makes the run INCONCLUSIVE.
REPORTED_PROBS_CHECK = "reference_reported_probs"


def _sampling(case: Any) -> bool:
    return not case.greedy


ENGINE_CHECKS: tuple[StatCheck, ...] = (  # a case is one prompt (engine.level.EngineCase)
    StatCheck(name="position_marginals", category="exactness", applies=_sampling,
              instances=lambda c: [f"position_{j}_permutation" for j in range(1, c.positions + 1)],
              what="token at position j (or END) has the same law in both samples (permutation test)"),
    StatCheck(name="prefix_tuple", category="exactness", applies=lambda c: _sampling(c) and c.positions > 1,
              instances=lambda c: [f"prefix_{c.positions}_permutation"],
              what="the first m tokens as a tuple have the same law in both samples (permutation test)"),
    StatCheck(name="reported_probs", category="exactness", applies=lambda c: _sampling(c) and c.reported,
              instances=lambda c: [REPORTED_PROBS_CHECK],
              what="the reference's first tokens follow its reported first-token probabilities"),
    StatCheck(name="pit_ks", category="exactness", applies=lambda c: _sampling(c) and c.pit,
              instances=lambda c: ["pit_ks"],
              what="randomized PIT of the candidate's tokens under the reference's reports is U(0,1) (exact KS)"),
)

TREE_CHECKS: tuple[StatCheck, ...] = (  # a case is a tree shape and row model (conformance.tree.cases.TreeCase)
    StatCheck(name="position", category="exactness", applies=lambda c: True,
              instances=lambda c: [f"position_{j}" for j in range(1, c.max_length + 1)],
              what="token at position j (rounds with N >= j) ~ the target row of its emitted prefix"),
    StatCheck(name="completed_stream", category="exactness", applies=lambda c: c.stream_enumerable,
              instances=lambda c: ["completed_stream"], what="completed stream ~ the target's law"),
    StatCheck(name="path_law", category="standard_rule", applies=lambda c: c.enumerable,
              instances=lambda c: ["path_law"], what="emitted path ~ the tree rule's exact law (drafts drawn)"),
    StatCheck(name="tokens_per_round", category="standard_rule", applies=lambda c: c.enumerable,
              instances=lambda c: ["tokens_per_round"], what="tokens per round ~ the tree rule's law"),
)

REGISTRY: dict[str, tuple[StatCheck, ...]] = {"rule": RULE_CHECKS, "sequence": SEQUENCE_CHECKS,
                                              "engine": ENGINE_CHECKS, "tree": TREE_CHECKS}


def _level_checks(level: str) -> tuple[StatCheck, ...]:
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    return REGISTRY[level]


def planned_checks(level: str, case: Any) -> list[tuple[StatCheck, list[str]]]:
    """The statistical checks of `level` that run on `case`, each with the names of its tests."""
    return [(check, check.planned(case)) for check in _level_checks(level) if check.applies(case)]


def planned_names(level: str, case: Any) -> list[str]:
    return [name for _, names in planned_checks(level, case) for name in names]


def budget_for(level: str, profile: Profile | str, cases: Iterable[Any]) -> ErrorBudget:
    """The profile's total false-fail rate of `level`, split (Bonferroni) over exactly the statistical tests
    that a run on `cases` performs (at least one, so a run without statistical checks has a valid budget)."""
    prof = get_profile(profile)
    n_checks = sum(len(planned_names(level, case)) for case in cases)
    return ErrorBudget(total_false_fail=prof.total_false_fail(level), n_checks=max(1, n_checks), false_pass_rate=prof.false_pass_rate)


def run_registered(level: str, case: Any, runners: Mapping[str, Callable[[], list[CheckRecord]]]) -> list[CheckRecord]:
    """Run the planned statistical checks of `case` with `runners[check.name]()`; each must produce exactly the
    declared records, else RuntimeError (the budget would no longer match what ran)."""
    out: list[CheckRecord] = []
    for check, names in planned_checks(level, case):
        if check.name not in runners:
            raise RuntimeError(f"{level} check {check.name!r} is declared but has no runner")
        records = runners[check.name]()
        got = [r.check for r in records]
        if got != names or any(r.category != check.category for r in records):
            raise RuntimeError(f"{level} check {check.name!r} on {getattr(case, 'name', case)!r} produced "
                               f"{got} ({[r.category for r in records]}), declared {names} ({check.category})")
        out += records
    return out
