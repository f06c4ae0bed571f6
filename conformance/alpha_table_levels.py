"""The tree and engine levels' rows of the per-check false-fail table (`alpha_table`, docs/alpha-table.md).

Both derive their checks from the registry (`core.registry.TREE_CHECKS`, `ENGINE_CHECKS`) and the level's own
cases, so the table goes stale (and its test fails) when cases or checks change; an unknown check raises.

* tree: every statistical check is the rule level's LR test at the planned rounds
  (`tree.suite.plan_rounds`); laws and n at the expected n, as for the rule level. Where the emitted
  prefixes' target rows differ, the position-j check is the randomized PIT under each round's own row, with
  the exact KS law (rounds reach j by their earlier tokens only, so the PIT values are i.i.d. uniform).
* engine: n comes from the sample files, so the rows give the per-check nominal rate for one prompt carrying
  every check (`prompts` prompts split the total further) and how each tail is guaranteed.
"""

from __future__ import annotations

import numpy as np

from .alpha_table import check_row
from .core.profiles import get_profile
from .core.registry import budget_for, planned_checks

#: The kind of each engine check family of the registry (its guarantee: `alpha_table.STATED_KINDS`).
ENGINE_KINDS = {"position_marginals": "permutation", "prefix_tuple": "permutation",
                "reported_probs": "multinomial", "pit_ks": "pit_ks_engine"}


def _stale(level: str, case_name: str, planned: list[str], made) -> RuntimeError:
    return RuntimeError(f"alpha table out of date for {level} case {case_name}: registry plans {planned}, "
                        f"table has {sorted(made)}")


def _position_laws(case, rounds: int, me) -> dict:
    """position_j -> (law, expected n, min expected, rows differ) of the tree case's position checks."""
    out = {}
    for j in range(1, case.max_length + 1):
        if not case.enumerable:  # no path law: rows must not depend on the prefix; n_j <= rounds
            if case.model.by != "depth" and j > 1:
                raise RuntimeError(f"alpha table: tree case {case.name}: position {j} law needs the path law")
            out[f"position_{j}"] = (case.model.rows((0,) * (j - 1))[0], rounds, me(rounds), False)
            continue
        reach = [(path, prob) for path, prob in case.path_law.items() if len(path) >= j and prob > 0]
        mass = sum(prob for _, prob in reach)
        rows = np.array([case.model.rows(tuple(path[: j - 1]))[0] for path, _ in reach])
        weights = np.array([prob for _, prob in reach]) / mass
        n_j = rounds * mass
        out[f"position_{j}"] = (weights @ rows, n_j, me(int(n_j)), not np.allclose(rows, rows[0], atol=0, rtol=1e-12))
    return out


def _tree_laws(case, rounds: int, profile) -> dict:
    """check name -> (law, expected n, min expected, rows differ) for every tree-level check (as `tree.checks`)."""
    me = profile.tree.min_expected
    out = _position_laws(case, rounds, me)
    if case.stream_enumerable:
        out["completed_stream"] = (case.stream_law, rounds, me(rounds), False)
    if case.enumerable:
        law = np.append(np.array(list(case.path_law.values())), 0.0)
        out["path_law"] = (law / law.sum(), rounds, me(rounds), False)
        count = case.length_law.copy()
        count[count < 1e-12] = 0.0
        out["tokens_per_round"] = (count / count.sum(), rounds, me(rounds), False)
    return out


def tree_rows(profile_name: str, cases=None) -> tuple[list[dict], float]:
    """Rows of every statistical check of the tree level at `profile_name`, and the level's stated total."""
    from .tree.cases import cases_for
    from .tree.suite import plan_rounds

    prof = get_profile(profile_name)
    cases = list(cases if cases is not None else cases_for(prof.name))
    rate = budget_for("tree", prof, cases).per_check_false_fail_rate
    rows = []
    for case in cases:
        laws = _tree_laws(case, plan_rounds(case, prof, rate)["n"], prof)
        names = [name for _, family in planned_checks("tree", case) for name in family]
        if not set(names) <= set(laws):
            raise _stale("tree", case.name, names, laws)
        for name in names:
            law, n, me, rows_differ = laws[name]
            if rows_differ:  # tree.checks: the randomized PIT under each round's own prefix row, exact KS
                rows.append(check_row("tree", case.name, name, None, n, 0.0, rate, prof.false_pass_rate, kind="ks"))
            else:
                rows.append(check_row("tree", case.name, name, law, n, me, rate, prof.false_pass_rate))
            if name.startswith("position_") and name != "position_1" and not case.enumerable:
                rows[-1]["how"] += "; n = rounds, an upper bound (P(N >= j) not enumerable at this V)"
    return rows, prof.tree.total_false_fail


def engine_cases(profile_name: str, prompts: int = 1, pit: bool = True, reported: bool = True) -> list:
    """Sampling prompts at the profile's positions, each with the reports the PIT and reported checks need."""
    from .engine.level import EngineCase

    if int(prompts) != prompts or prompts < 1:
        raise ValueError(f"prompts must be an integer >= 1, got {prompts!r}")
    positions = get_profile(profile_name).engine.positions
    return [EngineCase(name=f"prompt_{i + 1}", greedy=False, positions=positions, pit=pit, reported=reported)
            for i in range(int(prompts))]


def engine_rows(profile_name: str, prompts: int = 1) -> tuple[list[dict], float]:
    """Rows of every statistical check a run at `profile_name` plans on `prompts` prompts (n: the files')."""
    prof = get_profile(profile_name)
    cases = engine_cases(prof.name, prompts)
    rate = budget_for("engine", prof, cases).per_check_false_fail_rate
    rows = []
    for case in cases:
        for family, names in planned_checks("engine", case):
            if family.name not in ENGINE_KINDS:
                raise _stale("engine", case.name, names, ENGINE_KINDS)
            rows += [check_row("engine", case.name, name, None, None, 0.0, rate, prof.false_pass_rate, ENGINE_KINDS[family.name])
                     for name in names]
    return rows, prof.engine.total_false_fail


def tree_confirm_excess(profile_name: str, cases=None) -> dict:
    """The tree level's confirmatory reruns (`tree.suite.confirmatory_records`): after a standard-rule failure
    on a case they rerun its exactness checks, together at the rate of that case's standard-rule checks. For
    an exact non-standard rule (its standard-rule checks fail on every case) the false NOT_EXACT rate is then
    at most the exactness checks' rates plus the confirmatory share, i.e. the stated total."""
    from .tree.cases import cases_for

    prof = get_profile(profile_name)
    cases = list(cases if cases is not None else cases_for(prof.name))
    rate = budget_for("tree", prof, cases).per_check_false_fail_rate
    exactness = standard = confirm = 0
    for case in cases:
        families = planned_checks("tree", case)
        exactness += sum(len(names) for family, names in families if family.category == "exactness")
        share = sum(len(names) for family, names in families if family.category == "standard_rule")
        if share:
            standard += share
            confirm += case.max_length + int(case.stream_enumerable)
    worst = rate * (exactness + standard)
    return {"confirmatory_tests": confirm, "worst_case_exact_non_standard": worst,
            "within_if_confirmed": worst <= prof.tree.total_false_fail * (1 + 1e-9)}
