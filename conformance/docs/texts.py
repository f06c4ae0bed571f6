"""Texts rendered from the code's constants: the verdicts with their exit codes (`exactspec.outcomes`,
`core.records.VERDICT_TEXT`), the exit codes, and what each profile promises at each level (the levels' settings
and the planner's sample sizes)."""

from __future__ import annotations

import textwrap

from ...outcomes import EXIT_MEANING, ExitCode, Verdict
from ...stat_tests.coupling import min_num_samples_coupled_within
from ..core.levels import get_level
from ..core.planning import plan_case
from ..core.profiles import PROFILE_NAMES, PROFILES, get_profile
from ..core.records import VERDICT_TEXT
from ..core.registry import budget_for
from ..engine.stat_checks import ROUTE_SHARE
from ..rule.level import LARGE_VOCAB_EPSILON_SCALE

#: The exit codes every command returns today. UNAVAILABLE (6) and INCOMPLETE (7) join this tuple when the
#: commands return them (issue 52's command-line work); rerun `python -m exactspec.conformance.docs --write`.
DOCUMENTED_EXIT_CODES = tuple(ExitCode)
PROFILE_USE = {"quick": "CI", "standard": "the default", "full": "certificate grade"}


WIDTH = 116  # the docs' line length


def wrap(markdown: str) -> str:
    """Paragraphs and bullets of `markdown` wrapped at the docs' width (tables and other lines kept)."""
    out = []
    for block in markdown.strip("\n").split("\n\n"):
        lines = block.split("\n")
        if lines[0].startswith("|"):
            out.append(block)
        elif all(line.startswith("- ") for line in lines):
            out.append(
                "\n".join(
                    textwrap.fill(line, WIDTH, subsequent_indent="  ", break_on_hyphens=False)
                    for line in lines
                )
            )
        else:
            out.append(textwrap.fill(" ".join(lines), WIDTH, break_on_hyphens=False))
    return "\n\n".join(out) + "\n"


def markdown_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]) + "\n"


def verdict_table() -> str:
    """Every verdict, best first, with its meaning and the exit code of the commands that certify."""
    rows = [
        [f"`{v.value}`", VERDICT_TEXT[v.value], str(int(v.exit_code))] for v in reversed(Verdict)
    ]
    return markdown_table(["verdict", "meaning", "exit"], rows)


def exit_code_table(codes: tuple[ExitCode, ...] = DOCUMENTED_EXIT_CODES) -> str:
    """The exit codes and what each means (`exactspec.outcomes.EXIT_MEANING`)."""
    return markdown_table(
        ["exit", "meaning"], [[str(int(code)), EXIT_MEANING[code]] for code in codes]
    )


def rate(x: float) -> str:
    """1e-06 -> "1e-6", 0.001 -> "1e-3" (false-fail rates as the docs write them)."""
    return f"{x:.0e}".replace("e-0", "e-")


def compact(n: float) -> str:
    """3347 -> "3.35k", 3283000 -> "3.28M"."""
    for size, unit in ((1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.0f}"


def planned_sizes(level: str, profile: str) -> tuple[int, int, int]:
    """The smallest, largest and total n the planner gives the level's planned cases at `profile`."""
    declared, prof = get_level(level), get_profile(profile)
    cases = declared.select_cases(prof)
    rate = budget_for(declared, prof, cases).per_check_false_fail_rate
    sizes = [
        plan["n"]
        for case in cases
        for plan in [plan_case(declared, case, prof, rate)]
        if plan["primary"]
    ]
    return min(sizes), max(sizes), sum(sizes)


def rule_profile_table() -> str:
    """The rule level at each profile: total false-fail rate, target TV per case, rounds per case."""
    rows = []
    for name in PROFILE_NAMES:
        settings = PROFILES[name].rule
        low, high, total = planned_sizes("rule", name)
        rows.append(
            [
                f"{name} ({PROFILE_USE[name]})",
                rate(settings.total_false_fail),
                f"{settings.target_tv:g} ({settings.target_tv * LARGE_VOCAB_EPSILON_SCALE:g})",
                f"{compact(low)}–{compact(high)} ({compact(total)} in all)",
                str(settings.max_bins),
            ]
        )
    power = 1 - PROFILES["standard"].false_pass_rate
    return markdown_table(
        [
            "profile",
            "total false-fail rate",
            f"binned TV detected per case at power ≥ {power:g} (large-vocabulary case)",
            "rounds per case",
            "max bins",
        ],
        rows,
    )


def other_profile_table() -> str:
    """The sequence, tree and engine levels at each profile, from their settings and the planner."""
    rows = []
    for name in PROFILE_NAMES:
        profile = PROFILES[name]
        seq, tree, engine = profile.sequence, profile.tree, profile.engine
        low, high, _ = planned_sizes("sequence", name)
        seeds = min_num_samples_coupled_within(
            engine.target_tv, profile.false_pass_rate * ROUTE_SHARE, 0, 2**32 - 1
        )
        rows.append(
            [
                name,
                rate(seq.total_false_fail),
                f"{seq.target_tv:g} (≤ {seq.max_bins})",
                f"{compact(low)}–{compact(high)}",
                rate(tree.total_false_fail),
                f"{tree.target_tv:g}",
                rate(engine.total_false_fail),
                f"{engine.target_tv:g}",
                str(seeds),
            ]
        )
    head = [
        "profile",
        "sequence: total false-fail rate",
        "sequence: target binned TV (bins)",
        "sequence: sequences per exact case",
        "tree: total false-fail rate",
        "tree: target binned TV per case",
        "engine: total false-fail rate",
        "engine: target per-token TV (positions 1..max_tokens)",
        "engine: seeds a coupling needs (0 mismatches, 2³² − 1 seeds)",
    ]
    return markdown_table(head, rows)


__all__ = [
    "DOCUMENTED_EXIT_CODES",
    "WIDTH",
    "compact",
    "exit_code_table",
    "markdown_table",
    "other_profile_table",
    "planned_sizes",
    "rate",
    "rule_profile_table",
    "verdict_table",
    "wrap",
]
