"""Conformance cases as data: a case is (target rows p_1..p_{k+1}, draft rows q_1..q_k), a name and
the reason it exists (which implementation bug it is built to expose).

The curated cases live in JSON files under `case_data/` (format: `case_data/cases.schema.json`,
described in CONTRACT.md "Cases as data"); `load_cases(path)` validates such a file and returns `Case`
objects, so a user's own file runs through the same path (`--exactspec-cases FILE`). Rows are given
inline (numbers, exact decimal strings "0.3" or fractions "1/3") or as a named recipe (`RECIPES`) for
the large ones. `GENERATED` are edge cases drawn from a fixed seed, each describable as a "generated"
recipe. `SUITE_CASES = CURATED + GENERATED` is what every statistical check runs on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ... import reference
from ...reference.validation import as_prob_array, check_k
from ..core.case_files import cases_from_file_data, checked_case_fields, read_case_file
from .case_recipes import (  # noqa: F401 -- ROW_KINDS, generated_*: re-exported
    ROW_KINDS,
    deep_rows,
    dyadic_rows,
    generated_name,
    generated_rows,
    near_equal_rows,
    padded_rows,
    varying_rows,
    zipf_rows,
    zipf_top_rows,
)

#: Cases whose number of accepted-prefix branches is at most this get the whole-tuple law check.
TUPLE_LAW_MAX_BRANCHES = 20_000

CASE_DATA_DIR = Path(__file__).resolve().parent.parent / "case_data"
CURATED_FILE = CASE_DATA_DIR / "curated.json"
SCHEMA_FILE = CASE_DATA_DIR / "cases.schema.json"


@dataclass(frozen=True, eq=False)
class Case:
    name: str
    target_probs: np.ndarray  # (k+1, V)
    draft_probs: np.ndarray  # (k, V)
    why: str
    tags: tuple[str, ...] = field(default_factory=tuple)
    #: Rows that vary from round to round: (targets (M, k+1, V), drafts (M, k, V)); each round draws a member
    #: uniformly (target_probs / draft_probs are member 0). None: every round has the same rows.
    pool: tuple[np.ndarray, np.ndarray] | None = None
    # the recipe the rows came from (written back by to_dict for pooled cases)
    recipe: dict | None = None

    def __post_init__(self):
        p = np.ascontiguousarray(self.target_probs, dtype=np.float64)
        q = np.ascontiguousarray(self.draft_probs, dtype=np.float64)
        # The oracle validates shapes and rows; a malformed case is a bug in the suite, not the impl.
        reference.validation.check_round_shapes(
            as_prob_array(p, f"{self.name}.target_probs", 2),
            as_prob_array(q, f"{self.name}.draft_probs", 2),
        )
        p.setflags(write=False)
        q.setflags(write=False)
        object.__setattr__(self, "target_probs", p)
        object.__setattr__(self, "draft_probs", q)
        if self.pool is not None:
            pool = tuple(np.ascontiguousarray(a, dtype=np.float64) for a in self.pool)
            if (
                pool[0].shape[1:] != p.shape
                or pool[1].shape[1:] != q.shape
                or len(pool[0]) != len(pool[1])
            ):
                raise ValueError(
                    f"{self.name}.pool must hold (M, k+1, V) and (M, k, V) rows like the case's"
                )
            for a in pool:
                a.setflags(write=False)
            object.__setattr__(self, "pool", pool)

    @property
    def varying(self) -> bool:
        """Rows vary from round to round (a pool of row sets)."""
        return self.pool is not None

    @property
    def pooled(self) -> tuple[np.ndarray, np.ndarray]:
        """The pool of a varying case; a ValueError for a case with fixed rows."""
        if self.pool is None:
            raise ValueError(f"case {self.name} has fixed rows, no pool")
        return self.pool

    @property
    def k(self) -> int:
        return self.draft_probs.shape[0]

    @property
    def V(self) -> int:
        return self.draft_probs.shape[1]

    @cached_property
    def branches(self) -> int:
        b = 1
        for p, q in zip(self.target_probs, self.draft_probs):
            b *= max(1, int(np.count_nonzero((p > 0) & (q > 0))))
        return b

    @property
    def enumerable(self) -> bool:
        """Small enough for the exact law of the whole emitted tuple."""
        return self.branches <= TUPLE_LAW_MAX_BRANCHES and self.V <= 64 and not self.varying

    @property
    def stream_enumerable(self) -> bool:
        """Small enough for the product law of the completed stream (V^(k+1) categories)."""
        return self.V ** (self.k + 1) <= 50_000 and not self.varying

    @cached_property
    def stream_law(self) -> np.ndarray:
        """Law of the completed stream (y_1..y_{k+1}) of an exact rule: prod_j p_j(y_j), flattened with
        code sum_j y_j V^j (position 1 is the least significant digit)."""
        law = np.ones(1)
        for row in self.target_probs:
            law = np.multiply.outer(
                row, law
            ).ravel()  # new position becomes the most significant digit
        return law

    @cached_property
    def alphas(self) -> np.ndarray:
        """Per-position acceptance rates sum_x min(p_i, q_i)."""
        return np.minimum(self.target_probs[:-1], self.draft_probs).sum(axis=-1)

    @cached_property
    def count_law(self) -> np.ndarray:
        """Exact law of N (tokens emitted per round) under the standard rule, n = 1..k+1."""
        # each round's member is uniform over the pool: the mixture of the members' laws
        if self.varying:
            alphas = np.minimum(self.pooled[0][:, :-1], self.pooled[1]).sum(axis=-1)
            return np.mean([reference.tokens_law_per_position(a) for a in alphas], axis=0).astype(
                np.float64
            )
        return np.asarray(reference.tokens_law_per_position(self.alphas), dtype=np.float64)

    @cached_property
    def tuple_law(self) -> tuple[list[tuple[int, ...]], np.ndarray]:
        """(tuples, probabilities) of the emitted tuple under the standard rule (enumerable cases)."""
        law = reference.round_distribution(self.target_probs, self.draft_probs)
        tuples = sorted(law)
        return tuples, np.array([law[t] for t in tuples], dtype=np.float64)

    def to_dict(self) -> dict:
        """A case-file entry with inline rows (floats round-trip exactly through JSON); pooled cases keep
        their recipe."""
        if self.varying:
            return {
                "name": self.name,
                "why": self.why,
                "tags": list(self.tags),
                "k": self.k,
                "V": self.V,
                "recipe": dict(self.recipe or {}),
            }
        return {
            "name": self.name,
            "why": self.why,
            "tags": list(self.tags),
            "k": self.k,
            "V": self.V,
            "target_probs": self.target_probs.tolist(),
            "draft_probs": self.draft_probs.tolist(),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Case":
        """A case from one case-file entry, validated like `load_cases` does."""
        return case_from_entry(d, "Case.from_dict")

    def summary(self) -> dict:
        return {
            "name": self.name,
            "k": self.k,
            "V": self.V,
            "why": self.why,
            "tags": list(self.tags),
            "acceptance_rates": self.alphas.tolist(),
            "expected_tokens": float((np.arange(1, self.k + 2) * self.count_law).sum()),
        }


# --- recipes: rows computed from a few parameters (case_recipes.py) ----------------------------------


def _kinds(value, where: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(v in ROW_KINDS for v in value):
        raise ValueError(
            f"{where} must be a non-empty list of row kinds from {list(ROW_KINDS)}, got {value!r}"
        )
    return list(value)


def _integer(minimum: int):
    def check(value, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{where} must be an integer >= {minimum}, got {value!r}")
        return value

    return check


def _positive_number(value, where: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not np.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{where} must be a finite number > 0, got {value!r}")
    return float(value)


def _boolean(value, where: str) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError(f"{where} must be true or false, got {value!r}")


# RECIPES: name -> (row function, {parameter: (checker, default or REQUIRED)}); k from the case
REQUIRED = object()
_Param = tuple[Callable[[Any, str], Any], Any]  # (checker(value, where), default or REQUIRED)
RECIPES: dict[str, tuple[Callable[..., tuple[Any, Any]], dict[str, _Param]]] = {
    "generated": (
        generated_rows,
        {
            "V": (_integer(1), REQUIRED),
            "kinds": (_kinds, REQUIRED),
            "seed": (_integer(0), REQUIRED),
            "same_rows": (_boolean, False),
        },
    ),
    "zipf": (
        zipf_rows,
        {
            "V": (_integer(2), REQUIRED),
            "exponent": (_positive_number, REQUIRED),
            "flatten": (_positive_number, 1.0),
            "permutation_seed": (_integer(0), REQUIRED),
            "permutation_skip": (_integer(0), 0),
        },
    ),
    "near_equal": (
        near_equal_rows,
        {"V": (_integer(5), REQUIRED), "seed": (_integer(0), REQUIRED)},
    ),
    "zipf_top": (
        zipf_top_rows,
        {
            "V": (_integer(2), REQUIRED),
            "exponent": (_positive_number, REQUIRED),
            "top": (_integer(1), REQUIRED),
            "seed": (_integer(0), REQUIRED),
        },
    ),
    "padded": (
        padded_rows,
        {
            "V": (_integer(3), REQUIRED),
            "real_vocab": (_integer(2), REQUIRED),
            "exponent": (_positive_number, REQUIRED),
            "seed": (_integer(0), REQUIRED),
        },
    ),
    "deep": (
        deep_rows,
        {
            "V": (_integer(2), REQUIRED),
            "mix": (_positive_number, REQUIRED),
            "seed": (_integer(0), REQUIRED),
        },
    ),
    "dyadic": (
        dyadic_rows,
        {
            "V": (_integer(1), REQUIRED),
            "bits": (_integer(1), REQUIRED),
            "seed": (_integer(0), REQUIRED),
        },
    ),
    "varying": (
        varying_rows,
        {
            "V": (_integer(2), REQUIRED),
            "kinds": (_kinds, REQUIRED),
            "seed": (_integer(0), REQUIRED),
            "pool": (_integer(2), REQUIRED),
        },
    ),
}


# --- case files: validation with errors naming the file, the case and the field ----------------------

CASE_FIELDS = ("name", "why", "tags", "k", "V", "target_probs", "draft_probs", "recipe")
REQUIRED_FIELDS = ("name", "why", "k")
FILE_FIELDS = ("$schema", "description", "cases")
GENERATED_WHY = "Hypothesis-generated edge case"


def _number(value, where: str) -> float:
    """A JSON number, or a string holding an exact decimal ("0.3", "1e-12") or fraction ("1/3")."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            # exact value, then one correct rounding to float64
            return float(Fraction(value.strip()))
        except (ValueError, ZeroDivisionError):
            pass
    raise ValueError(
        f'{where}: {value!r} is not a probability (a number, a decimal string like "0.3" '
        'or a fraction like "1/3")'
    )


def _inline_rows(entry: dict, field_name: str, n_rows: int, where: str) -> np.ndarray:
    rows = entry[field_name]
    label = f"{where}: field {field_name!r}"
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise ValueError(f"{label} must be a list of rows (lists of probabilities)")
    if len(rows) != n_rows:
        raise ValueError(f"{label} must hold {n_rows} rows for k = {entry['k']}, got {len(rows)}")
    ragged = [i for i, row in enumerate(rows) if len(row) != len(rows[0])]
    if ragged:
        raise ValueError(
            f"{label}: row {ragged[0]} has {len(rows[ragged[0]])} entries, row 0 has {len(rows[0])} "
            "(wrong shape)"
        )
    parsed = [
        [_number(x, f"{label}[{i}][{j}]") for j, x in enumerate(row)] for i, row in enumerate(rows)
    ]
    return as_prob_array(parsed, label, 2)


def _recipe_rows(recipe, k: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(recipe, dict) or not isinstance(recipe.get("name"), str):
        raise ValueError(f"{where}: field 'recipe' must be an object with a string \"name\"")
    name = recipe["name"]
    if name not in RECIPES:
        raise ValueError(
            f"{where}: field 'recipe.name': unknown recipe {name!r}; known: {sorted(RECIPES)}"
        )
    function, params = RECIPES[name]
    if set(recipe) - {"name"} - set(params):
        raise ValueError(
            f"{where}: field 'recipe': unknown parameters {sorted(set(recipe) - {'name'} - set(params))} "
            f"of recipe {name!r}; it takes {sorted(params)}"
        )
    kwargs: dict[str, Any] = {}
    for param, (check, default) in params.items():
        if param in recipe:
            kwargs[param] = check(recipe[param], f"{where}: field 'recipe.{param}'")
        elif default is REQUIRED:
            raise ValueError(f"{where}: field 'recipe.{param}' is required by recipe {name!r}")
        else:
            kwargs[param] = default
    try:
        p, q = function(k, **kwargs)
    except ValueError as error:
        raise ValueError(f"{where}: field 'recipe': {error}") from None
    ndim = np.ndim(p)  # 3: a pool of row sets (rows vary from round to round)
    return (
        as_prob_array(p, f"{where}: recipe {name!r} target rows", ndim),
        as_prob_array(q, f"{where}: recipe {name!r} draft rows", ndim),
    )


def _case_rows(entry: dict, k: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    inline = [f for f in ("target_probs", "draft_probs") if f in entry]
    if "recipe" in entry:
        if inline:
            raise ValueError(
                f"{where}: field {inline[0]!r}: give the rows inline or as a recipe, not both"
            )
        return _recipe_rows(entry["recipe"], k, where)
    if len(inline) < 2:
        raise ValueError(
            f"{where}: field 'target_probs' and 'draft_probs' (or 'recipe') are required"
        )
    p = _inline_rows(entry, "target_probs", k + 1, where)
    q = _inline_rows(entry, "draft_probs", k, where)
    if p.shape[1] != q.shape[1]:
        raise ValueError(
            f"{where}: field 'draft_probs' rows have V = {q.shape[1]} tokens, "
            f"'target_probs' rows have {p.shape[1]} (wrong shape)"
        )
    return p, q


def case_from_entry(entry, source: str, index: int | None = None) -> Case:
    """One validated `Case` from a case-file entry; every ValueError names `source`, the case and the field."""
    where = checked_case_fields(entry, source, index, CASE_FIELDS, REQUIRED_FIELDS)
    name, tags = entry["name"], entry.get("tags", [])
    k = check_k(entry["k"], f"{where}: field 'k'")
    p, q = _case_rows(entry, k, where)
    if "V" in entry and entry["V"] != p.shape[-1]:
        raise ValueError(
            f"{where}: field 'V' is {entry['V']!r} but the rows have {p.shape[-1]} tokens"
        )
    if p.ndim == 3:
        return Case(
            name, p[0], q[0], entry["why"], tuple(tags), pool=(p, q), recipe=dict(entry["recipe"])
        )
    return Case(name, p, q, entry["why"], tuple(tags))


def cases_from_data(data, source: str) -> list[Case]:
    """Validated cases of a parsed case file ({"cases": [...]}); names must be unique."""
    return cases_from_file_data(data, source, FILE_FIELDS, case_from_entry)


def load_cases(path) -> list[Case]:
    """The cases of a JSON case file (format: case_data/cases.schema.json), validated; ValueError otherwise."""
    data = read_case_file(path)
    return cases_from_data(data, str(path))


def write_cases(cases: list[Case], path, description: str = "") -> None:
    """Write `cases` as a case file with inline rows (what `load_cases` reads back, to the bit)."""
    data = {"description": description, "cases": [case.to_dict() for case in cases]}
    Path(path).write_text(json.dumps(data) + "\n", encoding="utf-8")


def generated_entries(n: int = 4, seed: int = 7) -> list[dict]:
    """Case-file entries (recipe "generated") of `n` small edge cases drawn from `seed`."""
    rng = np.random.default_rng(seed)
    entries = []
    for _ in range(n):
        V = int(rng.choice([3, 4, 5]))
        k = int(rng.integers(1, 4))
        kinds = [str(rng.choice(ROW_KINDS)) for _ in range(k + 1)]
        case_seed = int(rng.integers(2**31))
        entries.append(
            {
                "name": generated_name(k, V, kinds, case_seed),
                "why": GENERATED_WHY,
                "tags": ["generated"],
                "k": k,
                "recipe": {"name": "generated", "V": V, "kinds": kinds, "seed": case_seed},
            }
        )
    return entries


def generated_cases(n: int = 4, seed: int = 7) -> list[Case]:
    """A small deterministic set of generated cases (fixed seeds), small enough for the tuple law."""
    return cases_from_data({"cases": generated_entries(n, seed)}, f"generated cases (seed {seed})")


CURATED: list[Case] = load_cases(CURATED_FILE)
# Generated cases join the statistical checks, so the generator's edge rows are tested for exactness too.
GENERATED: list[Case] = generated_cases()
SUITE_CASES: list[Case] = CURATED + GENERATED
CASES_BY_NAME: dict[str, Case] = {c.name: c for c in SUITE_CASES}
