"""The tree level's cases: a tree shape, the drafting mode and the row model, read from JSON data.

A case is data (`conformance/case_data/trees.json`, format `case_data/trees.schema.json`, the conventions of the
rule level's case files: a top-level `$schema`, `description` and `cases`, each case a unique `name`, the bug it is
built to expose, `why`, and optional `tags`): the suite draws a fresh tree from it every round
(`reference.tree_sampling.sample_trees`) and hands it to the implementation; the laws the checks compare with
are the oracle's (`reference.tree_laws`), enumerated once per case and cached. `load_tree_cases(path)` validates
a file with ValueErrors naming the file, the case and the field, as the rule level's `load_cases` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ...reference.tree_laws import length_law, target_stream_law, tree_round_law
from ...reference.tree_models import ContextRows
from ...reference.tree_sampling import check_shape, shape_from_branching
from ..core.case_files import cases_from_file_data, checked_case_fields, read_case_file

CASE_DATA_DIR = Path(__file__).resolve().parent.parent / "case_data"
CASE_FILE = CASE_DATA_DIR / "trees.json"
SCHEMA_FILE = CASE_DATA_DIR / "trees.schema.json"
CASE_FIELDS = ("name", "why", "tags", "branching", "parent", "replacement", "quick", "model")
REQUIRED_FIELDS = ("name", "why", "replacement", "model")
FILE_FIELDS = ("$schema", "description", "cases")
#: Exact enumeration of the path law is attempted up to this vocabulary size.
MAX_ENUMERABLE_V = 12
#: The completed stream is tested when V^(depth+1) is at most this.
MAX_STREAM_CATEGORIES = 20_000


@dataclass(frozen=True, eq=False)
class TreeCase:
    """One curated tree case."""

    name: str
    parent: np.ndarray
    replacement: bool
    model: ContextRows
    why: str = ""
    quick: bool = False
    tags: tuple[str, ...] = field(default=())

    @cached_property
    def depths(self) -> np.ndarray:
        depth = np.zeros(self.parent.size, dtype=np.int64)
        for node in range(1, self.parent.size):
            depth[node] = depth[self.parent[node]] + 1
        return depth

    @property
    def max_length(self) -> int:
        """Most tokens one round can emit: the tree's depth + 1."""
        return int(self.depths.max()) + 1

    @property
    def V(self) -> int:
        return self.model.vocab_size

    @property
    def enumerable(self) -> bool:
        return self.V <= MAX_ENUMERABLE_V

    @property
    def stream_enumerable(self) -> bool:
        return self.V**self.max_length <= MAX_STREAM_CATEGORIES

    @cached_property
    def path_law(self) -> dict[tuple[int, ...], float]:
        """The oracle's exact law of the emitted path (float64), drafts drawn from the model."""
        return tree_round_law(self.parent, self.model, self.replacement)

    @cached_property
    def length_law(self) -> np.ndarray:
        return np.asarray(length_law(self.path_law, self.max_length), dtype=np.float64)

    @cached_property
    def stream_law(self) -> np.ndarray:
        """The target's law of the first max_length tokens, indexed by the base-V code (first token least significant)."""
        law = np.zeros(self.V**self.max_length)
        for path, probability in target_stream_law(self.model, self.max_length).items():
            law[encode_stream(path, self.V)] = probability
        return law

    def summary(self) -> dict:
        widths = (
            np.bincount(self.parent[1:], minlength=self.parent.size)
            if self.parent.size > 1
            else np.zeros(1)
        )
        return {
            "name": self.name,
            "why": self.why,
            "nodes": int(self.parent.size - 1),
            "depth": self.max_length - 1,
            "max_width": int(widths.max()),
            "V": self.V,
            "replacement": self.replacement,
            "rows_by": self.model.by,
            "draft": self.model.draft,
        }


def encode_stream(path: tuple[int, ...], vocab_size: int) -> int:
    code = 0
    for token in reversed(path):
        code = code * vocab_size + int(token)
    return code


def _checked_fields(entry: Any, source: str, index: int | None) -> str:
    """The case's label for errors, once its fields are the schema's (`CASE_FIELDS`, `REQUIRED_FIELDS`, types)."""
    where = checked_case_fields(entry, source, index, CASE_FIELDS, REQUIRED_FIELDS)
    for flag in ("replacement", "quick"):
        if flag in entry and not isinstance(entry[flag], bool):
            raise ValueError(f"{where}: field {flag!r} must be true or false")
    if ("parent" in entry) == ("branching" in entry):
        raise ValueError(f"{where}: field 'parent' or 'branching': give exactly one of them")
    if not isinstance(entry["model"], dict):
        raise ValueError(
            f"{where}: field 'model' must be an object (reference.tree_models.ContextRows)"
        )
    return where


def case_from_dict(entry: Any, source: str = "tree case", index: int | None = None) -> TreeCase:
    """One validated TreeCase from a case-file entry; every ValueError names `source`, the case and the field."""
    where = _checked_fields(entry, source, index)
    field_name = "parent" if "parent" in entry else "branching"
    try:
        parent = (
            check_shape(entry["parent"])
            if "parent" in entry
            else shape_from_branching(list(entry["branching"]))
        )
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: field {field_name!r}: {error}") from None
    try:
        model = ContextRows(**entry["model"])
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: field 'model': {error}") from None
    if not entry["replacement"]:
        widest = int(np.bincount(parent[1:]).max()) if parent.size > 1 else 0
        if model.min_support < widest:
            raise ValueError(
                f"{where}: field 'model.min_support': drafting {widest} children without replacement "
                f"needs model.min_support >= {widest}, got {model.min_support}"
            )
    return TreeCase(
        name=entry["name"],
        parent=parent,
        replacement=entry["replacement"],
        model=model,
        why=entry["why"],
        quick=entry.get("quick", False),
        tags=tuple(entry.get("tags", ())),
    )


def tree_cases_from_data(data: Any, source: str) -> list[TreeCase]:
    """Validated cases of a parsed tree-case file ({"cases": [...]}); names must be unique."""
    return cases_from_file_data(data, source, FILE_FIELDS, case_from_dict)


def load_tree_cases(path: str | Path = CASE_FILE) -> list[TreeCase]:
    """The cases of a tree-case JSON file (format: case_data/trees.schema.json), validated; ValueError otherwise."""
    data = read_case_file(path)
    return tree_cases_from_data(data, str(path))


TREE_CASES: list[TreeCase] = load_tree_cases()
QUICK_TREE_CASES: list[TreeCase] = [c for c in TREE_CASES if c.quick]


def cases_for(profile_name: str) -> list[TreeCase]:
    """The curated cases a profile runs: the quick subset for "quick", all of them otherwise."""
    return list(QUICK_TREE_CASES if profile_name == "quick" else TREE_CASES)
