"""Tree-level cases as data under the rule level's convention: a schema file (`case_data/trees.schema.json`) that
states what the loader checks, `$schema` / `description` / `cases` at the top, `name` / `why` / `tags` per case,
and errors naming the file, the case and the field."""

from __future__ import annotations

import json

import pytest
from exactspec.conformance.rule import cases as rule_cases
from exactspec.conformance.tree import cases as tree_cases
from exactspec.conformance.tree.cases import (
    CASE_FIELDS,
    CASE_FILE,
    FILE_FIELDS,
    REQUIRED_FIELDS,
    SCHEMA_FILE,
    TREE_CASES,
    load_tree_cases,
)


def _good(**changes) -> dict:
    entry = {
        "name": "tiny",
        "why": "a bug",
        "branching": [2],
        "replacement": True,
        "model": {"vocab_size": 3, "seed": 1},
    }
    entry.update(changes)
    return {key: value for key, value in entry.items() if value is not None}


def _write(tmp_path, cases, **top) -> str:
    path = tmp_path / "trees.json"
    path.write_text(json.dumps({"cases": cases, **top}))
    return path


def test_tree_cases_follow_the_rule_cases_convention():
    data = json.loads(CASE_FILE.read_text())
    assert data["$schema"] == "./trees.schema.json" and set(data) == set(FILE_FIELDS)
    assert FILE_FIELDS == rule_cases.FILE_FIELDS
    assert {"name", "why", "tags"} <= set(CASE_FIELDS) and {"name", "why"} <= set(REQUIRED_FIELDS)
    assert all(set(entry) <= set(CASE_FIELDS) and entry["why"] for entry in data["cases"])
    assert [c.name for c in TREE_CASES] == [e["name"] for e in data["cases"]]
    assert all(c.summary()["why"] == c.why for c in TREE_CASES)


def test_schema_file_describes_what_the_loader_checks():
    schema = json.loads(SCHEMA_FILE.read_text())
    rule_schema = json.loads(rule_cases.SCHEMA_FILE.read_text())
    assert (
        schema["$schema"]
        == rule_schema["$schema"]
        == "https://json-schema.org/draft/2020-12/schema"
    )
    assert set(schema["properties"]) == set(FILE_FIELDS) and schema["required"] == ["cases"]
    case = schema["$defs"]["case"]
    assert set(case["properties"]) == set(CASE_FIELDS) and case["required"] == list(REQUIRED_FIELDS)
    assert not case["additionalProperties"] and not schema["additionalProperties"]
    model = schema["$defs"]["model"]
    from dataclasses import fields

    from exactspec.reference.tree_models import DEPENDS_ON, DRAFT_KINDS, ContextRows

    assert set(model["properties"]) == {f.name for f in fields(ContextRows)}
    assert model["properties"]["by"]["enum"] == list(DEPENDS_ON)
    assert model["properties"]["draft"]["enum"] == list(DRAFT_KINDS)


def test_a_good_file_loads(tmp_path):
    (case,) = load_tree_cases(_write(tmp_path, [_good(tags=["t"], quick=True)], description="mine"))
    assert (case.name, case.why, case.tags, case.quick, case.V, case.max_length) == (
        "tiny",
        "a bug",
        ("t",),
        True,
        3,
        2,
    )


@pytest.mark.parametrize(
    "cases, top, message",
    [
        ([_good(reason="old name")], {}, "case 'tiny': unknown fields \\['reason'\\]"),
        ([_good(why=None)], {}, "case 'tiny': field 'why' is required"),
        ([_good(why=3)], {}, "case 'tiny': field 'why' must be a string"),
        ([_good(tags="x")], {}, "case 'tiny': field 'tags' must be a list of strings"),
        ([_good(replacement="yes")], {}, "case 'tiny': field 'replacement' must be true or false"),
        (
            [_good(parent=[-1, 0])],
            {},
            "case 'tiny': field 'parent' or 'branching': give exactly one",
        ),
        ([_good(branching=[0])], {}, "case 'tiny': field 'branching': "),
        ([_good(model={"vocab_size": 3})], {}, "case 'tiny': field 'model': "),
        (
            [_good(model={"vocab_size": 3, "seed": 1, "by": "row"})],
            {},
            "case 'tiny': field 'model': by must be",
        ),
        ([_good(replacement=False, branching=[3])], {}, "case 'tiny': field 'model.min_support'"),
        ([_good(), _good()], {}, "case 'tiny': field 'name': duplicate name \\(cases 0 and 1\\)"),
        ([{"why": "no name"}], {}, "case 0: field 'name' must be a non-empty string"),
        ([], {}, "field 'cases' is empty"),
        ([_good()], {"version": 1}, "unknown top-level fields \\['version'\\]"),
    ],
)
def test_malformed_files_name_the_file_the_case_and_the_field(tmp_path, cases, top, message):
    path = _write(tmp_path, cases, **top)
    with pytest.raises(ValueError, match=f"trees.json: .*{message}"):
        load_tree_cases(path)


def test_unreadable_and_non_json_files(tmp_path):
    with pytest.raises(ValueError, match="missing.json: cannot read"):
        load_tree_cases(tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text("{cases: [")
    with pytest.raises(ValueError, match="broken.json: not a valid JSON file"):
        load_tree_cases(tmp_path / "broken.json")


def test_tree_file_validates_against_the_schema_where_jsonschema_exists():
    """Not a dependency: runs only where `jsonschema` happens to be installed (as the rule cases' test does)."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert not list(validator.iter_errors(json.loads(CASE_FILE.read_text())))
    assert list(validator.iter_errors({"cases": [_good(reason="old")]}))
    assert list(validator.iter_errors({"cases": [_good(parent=[-1, 0])]}))
    assert list(validator.iter_errors({"version": 1, "cases": [_good()]}))


def test_loaded_cases_are_the_modules():
    assert tree_cases.TREE_CASES == TREE_CASES and tree_cases.QUICK_TREE_CASES
