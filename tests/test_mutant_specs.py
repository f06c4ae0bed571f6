"""One shape for every level's mutant zoo (`conformance.core.mutants.MutantSpec`): the zoos' specs are consistent,
valid variants are never counted as mutants, the engine zoo's membership is explicit, and the counts typed in the
docs follow the zoos."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from exactspec.conformance.core import mutants as spec_module
from exactspec.conformance.core.mutants import (
    KINDS,
    MUTANT,
    MUTANT_VERDICTS,
    REJECTED,
    VALID_VARIANT,
    VALID_VERDICTS,
    MutantSpec,
    by_name,
    mutants_of,
    valid_variants_of,
)

REPO = Path(__file__).resolve().parents[1]
LEVELS = ("rule", "sequence", "tree", "engine")
#: Docs that state zoo counts; each count is written "N <level>-level mutants" or "N <level>-level valid variants"
#: (or "N/N ..."), so this test can read it.
COUNTED_DOCS = (
    "README.md",
    "docs/certificates/README.md",
    "docs/certify-an-implementation.md",
    "docs/sequence-level.md",
    "docs/tree-level.md",
    "docs/engine-level.md",
)
MUST_COUNT = ("README.md", "docs/certificates/README.md", "docs/certify-an-implementation.md")
COUNT = re.compile(
    r"\b(\d+)(?:/(\d+))?\s+(rule|sequence|tree|engine)-level\s+(mutants|valid\s+variants)\b"
)
ANY_COUNT = re.compile(
    r"\b(\d+)(?:/\d+)?\s+(?:[\w-]+\s+)?(mutants|valid\s+variants|valid\s+rows)\b"
)


def zoo_of(level: str) -> tuple[MutantSpec, ...]:
    """A level's zoo, read from its zoo module (the sequence and engine zoos are built on torch models)."""
    if level == "rule":
        from exactspec.conformance.rule.mutants.zoo import ZOO
    elif level == "tree":
        from exactspec.conformance.tree.mutants import ZOO
    else:
        pytest.importorskip("torch")
        if level == "sequence":
            from exactspec.conformance.sequence.mutants import ZOO
        else:
            from exactspec.conformance.engine.serve.mutants import zoo

            ZOO = zoo("quick")
    return ZOO


# --------------------------------------------------------------------------- the spec itself
def _make():
    return object()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(kind="valid"), "kind"),
        (dict(kind=MUTANT, expected=("CERTIFIED",)), "expects verdicts"),
        (dict(kind=MUTANT, expected=("EXACT_NOT_STANDARD",)), "expects verdicts"),
        (dict(kind=VALID_VARIANT, expected=(REJECTED,)), "expects verdicts"),
        (dict(kind=VALID_VARIANT, expected=("NOT_EXACT",)), "expects verdicts"),
        (dict(kind=MUTANT, expected=()), "expects verdicts"),
        (dict(kind=MUTANT, models="two\nlines"), "one non-empty line"),
        (dict(kind=MUTANT, models=""), "one non-empty line"),
        (dict(kind=MUTANT, name=" padded"), "name"),
        (dict(kind=MUTANT, make="not callable"), "callable"),
    ],
)
def test_spec_rejects_an_inconsistent_entry(kwargs, message):
    fields = dict(name="m", kind=MUTANT, models="a bug", expected=(REJECTED,), make=_make) | kwargs
    with pytest.raises(ValueError, match=message):
        MutantSpec(**fields)


def test_spec_helpers():
    bug = spec_module.mutant("bug", "a\n  bug", _make)
    fine = spec_module.valid_variant("fine", "exact", _make)
    assert (bug.kind, bug.models, bug.expected, bug.is_mutant) == (
        MUTANT,
        "a bug",
        (REJECTED,),
        True,
    )
    assert (fine.kind, fine.expected, fine.is_mutant) == (VALID_VARIANT, ("CERTIFIED",), False)
    assert spec_module.zoo([fine, bug]) == (bug, fine)  # mutants first, each group in order
    with pytest.raises(ValueError, match="unique"):
        spec_module.zoo([bug, fine, spec_module.mutant("bug", "again", _make)])
    assert by_name((bug, fine), "fine") is fine
    with pytest.raises(ValueError, match="fine"):
        by_name((bug, fine), "nope")
    with pytest.raises(dataclasses.FrozenInstanceError):
        bug.name = "other"


# --------------------------------------------------------------------------- every zoo
@pytest.mark.parametrize("level", LEVELS)
def test_zoo_specs_are_consistent(level):
    zoo = zoo_of(level)
    assert zoo and all(isinstance(s, MutantSpec) for s in zoo)
    names = [s.name for s in zoo]
    assert len(set(names)) == len(names), f"{level}: repeated names"
    assert all(s.kind in KINDS for s in zoo)
    assert all(set(s.expected) <= set(MUTANT_VERDICTS) for s in mutants_of(zoo))
    assert all(set(s.expected) <= set(VALID_VERDICTS) for s in valid_variants_of(zoo))
    assert list(zoo) == list(mutants_of(zoo)) + list(valid_variants_of(zoo)), (
        "mutants first, then valid variants"
    )
    assert mutants_of(zoo) and valid_variants_of(zoo)


@pytest.mark.parametrize("level", ("rule", "tree"))
def test_levels_run_their_zoo(level):
    """The kill table's rows of a level are its zoo's specs (the torch-free levels; the others build the same way)."""
    from exactspec.conformance.core.levels import get_level

    assert tuple(get_level(level).mutants()) == zoo_of(level)


@pytest.mark.parametrize("level", LEVELS)
def test_valid_variants_are_never_counted_as_mutants(level):
    """Exact rules, standard or not (EXACT_NOT_STANDARD), are valid variants; the kill table counts only mutants."""
    from exactspec.conformance.kill_table import summarize

    zoo = zoo_of(level)
    exact_not_standard = [s for s in zoo if "EXACT_NOT_STANDARD" in s.expected]
    assert all(s.kind == VALID_VARIANT for s in exact_not_standard)
    rows = [
        {
            "name": s.name,
            "kind": s.kind,
            "verdict": s.expected[0] if s.expected[0] != REJECTED else "NOT_EXACT",
            "as_expected": True,
            "missed_by_first_token_only": None,
            "seconds": 0.0,
        }
        for s in zoo
    ]
    summary = summarize(level, "quick", rows)
    assert summary["mutants"] == len(mutants_of(zoo)) and summary["valid_variants"] == len(
        valid_variants_of(zoo)
    )


def test_exact_but_not_standard_rules_are_valid_variants_everywhere():
    rule, tree = zoo_of("rule"), zoo_of("tree")
    for zoo, name in ((rule, "SamplerMatch"), (rule, "BonusSkipped"), (tree, "q_as_one")):
        assert (
            by_name(zoo, name).kind == VALID_VARIANT
            and "EXACT_NOT_STANDARD" in by_name(zoo, name).expected
        )
    from exactspec.conformance.rule.mutants.zoo import MUTANTS, VALID
    from exactspec.conformance.tree.mutants import TREE_MUTANTS

    assert [c.__name__ for c in MUTANTS] == [s.name for s in mutants_of(rule)]
    assert [c.__name__ for c in VALID] == [s.name for s in valid_variants_of(rule)]
    assert all(m.expected == "NOT_EXACT" for m in TREE_MUTANTS)


def _kebab(class_name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", class_name).lower()


def test_one_name_per_entry():
    """A spec's name is its class's: the rule zoo's class name, the sequence zoo's class name in kebab case."""
    for spec in zoo_of("rule"):
        assert spec.make.__name__ == spec.name
    pytest.importorskip("torch")
    from exactspec.conformance.sequence.reference_loop import ReferenceLoop

    for spec in zoo_of("sequence"):
        if spec.make is ReferenceLoop:
            continue
        assert spec.make.name == spec.name
        assert spec.name.split("-", 1)[1] == _kebab(spec.make.__name__), spec.name


def test_engine_zoo_serves_only_the_sequence_mutants_it_names(monkeypatch):
    pytest.importorskip("torch")
    from exactspec.conformance.engine.serve import mutants as engine_zoo
    from exactspec.conformance.sequence import mutants as sequence_zoo

    served = [s.name for s in mutants_of(engine_zoo.zoo())]
    assert served == list(engine_zoo.SERVED_MUTANTS)
    assert set(served) <= {s.name for s in mutants_of(sequence_zoo.ZOO)}
    assert all(
        by_name(engine_zoo.zoo(), n).models == by_name(sequence_zoo.ZOO, n).models for n in served
    )
    extra = spec_module.mutant("mutant-new-bug", "a new generation-level bug", _make)
    monkeypatch.setattr(sequence_zoo, "ZOO", sequence_zoo.ZOO + (extra,))
    # not served until SERVED_MUTANTS names it
    assert "mutant-new-bug" not in {s.name for s in engine_zoo.zoo()}
    monkeypatch.setattr(
        engine_zoo, "SERVED_MUTANTS", engine_zoo.SERVED_MUTANTS + ("benign-bonus-dropped",)
    )
    with pytest.raises(ValueError, match="valid variants"):
        engine_zoo.zoo()


# --------------------------------------------------------------------------- the docs' counts
def _counts(text: str) -> list[tuple[int, int | None, str, str]]:
    return [
        (int(a), int(b) if b else None, level, " ".join(what.split()))
        for a, b, level, what in COUNT.findall(text)
    ]


def test_the_count_reader():
    text = "rejects all 21 rule-level mutants, 10/10 engine-level\nmutants and 2/2 tree-level valid variants"
    assert _counts(text) == [
        (21, None, "rule", "mutants"),
        (10, 10, "engine", "mutants"),
        (2, 2, "tree", "valid variants"),
    ]


@pytest.mark.parametrize("doc", COUNTED_DOCS)
def test_docs_counts_follow_the_zoos(doc):
    """Every zoo count typed in the docs is the zoo's (a count with no level is an error: it cannot be checked)."""
    text = (REPO / doc).read_text(encoding="utf-8")
    counts = _counts(text)
    if doc in MUST_COUNT:
        assert counts, f"{doc}: no zoo count found (write them as 'N <level>-level mutants')"
    checked = {m.span() for m in COUNT.finditer(text)}
    unchecked = [
        m.group(0)
        for m in ANY_COUNT.finditer(text)
        if not any(a <= m.start() and m.end() <= b for a, b in checked)
    ]
    assert not unchecked, (
        f"{doc}: counts without a level, write 'N <level>-level mutants': {unchecked}"
    )
    for n, of, level, what in counts:
        zoo = zoo_of(level)
        actual = len(mutants_of(zoo)) if what == "mutants" else len(valid_variants_of(zoo))
        assert n == actual and of in (None, actual), (
            f"{doc}: '{n}{'' if of is None else f'/{of}'} {level}-level {what}' but the {level} zoo has {actual}"
        )


@pytest.mark.parametrize("table", ("rule", "sequence", "tree", "engine", "engine-standard"))
def test_committed_kill_tables_list_the_zoos(table):
    """The kill tables under docs/certificates/kill-tables/ have one row per zoo entry, with the zoo's name and kind."""
    import json

    level = table.split("-")[0]
    doc = json.loads(
        (REPO / "docs/certificates/kill-tables" / table / "kill-table.json").read_text()
    )
    zoo = zoo_of(level)
    assert [(r["name"], r["kind"]) for r in doc["rows"]] == [(s.name, s.kind) for s in zoo], (
        f"regenerate it: exactspec kill-table --level {level}"
    )
    assert (doc["summary"]["mutants"], doc["summary"]["valid_variants"]) == (
        len(mutants_of(zoo)),
        len(valid_variants_of(zoo)),
    )
