"""One shape for every level's mutant zoo: a `MutantSpec` per mutant or valid variant.

A zoo (`rule/mutants/zoo.py`, `sequence/mutants.py`, `tree/mutants.py`, `engine/serve/mutants.py`) exposes
``ZOO: tuple[MutantSpec, ...]``: its mutants, then its valid variants, each with one name (the name the kill
table, the docs and `--mutants` / `--valid` use), its kind, the one line it models, the verdicts the level must
give it and a zero-argument factory of what the level certifies. The classes and records the specs wrap stay
where they are; the spec is what every reader of a zoo (`kill_table`, the meta-tests, the docs' counts) reads.

* A **mutant** breaks the law of the output: the level must reject it (any verdict but CERTIFIED, or the ones it
  names).
* A **valid variant** is exact: the standard rule written differently (CERTIFIED), or an exact rule that is not the
  standard one (EXACT_NOT_STANDARD: sampler-match, EAGLE's q = 1, a skipped bonus token), or exact but unable to
  show it (INCONCLUSIVE: a candidate that never drafts). It is never counted as a mutant.

Imports nothing but the standard library (a zoo is read without torch where its level needs none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence
from ...outcomes import Verdict

MUTANT, VALID_VARIANT = "mutant", "valid_variant"
KINDS = (MUTANT, VALID_VARIANT)
#: The expected verdict of a mutant that names none: any rejection counts.
REJECTED = "any verdict but CERTIFIED"
#: Verdicts a mutant may be expected to get (REJECTED: any of the core's verdicts but CERTIFIED).
MUTANT_VERDICTS = (REJECTED, Verdict.CONTRACT_VIOLATION, Verdict.NOT_EXACT)
#: Verdicts a valid variant may be expected to get: the exact ones.
VALID_VERDICTS = (Verdict.CERTIFIED, Verdict.EXACT_NOT_STANDARD, Verdict.INCONCLUSIVE)


def one_line(text: str | None) -> str:
    """`text` with its whitespace runs (newlines included) collapsed to single spaces."""
    return " ".join((text or "").split())


@dataclass(frozen=True)
class MutantSpec:
    """One row of a level's zoo and kill table: a mutant or a valid variant and the verdicts it must get."""

    name: str
    kind: str  # MUTANT | VALID_VARIANT
    models: (
        str  # one line: the real bug it models (a mutant) or the exact technique (a valid variant)
    )
    expected: tuple[str, ...]
    # builds what the level certifies (an adapter, or the engine level's sample pair)
    make: Callable[[], Any]

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.strip():
            raise ValueError(
                f"a mutant spec needs a name without surrounding spaces, got {self.name!r}"
            )
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        object.__setattr__(self, "expected", tuple(self.expected))
        allowed = MUTANT_VERDICTS if self.kind == MUTANT else VALID_VERDICTS
        if not self.expected or any(v not in allowed for v in self.expected):
            raise ValueError(
                f"{self.name}: a {self.kind} expects verdicts among {allowed}, got {self.expected}"
            )
        if not self.models or self.models != one_line(self.models):
            raise ValueError(
                f"{self.name}: 'models' must be one non-empty line, got {self.models!r}"
            )
        if not callable(self.make):
            raise ValueError(f"{self.name}: 'make' must be a zero-argument callable")

    @property
    def is_mutant(self) -> bool:
        return self.kind == MUTANT


def mutant(
    name: str, models: str | None, make: Callable[[], Any], expected: Sequence[str] = (REJECTED,)
) -> MutantSpec:
    """A mutant's spec (`models` is made one line)."""
    return MutantSpec(name, MUTANT, one_line(models), tuple(expected), make)


def valid_variant(
    name: str,
    models: str | None,
    make: Callable[[], Any],
    expected: Sequence[str] = (Verdict.CERTIFIED,),
) -> MutantSpec:
    """A valid variant's spec (`models` is made one line)."""
    return MutantSpec(name, VALID_VARIANT, one_line(models), tuple(expected), make)


def constant(value: Any) -> Callable[[], Any]:
    """A zero-argument factory returning `value` (for a zoo whose entries are ready-made objects)."""
    return lambda: value


def zoo(specs: Iterable[MutantSpec]) -> tuple[MutantSpec, ...]:
    """`specs` as a zoo: mutants first, then valid variants (each group in the given order); names unique."""
    specs = tuple(specs)
    names = [s.name for s in specs]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f"a zoo's names must be unique; repeated: {duplicated}")
    return tuple(s for s in specs if s.is_mutant) + tuple(s for s in specs if not s.is_mutant)


def mutants_of(specs: Iterable[MutantSpec]) -> tuple[MutantSpec, ...]:
    return tuple(s for s in specs if s.kind == MUTANT)


def valid_variants_of(specs: Iterable[MutantSpec]) -> tuple[MutantSpec, ...]:
    return tuple(s for s in specs if s.kind == VALID_VARIANT)


def by_name(specs: Iterable[MutantSpec], name: str) -> MutantSpec:
    """The spec called `name`; ValueError listing the names otherwise."""
    specs = tuple(specs)
    for spec in specs:
        if spec.name == name:
            return spec
    raise ValueError(f"name must be one of {[s.name for s in specs]}, got {name!r}")
