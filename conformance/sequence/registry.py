"""The sequence level's statistical checks: one entry each, with its runner (on a `SequenceRun`) and its plan.

An exact case's n is planned on its whole-sequence law (per batch row; at least `SequenceLevel.min_n`), never
capped below the profile's target; PIT cases take the profile's fixed number of sequences.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable

from ..core.profiles import Profile
from ..core.records import CheckRecord
from ..core.registry import CheckPlan, StatCheck
from .cases import Case

if TYPE_CHECKING:  # pragma: no cover
    from .exact_law import SequenceLaw


def row_tags(case: Case) -> list[str]:
    return [""] if case.batch == 1 else [f"_row{b}" for b in range(case.batch)]


@lru_cache(maxsize=None)
def case_laws(case: Case) -> "tuple[SequenceLaw, ...]":
    """The enumerated law of each batch row's sequences (tiny models: the same at every profile)."""
    # torch: the level's declaration reads this registry without it (the loader asks every level)
    from .exact_law import sequence_law
    from .models import case_models

    target, _, prompts = case_models(case)
    return tuple(
        sequence_law(target, p, case.max_new_tokens, case.sampling) for p in prompts[: case.batch]
    )


def _each_row(check: Callable, run: Any, rate: float, profile: Profile) -> list[CheckRecord]:
    """`check` on every batch row's samples against that row's law; its evidence goes into the run's."""
    out = []
    for law, samples, tag in zip(run.laws, run.rows, row_tags(run.case)):
        results, evidence = check(
            law,
            samples,
            rate,
            profile.false_pass_rate,
            tag,
            profile.sequence.min_expected(run.info["n"]),
        )
        run.evidence.update(evidence)
        out += [
            CheckRecord(run.impl, run.case.name, r.name, "exactness", r)
            for r in (results if isinstance(results, list) else [results])
        ]
    return out


def _pit_ks(run: Any, rate: float, profile: Profile) -> list[CheckRecord]:
    # torch: the level's declaration reads this registry without it
    from .pit import pit_ks_checks

    results, evidence = pit_ks_checks(run.values, rate, profile.false_pass_rate)
    run.evidence.update(evidence)
    return [CheckRecord(run.impl, run.case.name, r.name, "exactness", r) for r in results]


def _law_plans(case: Case) -> list[CheckPlan]:
    return [
        CheckPlan(f"sequence_chisquare{tag}", "lr", law=law.probs_with_impossible(), drives_n=True)
        for law, tag in zip(case_laws(case), row_tags(case))
    ]


def _marginal_plans(case: Case) -> list[CheckPlan]:
    return [
        CheckPlan(f"position_{t}_chisquare{tag}", "lr", law=law.position_law(t), min_expected=20.0)
        for law, tag in zip(case_laws(case), row_tags(case))
        for t in range(case.max_new_tokens)
    ]


def _sequence_law_check(*args: Any) -> Any:
    # torch: the level's declaration reads this registry without it
    from .checks import sequence_law_check

    return sequence_law_check(*args)


def _position_marginal_checks(*args: Any) -> Any:
    # torch: the level's declaration reads this registry without it
    from .checks import position_marginal_checks

    return position_marginal_checks(*args)


SEQUENCE_CHECKS: tuple[StatCheck, ...] = (
    StatCheck(
        name="sequence_law",
        category="exactness",
        applies=lambda c: c.level == "exact",
        instances=lambda c: [f"sequence_chisquare{t}" for t in row_tags(c)],
        run=lambda run, rate, prof: _each_row(_sequence_law_check, run, rate, prof),
        plan=lambda c, prof: _law_plans(c),
        what="whole generated sequence ~ the enumerated exact law (per batch row)",
    ),
    StatCheck(
        name="position_marginals",
        category="exactness",
        applies=lambda c: c.level == "exact",
        instances=lambda c: [
            f"position_{t}_chisquare{tag}" for tag in row_tags(c) for t in range(c.max_new_tokens)
        ],
        run=lambda run, rate, prof: _each_row(_position_marginal_checks, run, rate, prof),
        plan=lambda c, prof: _marginal_plans(c),
        what="token at each position ~ its exact marginal (per batch row)",
    ),
    StatCheck(
        name="pit_ks",
        category="exactness",
        applies=lambda c: c.level == "pit",
        instances=lambda c: ["pit_ks_id", "pit_ks_prob"],
        run=_pit_ks,
        plan=lambda c, prof: [
            CheckPlan(name, "ks", reach=float(c.max_new_tokens))
            for name in ("pit_ks_id", "pit_ks_prob")
        ],
        what="randomized PIT of every token uniform (KS), id and probability orderings",
    ),
)
