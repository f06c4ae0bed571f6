"""The tree level's cases: a tree shape, the drafting mode and the row model, read from JSON data.

A case is data (`conformance/case_data/trees.json`): the suite draws a fresh tree from it every round
(`reference.tree_sampling.sample_trees`) and hands it to the implementation; the laws the checks compare with
are the oracle's (`reference.tree_laws`), enumerated once per case and cached.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ...reference.tree_laws import length_law, target_stream_law, tree_round_law
from ...reference.tree_models import ContextRows
from ...reference.tree_sampling import check_shape, shape_from_branching

CASE_FILE = Path(__file__).resolve().parent.parent / "case_data" / "trees.json"
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
    reason: str = ""
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
        return self.V ** self.max_length <= MAX_STREAM_CATEGORIES

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
        law = np.zeros(self.V ** self.max_length)
        for path, probability in target_stream_law(self.model, self.max_length).items():
            law[encode_stream(path, self.V)] = probability
        return law

    def summary(self) -> dict:
        widths = np.bincount(self.parent[1:], minlength=self.parent.size) if self.parent.size > 1 else np.zeros(1)
        return {"name": self.name, "reason": self.reason, "nodes": int(self.parent.size - 1),
                "depth": self.max_length - 1, "max_width": int(widths.max()), "V": self.V,
                "replacement": self.replacement, "rows_by": self.model.by, "draft": self.model.draft}


def encode_stream(path: tuple[int, ...], vocab_size: int) -> int:
    code = 0
    for token in reversed(path):
        code = code * vocab_size + int(token)
    return code


def case_from_dict(entry: dict[str, Any]) -> TreeCase:
    """A TreeCase from one JSON entry; ValueError naming the field when malformed."""
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise ValueError(f"a tree case must be an object with a string 'name', got {entry!r:.80}")
    name = entry["name"]
    if ("parent" in entry) == ("branching" in entry):
        raise ValueError(f"tree case {name!r}: give exactly one of 'parent' and 'branching'")
    parent = check_shape(entry["parent"]) if "parent" in entry else shape_from_branching(list(entry["branching"]))
    if not isinstance(entry.get("replacement"), bool):
        raise ValueError(f"tree case {name!r}: 'replacement' must be true or false")
    try:
        model = ContextRows(**entry.get("model", {}))
    except TypeError as error:
        raise ValueError(f"tree case {name!r}: bad 'model': {error}") from None
    if not entry["replacement"]:
        widest = int(np.bincount(parent[1:]).max()) if parent.size > 1 else 0
        if model.min_support < widest:
            raise ValueError(f"tree case {name!r}: drafting {widest} children without replacement needs "
                             f"model.min_support >= {widest}, got {model.min_support}")
    return TreeCase(name=name, parent=parent, replacement=entry["replacement"], model=model,
                    reason=str(entry.get("reason", "")), quick=bool(entry.get("quick", False)),
                    tags=tuple(entry.get("tags", ())))


def load_tree_cases(path: str | Path = CASE_FILE) -> list[TreeCase]:
    """Every case of a tree-case JSON file (names must be unique)."""
    data = json.loads(Path(path).read_text())
    cases = [case_from_dict(entry) for entry in data.get("cases", [])]
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        raise ValueError(f"tree cases must have unique names, got {names}")
    return cases


TREE_CASES: list[TreeCase] = load_tree_cases()
QUICK_TREE_CASES: list[TreeCase] = [c for c in TREE_CASES if c.quick]


def cases_for(profile_name: str) -> list[TreeCase]:
    """The curated cases a profile runs: the quick subset for "quick", all of them otherwise."""
    return list(QUICK_TREE_CASES if profile_name == "quick" else TREE_CASES)
