"""What each generated region holds: region name -> the function that renders it (from the code's constants, or
from the committed certificates' JSON)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Callable

from ..core.report import SCHEMA_VERSION
from ..engine.route_text import routes_markdown
from . import index_tables as tables
from . import texts
from .catalogue import Certificate, read_all
from .rerun import rerun_command
from .texts import markdown_table

KILL_TABLES = ("rule", "sequence", "tree", "engine", "engine-standard")
ENSEMBLE = "transformers-5.24-ensemble-0.8"
ENSEMBLE_CASES = (
    "demo_uniform_draft",
    "demo_mixed_draft",
    "rows_differ_k3",
    "disjoint_supports",
    "one_hot_target",
    "k8_rows_differ",
    "large_vocab_32k",
    "demo_identical_draft",
)


class Context:
    """The repository the regions are rendered for; its certificates are read once."""

    def __init__(self, repo: Path):
        self.repo = repo

    @cached_property
    def certificates(self) -> dict[str, Certificate]:
        return read_all(self.repo)

    def where(self, test: Callable[[Certificate], bool]) -> list[Certificate]:
        return [c for c in self.certificates.values() if test(c)]


def _level(level: str, folder: str | None = None) -> Callable[[Certificate], bool]:
    return lambda c: (
        c.doc.get("level") == level and (folder is None or c.name.startswith(folder + "/"))
    )


def _commands(certs: list[Certificate]) -> str:
    return "```\n" + "\n".join(rerun_command(c) for c in certs) + "\n```\n"


def _folders(ctx: Context) -> str:
    """The root index's table of folders: what each holds and its certificates' verdicts, counted."""
    groups = [
        (
            "[`sequence/`](sequence/README.md)",
            "sequence-level certificates (whole generation loops)",
            _level("sequence", "sequence"),
        ),
        (
            "[`tree/`](tree/README.md)",
            "tree-level certificates (tree verification)",
            _level("tree", "tree"),
        ),
        (
            "[`engine/`](engine/README.md)",
            "engine-level certificates of real serving engines",
            _level("engine", "engine"),
        ),
        (
            "`engine/vllm-rejection-sampler*/`",
            "rule-level certificates of vLLM's own `rejection_sample`, "
            "in the rule-level table above",
            _level("rule", "engine"),
        ),
    ]
    rows = [[where, what, tables.verdict_counts(ctx.where(test))] for where, what, test in groups]
    return markdown_table(["folder", "what", "verdicts"], rows)


def _schemas(ctx: Context) -> str:
    """How many committed certificates were written at each schema version, against the writer's."""
    counts: dict[str, int] = {}
    for c in ctx.certificates.values():
        version = c.doc.get("read_from_version") or c.doc["schema_version"]
        counts[version] = counts.get(version, 0) + 1
    written = ", ".join(f"{n} at {v}" for v, n in sorted(counts.items()))
    return texts.wrap(
        f"The report writer is at schema version {SCHEMA_VERSION}; of the {len(ctx.certificates)} "
        f"committed certificates, {written} (`core.report.read_certificate` reads 2.0 in the 2.1 "
        "layout: 2.1 renamed `alpha` / `beta` to `false_fail_rate` / `false_pass_rate`)."
    )


RENDERERS: dict[str, Callable[[Context], str]] = {
    "engine-routes": lambda ctx: texts.wrap(routes_markdown()),
    "verdicts": lambda ctx: texts.verdict_table(),
    "exit-codes": lambda ctx: texts.exit_code_table(),
    "profiles-rule": lambda ctx: texts.rule_profile_table(),
    "profiles-other": lambda ctx: texts.other_profile_table(),
    "certificate-schemas": _schemas,
    "certificates-rule": lambda ctx: tables.round_level_table(ctx.where(_level("rule"))),
    "certificates-rule-commands": lambda ctx: _commands(ctx.where(_level("rule"))),
    "certificates-folders": _folders,
    "kill-tables": lambda ctx: tables.kill_table_rows(ctx.repo, list(KILL_TABLES)),
    "ensemble-deviations": lambda ctx: tables.deviation_table(
        ctx.certificates[ENSEMBLE], ENSEMBLE_CASES
    ),
    "certificates-flagged": lambda ctx: tables.flagged_list(
        list(ctx.certificates.values())
    ),  # commands unwrapped
    "certificates-engine": lambda ctx: tables.engine_table(ctx.where(_level("engine", "engine"))),
    "certificates-engine-reasons": lambda ctx: texts.wrap(
        tables.reasons_list(ctx.where(_level("engine", "engine")))
    ),
    "certificates-sequence": lambda ctx: tables.sequence_table(
        ctx.where(_level("sequence", "sequence"))
    ),
    "certificates-sequence-commands": lambda ctx: _commands(
        ctx.where(_level("sequence", "sequence"))
    ),
    "certificates-tree": lambda ctx: tables.round_level_table(
        ctx.where(_level("tree", "tree")), "tree"
    ),
    "certificates-tree-commands": lambda ctx: _commands(ctx.where(_level("tree", "tree"))),
}


__all__ = ["Context", "KILL_TABLES", "RENDERERS"]
