"""Rule-level cases as data: the curated JSON file reproduces the cases the suite always ran, bad case
files are refused with errors naming the file, the case and the field, the schema file describes what
the loader checks, and the modules import in a fresh interpreter without cycles."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from exactspec.conformance.rule import cases as cases_module
from exactspec.conformance.rule.cases import (
    CASE_FIELDS,
    CURATED,
    CURATED_FILE,
    FILE_FIELDS,
    GENERATED,
    RECIPES,
    REQUIRED,
    REQUIRED_FIELDS,
    ROW_KINDS,
    SCHEMA_FILE,
    SUITE_CASES,
    Case,
    generated_entries,
    load_cases,
    write_cases,
)
from exactspec.conformance.rule.strategies import build_case, statistical_cases

REPO = Path(__file__).resolve().parents[1]

# Fingerprints of the cases as the Python definitions built them before they became data (taken from a
# snapshot of those definitions): name -> (k, V, tags, sha256[:16] of the float64 rows p then q,
# per-row sum_i (i+1) x_i, per-row count of zeros, per-row argmax).
TODAY = {
    "demo_uniform_draft": (
        4,
        4,
        ("demo",),
        "89e39580afb7385b",
        [1.75, 1.75, 1.75, 1.75, 1.75, 2.5, 2.5, 2.5, 2.5],
        [0, 0, 0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0, 0, 0],
    ),
    "demo_mixed_draft": (
        4,
        4,
        ("demo",),
        "284cfa051e62bb2e",
        [1.75, 1.75, 1.75, 1.75, 1.75, 2.05, 2.05, 2.05, 2.05],
        [0, 0, 0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0, 0, 0],
    ),
    "demo_identical_draft": (
        4,
        4,
        ("demo", "p_equals_q"),
        "cff7add2a6408f88",
        [1.75, 1.75, 1.75, 1.75, 1.75, 1.75, 1.75, 1.75, 1.75],
        [0, 0, 0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0, 0, 0],
    ),
    "rows_differ_k3": (
        3,
        6,
        ("rows_differ",),
        "9af8642b2f541e06",
        [
            3.29372530105188,
            2.86658952771295,
            3.49013816192612,
            2.60539449109799,
            2.57833970428967,
            3.53418436657794,
            3.9085510220324,
        ],
        [0, 0, 0, 0, 0, 0, 0],
        [2, 3, 2, 1, 2, 4, 5],
    ),
    "disjoint_supports": (
        2,
        5,
        ("disjoint", "p_zero_q_pos", "q_zero_p_pos"),
        "3d2af7e0e34519ca",
        [1.4, 1.4, 1.4, 3.7, 3.7],
        [3, 3, 3, 2, 2],
        [0, 0, 0, 2, 2],
    ),
    "q_zero_where_p_positive": (
        2,
        5,
        ("q_zero_p_pos",),
        "e74928e67e46bf82",
        [2.3, 3.0, 2.75, 1.5, 3.8],
        [1, 1, 1, 3, 3],
        [0, 3, 0, 0, 2],
    ),
    "p_zero_where_q_positive": (
        2,
        4,
        ("p_zero_q_pos",),
        "e16914ed706f739c",
        [1.5, 2.3, 2.8, 2.5, 3.4],
        [2, 2, 0, 0, 0],
        [0, 1, 3, 0, 3],
    ),
    "one_hot_target": (
        3,
        4,
        ("one_hot",),
        "1b0a583b24449e42",
        [3.0, 3.0, 3.0, 3.0, 2.0, 2.0, 2.0],
        [3, 3, 3, 3, 0, 0, 0],
        [2, 2, 2, 2, 0, 0, 0],
    ),
    "one_hot_draft": (
        2,
        5,
        ("one_hot",),
        "09ade3c8ddc6b51e",
        [2.79530801388888, 3.31287317523417, 3.04577434701218, 1.0, 4.0],
        [0, 0, 0, 4, 4],
        [3, 4, 4, 0, 3],
    ),
    "near_1e-12": (
        2,
        6,
        ("tiny",),
        "1581a6d50ce06b29",
        [3.199999999995, 3.800000000005, 3.199999999995, 4.099999999995, 3.800000000005],
        [1, 1, 1, 1, 1],
        [1, 4, 1, 4, 4],
    ),
    "cumsum_below_one_trailing_zeros": (
        2,
        12,
        ("p_zero_q_pos", "rounding"),
        "191c69bac6b146fb",
        [5.5, 7.5, 5.5, 8.25, 3.0],
        [2, 2, 2, 1, 7],
        [0, 2, 0, 10, 0],
    ),
    "p_equals_q_bf16_unrepresentable": (
        3,
        5,
        ("p_equals_q", "rounding"),
        "b564f72f984de51d",
        [
            3.39476318359375,
            2.284189453125,
            3.39476318359375,
            2.284189453125,
            3.39476318359375,
            2.284189453125,
            3.39476318359375,
        ],
        [0, 0, 0, 0, 0, 0, 0],
        [4, 0, 4, 0, 4, 0, 4],
    ),
    "k8_rows_differ": (
        8,
        3,
        ("rows_differ", "k8"),
        "3d1a9bfa978f2392",
        [
            1.87205062937855,
            1.95389826720017,
            1.97139847565678,
            1.8156289586411,
            1.84704323983365,
            1.35968589331935,
            1.60067879778415,
            1.88908433227988,
            2.03585897141496,
            1.88343485442441,
            2.48524041208626,
            1.92619450051116,
            2.0673962938069,
            1.7390094731505,
            1.54745286733724,
            2.16293749499496,
            1.97072136538502,
        ],
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        [1, 0, 0, 1, 1, 0, 0, 1, 2, 1, 2, 1, 2, 0, 0, 1, 0],
    ),
    "large_vocab_32k": (
        2,
        32768,
        ("large_vocab",),
        "b8aeece6814bee96",
        [1826.10384823211, 15326.541512609, 3121.22121570252, 16384.5, 8576.32268042054],
        [0, 0, 0, 0, 0],
        [0, 3567, 0, 0, 3567],
    ),
    "gen_V5_k2_p_zero_q_pos-spiky_s1665772335": (
        2,
        5,
        ("generated",),
        "29c573dee5f6dfd7",
        [4.02959215284812, 3.94334994380233, 4.45948610075005, 4.31284770203079, 2.21174370458137],
        [2, 0, 0, 0, 0],
        [3, 2, 4, 4, 0],
    ),
    "gen_V5_k1_random_s612176794": (
        1,
        5,
        ("generated",),
        "5d5c9e8e781bcaf2",
        [2.57961622339387, 3.66714927992773, 3.03606041753136],
        [0, 0, 0],
        [0, 2, 4],
    ),
    "gen_V5_k3_random-disjoint-tiny_s1711693564": (
        3,
        5,
        ("generated",),
        "0f128ffbbabd1922",
        [
            2.92306843121205,
            2.10393074156364,
            3.91898242845348,
            4.0,
            3.54695722551349,
            5.0,
            2.80230073753917,
        ],
        [0, 1, 0, 4, 0, 4, 0],
        [3, 1, 4, 3, 4, 4, 2],
    ),
    "gen_V3_k2_tiny-one_hot_q_s597914449": (
        2,
        3,
        ("generated",),
        "e651067d10beabb1",
        [1.57339643991578, 2.76733853084439, 2.34256773286446, 1.98734859571493, 1.0],
        [0, 0, 0, 0, 2],
        [0, 2, 2, 1, 0],
    ),
}


def _rows(case: Case) -> np.ndarray:
    return np.concatenate([case.target_probs, case.draft_probs])


def _inline_names() -> set[str]:
    return {c["name"] for c in json.loads(CURATED_FILE.read_text())["cases"] if "recipe" not in c}


#: Cases added (issue 13) to reach specific bugs: recipes, checked by test_conformance_reach_cases.py.
REACH_CASES = (
    "near_equal_draft",
    "zipf_2048_draft_top64",
    "padded_vocab_50304",
    "deep_k8_high_acceptance",
    "bf16_exact_rows",
    "acceptance_rate_k1",
    "rows_vary_by_round",
)


def test_suite_cases_are_the_cases_of_the_python_definitions():
    assert [c.name for c in SUITE_CASES if c.name not in REACH_CASES] == list(TODAY)
    inline = _inline_names()
    # every curated case but the 32k-vocabulary one is written out in the file
    assert len(inline) == 13
    for case in SUITE_CASES:
        if case.name in REACH_CASES:
            continue
        k, V, tags, digest, moments, zeros, argmax = TODAY[case.name]
        rows = _rows(case)
        assert (case.k, case.V, case.tags) == (k, V, tags), case.name
        np.testing.assert_allclose(
            rows @ np.arange(1, V + 1), moments, rtol=1e-13, err_msg=case.name
        )
        assert [int((r == 0).sum()) for r in rows] == zeros, case.name
        assert [int(r.argmax()) for r in rows] == argmax, case.name
        if case.name in inline:  # parsed from the file: the same float64 bits, on every platform
            assert hashlib.sha256(rows.astype("<f8").tobytes()).hexdigest()[:16] == digest, (
                case.name
            )


def test_exactness_sensitive_rows_survive_the_file():
    by_name = {c.name: c for c in CURATED}
    tenths = by_name["cumsum_below_one_trailing_zeros"].target_probs[0]
    # not renormalised: the inverse-CDF trap stays armed
    assert np.cumsum(tenths)[-1] == 0.9999999999999999
    bf = by_name["p_equals_q_bf16_unrepresentable"].target_probs[0]
    # the exact fraction, rounded once
    assert bf[0] == float(Fraction(1, 4) + Fraction(3501, 1000 * 2**9))
    assert by_name["near_1e-12"].target_probs[0, 0] == 1e-12
    assert all(c.why for c in SUITE_CASES)


def test_generated_cases_are_recipes_and_strategies_reexport_them():
    entries = generated_entries()
    assert all(e["recipe"]["name"] == "generated" for e in entries)
    assert [c.name for c in GENERATED] == [e["name"] for e in entries]
    for case, entry in zip(GENERATED, entries):
        recipe = entry["recipe"]
        built = build_case(recipe["V"], entry["k"], recipe["kinds"], recipe["seed"])
        assert built.name == case.name and np.array_equal(_rows(built), _rows(case))
    assert [c.name for c in statistical_cases()] == [c.name for c in GENERATED]
    assert [c.name for c in statistical_cases(n=2, seed=8)] != [c.name for c in GENERATED[:2]]


def test_zipf_recipe_cycles_rows_for_any_k(tmp_path):
    recipe = {"name": "zipf", "V": 64, "exponent": 1.2, "flatten": 0.5, "permutation_seed": 3}
    path = tmp_path / "zipf.json"
    path.write_text(json.dumps({"cases": [{"name": "z", "why": "w", "k": 5, "recipe": recipe}]}))
    (case,) = load_cases(path)
    p, q = case.target_probs, case.draft_probs
    assert p.shape == (6, 64) and q.shape == (5, 64)
    assert (
        np.array_equal(p[0], p[3]) and np.array_equal(p[1], p[4]) and not np.array_equal(p[0], p[1])
    )
    assert np.all(q[0] == 1 / 64) and np.array_equal(q[1], q[3])
    assert sorted(p[1]) == sorted(p[0])  # a permutation of the Zipf row


def test_user_file_with_fractions_and_write_read_roundtrip(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(
        json.dumps(
            {
                "cases": [
                    {
                        "name": "thirds",
                        "why": "exact thirds",
                        "k": 1,
                        "tags": ["mine"],
                        "target_probs": [["1/3", "1/3", "1/3"], [0.5, 0.5, 0]],
                        "draft_probs": [["0.5", "1/4", "2.5e-1"]],
                    }
                ]
            }
        )
    )
    (case,) = load_cases(path)
    assert (
        case.target_probs[0, 0] == 1 / 3
        and case.draft_probs[0, 2] == 0.25
        and case.tags == ("mine",)
    )
    out = tmp_path / "curated_copy.json"
    write_cases(CURATED, out)
    back = load_cases(out)
    assert [c.name for c in back] == [c.name for c in CURATED]
    assert all(
        np.array_equal(_rows(a), _rows(b)) and a.why == b.why and a.tags == b.tags
        for a, b in zip(back, CURATED)
    )
    assert Case.from_dict(CURATED[0].to_dict()).name == CURATED[0].name


def _good(**changes) -> dict:
    case = {
        "name": "c1",
        "why": "w",
        "k": 1,
        "target_probs": [[0.5, 0.5], [1, 0]],
        "draft_probs": [[0.25, 0.75]],
    }
    case.update(changes)
    return {k: v for k, v in case.items() if v is not None}


_RECIPE = {"name": "generated", "V": 4, "kinds": ["equal"], "seed": 1}


@pytest.mark.parametrize(
    "data, case, fragment",
    [
        (
            {"cases": [_good(target_probs=[[0.5, 0.6], [1, 0]])]},
            "c1",
            r"field 'target_probs' rows must sum to 1",
        ),
        (
            {"cases": [_good(draft_probs=[[-0.25, 1.25]])]},
            "c1",
            r"field 'draft_probs' contains a negative",
        ),
        (
            {"cases": [_good(draft_probs=[["nan", 0.5]])]},
            "c1",
            r"field 'draft_probs'\[0\]\[0\]: 'nan' is not a probability",
        ),
        (
            {"cases": [_good(draft_probs=[[float("nan"), 0.5]])]},
            "c1",
            r"field 'draft_probs' contains NaN",
        ),
        (
            {"cases": [_good(target_probs=[[0.5, 0.5]])]},
            "c1",
            r"field 'target_probs' must hold 2 rows for k = 1",
        ),
        (
            {"cases": [_good(target_probs=[[0.5, 0.5], [1, 0, 0]])]},
            "c1",
            r"row 1 has 3 entries.*wrong shape",
        ),
        (
            {"cases": [_good(draft_probs=[[0.25, 0.25, 0.5]])]},
            "c1",
            r"field 'draft_probs' rows have V = 3.*wrong shape",
        ),
        ({"cases": [_good(k=0)]}, "c1", r"field 'k' must be >= 1"),
        ({"cases": [_good(k=True)]}, "c1", r"field 'k' must be an integer"),
        ({"cases": [_good(V=3)]}, "c1", r"field 'V' is 3 but the rows have 2 tokens"),
        ({"cases": [_good(why=None)]}, "c1", r"field 'why' is required"),
        ({"cases": [_good(tags="demo")]}, "c1", r"field 'tags' must be a list of strings"),
        ({"cases": [_good(probs=[1])]}, "c1", r"unknown fields \['probs'\]"),
        (
            {"cases": [_good(draft_probs=None)]},
            "c1",
            r"field 'target_probs' and 'draft_probs' \(or 'recipe'\) are required",
        ),
        (
            {"cases": [_good(recipe=_RECIPE)]},
            "c1",
            r"field 'target_probs': give the rows inline or as a recipe",
        ),
        (
            {"cases": [_good(target_probs=None, draft_probs=None, recipe={"name": "dirichlet"})]},
            "c1",
            r"field 'recipe.name': unknown recipe 'dirichlet'",
        ),
        (
            {"cases": [_good(target_probs=None, draft_probs=None, recipe={**_RECIPE, "seed": -1})]},
            "c1",
            r"field 'recipe.seed' must be an integer >= 0",
        ),
        (
            {
                "cases": [
                    _good(
                        target_probs=None, draft_probs=None, recipe={**_RECIPE, "kinds": ["weird"]}
                    )
                ]
            },
            "c1",
            r"field 'recipe.kinds' must be a non-empty list of row kinds",
        ),
        (
            {
                "cases": [
                    _good(
                        target_probs=None,
                        draft_probs=None,
                        recipe={"name": "zipf", "V": 8, "exponent": 1},
                    )
                ]
            },
            "c1",
            r"field 'recipe.permutation_seed' is required",
        ),
        (
            {
                "cases": [
                    _good(target_probs=None, draft_probs=None, recipe={**_RECIPE, "colour": 1})
                ]
            },
            "c1",
            r"field 'recipe': unknown parameters \['colour'\]",
        ),
        ({"cases": [_good(), _good()]}, "c1", r"field 'name': duplicate name \(cases 0 and 1\)"),
        ({"cases": [_good(name="")]}, "0", r"field 'name' must be a non-empty string"),
        ({"cases": [_good(), 7]}, "1", r"must be a JSON object"),
        ({"cases": []}, None, r"field 'cases' is empty"),
        ([_good()], None, r"a case file is a JSON object with a \"cases\" list"),
        ({"cases": [_good()], "extra": 1}, None, r"unknown top-level fields \['extra'\]"),
    ],
)
def test_bad_case_files_name_file_case_and_field(tmp_path, data, case, fragment):
    path = tmp_path / "bad_cases.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as error:
        load_cases(path)
    message = str(error.value)
    assert message.startswith(str(path)), message
    if case is not None:
        assert (f"case {case!r}" if not case.isdigit() else f"case {case}") in message, message
    assert re.search(fragment, message), message


def test_unreadable_and_non_json_files(tmp_path):
    with pytest.raises(ValueError, match="missing.json: cannot read"):
        load_cases(tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text("{cases: [")
    with pytest.raises(ValueError, match="broken.json: not a valid JSON file"):
        load_cases(tmp_path / "broken.json")


def test_schema_file_describes_what_the_loader_checks():
    schema = json.loads(SCHEMA_FILE.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(schema["properties"]) == set(FILE_FIELDS) and schema["required"] == ["cases"]
    case = schema["$defs"]["case"]
    assert set(case["properties"]) == set(CASE_FIELDS) and case["required"] == list(REQUIRED_FIELDS)
    assert not case["additionalProperties"] and not schema["additionalProperties"]
    recipes = {r["properties"]["name"]["const"]: r for r in schema["$defs"]["recipe"]["oneOf"]}
    assert set(recipes) == set(RECIPES)
    for name, (_, params) in RECIPES.items():
        assert set(recipes[name]["properties"]) == {"name", *params}, name
        assert set(recipes[name]["required"]) == {
            "name",
            *(p for p, (_, d) in params.items() if d is REQUIRED),
        }
    assert recipes["generated"]["properties"]["kinds"]["items"]["enum"] == list(ROW_KINDS)
    pattern = re.compile(schema["$defs"]["probability"]["oneOf"][1]["pattern"])
    assert all(pattern.match(s) for s in ("1/3", "0.3", "1e-12", "0", ".5", "2.5e-1"))
    assert not any(pattern.match(s) for s in ("-0.1", "nan", "1/", "abc"))
    assert json.loads(CURATED_FILE.read_text())["$schema"] == "./cases.schema.json"


def test_case_data_is_a_plain_data_folder():
    folder = cases_module.CASE_DATA_DIR
    assert not (folder / "__init__.py").exists()
    assert {p.name for p in folder.glob("*.json")} >= {"curated.json", "cases.schema.json"}


def _fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )


def test_strategies_import_in_a_fresh_interpreter():
    done = _fresh(
        "from exactspec.conformance.rule.strategies import round_cases, build_case; print(build_case(4, 1, ['equal'], 0).V)"
    )
    assert done.returncode == 0 and done.stdout.strip() == "4", done.stderr


def test_cases_import_neither_strategies_nor_hypothesis_nor_torch():
    done = _fresh(
        "import sys, exactspec.conformance.rule.cases as c; print(len(c.SUITE_CASES), sorted(m for m in "
        "('exactspec.conformance.rule.strategies', 'hypothesis', 'torch') if m in sys.modules))"
    )
    assert done.returncode == 0 and done.stdout.strip() == "25 []", done.stderr


def test_plugin_runs_the_cases_of_a_user_file(tmp_path):
    path = tmp_path / "user_cases.json"
    path.write_text(json.dumps({"cases": [_good(name="my_only_case")]}))
    command = [
        sys.executable,
        "-m",
        "pytest",
        "conformance/rule/test_rule_level.py",
        "--collect-only",
        "-q",
        "-p",
        "no:cacheprovider",
        "--exactspec-cases",
        str(path),
        "--exactspec-impl",
        "exactspec.conformance.adapters.reference:Reference",
    ]
    # the listing's format is the -q one whatever the caller's PYTEST_ADDOPTS says (-v lists a tree)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=300, env=env)
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    assert done.returncode == 0, done.stdout + done.stderr
    # contract/invariants, exactness, standard rule
    assert len([i for i in ids if "my_only_case" in i]) == 3
    assert not any("demo_uniform_draft" in i for i in ids)


def test_contract_example_file_loads(tmp_path):
    text = (REPO / "conformance" / "CONTRACT.md").read_text(encoding="utf-8")
    section = text[text.index("## Cases as data") :]
    example = section[
        section.index("```json") + len("```json") : section.index(
            "```", section.index("```json") + 7
        )
    ]
    path = tmp_path / "example.json"
    path.write_text(example)
    thirds, big = load_cases(path)
    assert (
        thirds.k == 1 and thirds.V == 3 and big.V == 32768 and big.target_probs.shape == (3, 32768)
    )


def test_curated_file_validates_against_the_schema_where_jsonschema_exists():
    """Not a dependency: runs only where `jsonschema` happens to be installed."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert not list(validator.iter_errors(json.loads(CURATED_FILE.read_text())))
    assert list(validator.iter_errors({"cases": [_good(k=0)]}))
    assert list(validator.iter_errors({"cases": [_good(recipe=_RECIPE)]}))
