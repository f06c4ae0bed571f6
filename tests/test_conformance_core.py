"""The conformance core shared by every level (rule, sequence, engine): one profile table, a check registry
from which the error budget is derived (and equals what runs), one record/seed/verdict set, one versioned
report document that validates against conformance/report.schema.json at every level."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from exactspec.conformance.engine.profile_settings import EngineSettings
from exactspec.conformance.rule.cases import CASES_BY_NAME, SUITE_CASES
from exactspec.conformance.rule.settings import RuleSettings
from exactspec.conformance.core import (
    LEVELS,
    PROFILES,
    VERDICT_TEXT,
    VERDICTS,
    CheckRecord,
    Profile,
    budget_for,
    case_seed,
    get_profile,
    hard_result,
    planned_names,
    run_registered,
    verdict_of,
)

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[1] / "conformance" / "report.schema.json").read_text()
)
DEMO = CASES_BY_NAME["demo_uniform_draft"]
# every statistical check family of the sequence level
SEQUENCE_SUBSET = [
    "t1.0_k2",
    "batch2_k3",
    "pit_t1.0_k4",
]


# --- a small structural validator: type, required, properties, items, enum, const ----------------------

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[kind])


def schema_errors(value, schema: dict, path: str = "$") -> list[str]:
    """Where `value` breaks `schema` (the subset of draft 2020-12 the report schema uses)."""
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is(value, k) for k in kinds):
            return [f"{path}: {type(value).__name__} is not {kinds}"]
    errors = []
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: {value!r} != {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not in {schema['enum']}")
    if isinstance(value, dict):
        errors += [
            f"{path}: missing {key!r}" for key in schema.get("required", []) if key not in value
        ]
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                errors += schema_errors(value[key], sub, f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{path}[{i}]")
    return errors


def test_validator_catches_broken_documents():
    assert schema_errors({}, SCHEMA)  # every required key missing
    good = {"name": "x"}
    assert not schema_errors([good], SCHEMA["properties"]["cases"])
    assert schema_errors([{"nom": "x"}], SCHEMA["properties"]["cases"])
    assert schema_errors("3.0", SCHEMA["properties"]["schema_version"])
    assert schema_errors(True, {"type": "integer"}) and not schema_errors(
        None, {"type": ["number", "null"]}
    )


# --- profiles ---------------------------------------------------------------------------------------


def test_one_table_states_each_levels_promise():
    assert set(PROFILES) == {"quick", "standard", "full"}
    for name, profile in PROFILES.items():
        assert get_profile(name) is profile and get_profile(profile) is profile
        # the rule level promises 1e-6 at every profile
        assert profile.rule.total_false_fail == 1e-6
        line = profile.describe()
        assert f"rule level total false-fail <= {profile.rule.total_false_fail:g}" in line
        assert f"sequence level total false-fail <= {profile.sequence.total_false_fail:g}" in line
        assert f"engine level total false-fail <= {profile.engine.total_false_fail:g}" in line
        assert "positions 1..max_tokens" in line and "any shape" in line
        for level in LEVELS:
            assert profile.to_dict(level)["total_false_fail"] == profile.total_false_fail(level)
            assert profile.settings(level) is getattr(profile, level)
    assert LEVELS == ("rule", "sequence", "engine", "tree")
    names = ("quick", "standard", "full")
    assert [PROFILES[n].sequence.total_false_fail for n in names] == [1e-3, 1e-4, 1e-5]
    assert [PROFILES[n].engine.total_false_fail for n in names] == [1e-3, 1e-4, 1e-5]
    # mean per-token TV
    assert [PROFILES[n].to_dict("engine")["target_tv"] for n in names] == [
        0.15,
        0.05,
        0.02,
    ]


def test_plugin_lists_the_table_names():
    from exactspec.conformance.plugin import PROFILE_NAMES

    assert tuple(PROFILE_NAMES) == tuple(PROFILES)


def test_profile_is_keyword_only_and_validated():
    quick = PROFILES["quick"]
    with pytest.raises(TypeError):
        Profile("x", "d", 1e-3)  # positional on purpose: refused
    with pytest.raises(TypeError):
        EngineSettings(1e-3, 0.15)  # positional on purpose: refused
    with pytest.raises(ValueError, match="total_false_fail"):
        RuleSettings(**{**quick.rule.__dict__, "total_false_fail": 2.0})
    for name, bad in (("total_false_fail", 0.0), ("target_tv", 0.0)):
        with pytest.raises(ValueError, match=name):
            EngineSettings(**{**quick.engine.__dict__, name: bad})
    with pytest.raises(ValueError, match="false_pass_rate"):
        Profile(name="x", description="d", false_pass_rate=0.0)
    with pytest.raises(ValueError, match="no settings for profile 'x'"):
        Profile(name="x", description="d", false_pass_rate=1e-3).settings("engine")
    with pytest.raises(ValueError, match="profile"):
        get_profile("fast")
    with pytest.raises(ValueError, match="level"):
        quick.settings("token")


# --- records, seeds, verdicts -------------------------------------------------------------------------


def _record(category: str, passed: bool) -> CheckRecord:
    return CheckRecord("impl", "case", "check", category, hard_result("check", passed, 1, "why"))


def test_one_verdict_set_worst_first():
    assert VERDICTS == (
        "CONTRACT_VIOLATION",
        "NOT_EXACT",
        "INCONCLUSIVE",
        "QUALIFIED",
        "EXACT_NOT_STANDARD",
        "CERTIFIED",
    )
    assert set(VERDICT_TEXT) == set(VERDICTS)
    assert verdict_of([_record("exactness", True)]) == "CERTIFIED"
    assert (
        verdict_of([_record("exactness", True)], qualified=["monotone class only"]) == "QUALIFIED"
    )
    assert (
        verdict_of([_record("exactness", True)], ["short"], ["monotone class only"])
        == "INCONCLUSIVE"
    )
    assert (
        verdict_of([_record("exactness", False)], qualified=["monotone class only"]) == "NOT_EXACT"
    )
    # a standard-rule failure alone never claims exactness: only with a passed confirmatory exactness test
    assert verdict_of([_record("standard_rule", False)]) == "INCONCLUSIVE"
    confirmed = _record("exactness", True)
    confirmed.result.details["confirmatory"] = True
    assert verdict_of([_record("standard_rule", False), confirmed]) == "EXACT_NOT_STANDARD"
    other_case = CheckRecord("impl", "other", "confirm_position_1", "exactness", confirmed.result)
    assert verdict_of([_record("standard_rule", False), other_case]) == "INCONCLUSIVE"  # per case
    assert verdict_of([_record("standard_rule", False), _record("exactness", False)]) == "NOT_EXACT"
    assert verdict_of([_record("invariant", False)]) == "NOT_EXACT"
    assert (
        verdict_of([_record("invariant", False), _record("contract", False)])
        == "CONTRACT_VIOLATION"
    )
    with pytest.raises(ValueError, match="category"):
        _record("style", True)


def test_inconclusive_only_when_no_counted_failure_implies_worse():
    why = ["speculation not observed"]
    assert verdict_of([_record("exactness", True)], why) == "INCONCLUSIVE"
    # exactness not established
    assert verdict_of([_record("standard_rule", False)], why) == "INCONCLUSIVE"
    assert verdict_of([_record("exactness", False)], why) == "NOT_EXACT"
    assert verdict_of([_record("contract", False)], why) == "CONTRACT_VIOLATION"
    assert verdict_of([_record("exactness", True)], []) == "CERTIFIED"
    with pytest.raises(ValueError, match="inconclusive"):
        verdict_of([], "one reason")


def test_hard_result_and_case_seed():
    ok, bad = (
        hard_result("structure", True, 5, "fine"),
        hard_result("structure", False, 5, "structure: FAIL: x"),
    )
    assert ok.passed and ok.false_fail_rate == 0 and ok.message == "structure: PASS: fine"
    assert not bad.passed and bad.message == "structure: FAIL: x"
    assert case_seed("demo", "statistical") == zlib.crc32(b"demo|statistical")
    assert case_seed("demo", "a") != case_seed("demo", "b") and case_seed("demo") == case_seed(
        "demo", ""
    )
    with pytest.raises(ValueError, match="name"):
        case_seed(DEMO)


# --- registry and budget ------------------------------------------------------------------------------


def test_budget_counts_the_planned_checks():
    for profile in PROFILES.values():
        budget = budget_for("rule", profile, SUITE_CASES)
        assert budget.n_checks == sum(len(planned_names("rule", c)) for c in SUITE_CASES)
        assert budget.total_false_fail == profile.rule.total_false_fail
    assert planned_names("rule", DEMO)[: DEMO.k + 1] == [
        f"position_{j}" for j in range(1, DEMO.k + 2)
    ]
    with pytest.raises(ValueError, match="level"):
        budget_for("token", "quick", SUITE_CASES)


def _wrong_records(sample, rate, profile):
    return [
        CheckRecord(
            "i", DEMO.name, "position_1", "exactness", hard_result("position_1", True, 1, "")
        )
    ]


def test_run_registered_refuses_undeclared_records():
    from dataclasses import replace

    from exactspec.conformance.rule.registry import RULE_CHECKS

    checks = tuple(replace(c, run=_wrong_records) for c in RULE_CHECKS)
    with pytest.raises(RuntimeError, match="declared"):
        run_registered(checks, DEMO, None, 1e-6, get_profile("quick"))
    misplanned = tuple(replace(c, plan=lambda case, prof: []) for c in RULE_CHECKS)
    with pytest.raises(RuntimeError, match="plans"):
        misplanned[0].plans(DEMO, get_profile("quick"))


def test_every_level_is_declared_once():
    from exactspec.conformance.core.levels import get_level
    from exactspec.conformance.loader import LEVELS as LOADER_LEVELS
    from exactspec.conformance.kill_table import add_arguments as kill_table_arguments

    assert LOADER_LEVELS == ("auto", *LEVELS)
    for name in LEVELS:
        level = get_level(name)
        assert (
            level.name == name and level.checks and get_profile("quick").settings(name) is not None
        )
    import argparse

    parser = argparse.ArgumentParser()
    kill_table_arguments(parser)
    assert next(a for a in parser._actions if a.dest == "level").choices == LEVELS


def test_rule_quick_run_produces_exactly_the_budgeted_checks():
    from exactspec.conformance import certify

    result = certify(
        "exactspec.conformance.adapters.reference:Reference", "rule", "quick", hypothesis=False
    ).result
    stat = [r for r in result.records if r.statistical]
    assert result.verdict == "CERTIFIED"
    assert (
        len(stat) == result.budget["n_checks"] == budget_for("rule", "quick", SUITE_CASES).n_checks
    )
    assert result.budget["within_budget"]


@pytest.mark.parametrize("profile", ["standard", "full"])
def test_rule_records_match_the_plan_at_every_profile(profile):
    """Running every case at standard/full is slow; one case at that profile's n, and the plan for all."""
    from exactspec.conformance.adapters.reference import Reference
    from exactspec.conformance.rule.harness import Harness
    from exactspec.conformance.rule.level import statistical_records

    rate = budget_for("rule", profile, SUITE_CASES).per_check_false_fail_rate
    records = statistical_records(Harness(Reference(), "ref"), DEMO, get_profile(profile), rate)
    assert [r.check for r in records if r.statistical] == planned_names("rule", DEMO)


def test_sequence_budget_matches_the_former_count_at_every_profile():
    from exactspec.conformance.core.levels import get_level
    from exactspec.conformance.sequence.cases import CASES, REAL_CASES

    level = get_level("sequence")
    for profile in PROFILES.values():
        for real_model in (False, True):
            names = [
                c.name
                for c in CASES + (REAL_CASES if real_model else [])
                if profile.name != "quick" or c.in_quick
            ]
            cases = level.select_cases(profile, None, names)
            expected = sum(
                c.batch * (1 + c.max_new_tokens)
                if c.level == "exact"
                else 2
                if c.level == "pit"
                else 0
                for c in cases
            )
            assert budget_for("sequence", profile, cases).n_checks == expected
            assert (
                budget_for("sequence", profile, cases).total_false_fail
                == profile.sequence.total_false_fail
            )


@pytest.mark.slow
def test_sequence_quick_run_produces_exactly_the_budgeted_checks():
    """A subset with every check family (the whole quick run: tests/test_sequence_meta.py::test_valid_certified)."""
    pytest.importorskip("torch")
    from exactspec.conformance import certify
    from exactspec.conformance.core.levels import get_level

    result = certify("reference", "sequence", "quick", cases=SEQUENCE_SUBSET).result
    assert result.verdict == "CERTIFIED", [r.result.message for r in result.failed]
    names = [r.check for r in result.records if r.statistical]
    cases = get_level("sequence").select_cases(get_profile("quick"), None, SEQUENCE_SUBSET)
    assert names == [n for c in cases for n in planned_names("sequence", c)]
    assert (
        len(names) == result.budget["n_checks"] == budget_for("sequence", "quick", cases).n_checks
    )


def _engine_run(tmp_path, profile: str, **files):
    """A certify-samples run on synthetic sample files (tests/test_engine_offline.py's toy laws)."""
    from exactspec.conformance.engine.engine_level import certify_samples
    from exactspec.conformance.engine.samples import read_samples
    from tests.test_engine_offline import make_files

    ref_path, cand_path = make_files(tmp_path, **files)
    return certify_samples(read_samples(ref_path), read_samples(cand_path), profile)


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_engine_run_produces_exactly_the_budgeted_checks(tmp_path, profile):
    from exactspec.conformance.engine.engine_level import EngineCase

    result = _engine_run(tmp_path, profile, n=200)
    cases = [
        EngineCase(c["name"], c["greedy"], c["positions"], c["law_checks"]) for c in result.cases
    ]
    names = [r.check for r in result.records if r.statistical]
    assert names == [n for c in cases for n in planned_names("engine", c)]
    budget = budget_for("engine", profile, cases)
    assert len(names) == result.budget["n_checks"] == budget.n_checks > 0
    assert budget.total_false_fail == get_profile(profile).engine.total_false_fail
    assert {r.result.false_fail_rate for r in result.statistical} == {
        budget.per_check_false_fail_rate
    }
    greedy = EngineCase("g", True, 4)
    assert (
        planned_names("engine", greedy) == []
        and budget_for("engine", profile, [greedy]).n_checks == 1
    )
    varying = EngineCase("g", True, 4, reference_varies=True)
    assert planned_names("engine", varying) == ["greedy_spread"]


def test_engine_run_refuses_undeclared_records():
    from dataclasses import replace

    from exactspec.conformance.engine.engine_level import EngineCase
    from exactspec.conformance.engine.check_table import ENGINE_CHECKS

    case = EngineCase("p0", False, 2)
    checks = tuple(replace(c, run=lambda sample, rate, profile: []) for c in ENGINE_CHECKS)
    with pytest.raises(RuntimeError, match="declared"):
        run_registered(checks, case, case, 1e-3, get_profile("quick"))


# --- the one report -------------------------------------------------------------------------------------


def _check_layout_and_schema(out: Path, level: str) -> dict:
    assert (out / "certificate.json").is_file() and (out / "CERTIFICATE.md").is_file()
    doc = json.loads((out / "certificate.json").read_text())
    assert doc["schema_version"] == "2.1" and doc["level"] == level
    assert schema_errors(doc, SCHEMA) == []
    assert doc["budget"]["n_checks"] == doc["budget"]["n_statistical_records"]
    return doc


def test_rule_report_validates(tmp_path):
    from exactspec.conformance import certify

    cert = certify(
        "exactspec.conformance.adapters.reference:Reference",
        "rule",
        "quick",
        cases=[DEMO.name],
        hypothesis=False,
    )
    cert.write(tmp_path)
    doc = _check_layout_and_schema(tmp_path, "rule")
    assert doc["verdict"] == "CERTIFIED" and doc["cases"][0]["name"] == DEMO.name
    assert "rule level total false-fail" in doc["profile"]["promise"]


def test_sequence_report_validates(tmp_path):
    pytest.importorskip("torch")
    from exactspec.conformance import certify

    cert = certify("reference", "sequence", "quick", cases=["t1.0_k2", "greedy_tiny"])
    cert.write(tmp_path)
    doc = _check_layout_and_schema(tmp_path, "sequence")
    assert doc["verdict"] == cert.verdict == "CERTIFIED"
    assert {c["name"] for c in doc["cases"]} == {"t1.0_k2", "greedy_tiny"}
    assert "CERTIFIED" in (tmp_path / "CERTIFICATE.md").read_text()


def test_engine_report_validates_and_uses_the_core_writer(tmp_path):
    from exactspec.conformance.engine.certificate import write_engine_report

    result = _engine_run(tmp_path, "quick", n=200, draft_n=0)  # never drafted: INCONCLUSIVE
    paths = write_engine_report(result, tmp_path / "cert")
    doc = _check_layout_and_schema(tmp_path / "cert", "engine")
    assert doc == json.loads(Path(paths["json"]).read_text())
    assert doc["verdict"] == "INCONCLUSIVE" and doc["verdict_text"] == VERDICT_TEXT["INCONCLUSIVE"]
    assert doc["passed"] is False and doc["inconclusive"] and doc["profile"]["target_tv"] == 0.15
    assert "engine level total false-fail" in doc["profile"]["promise"]
    assert doc["profile"]["settings"] == {"total_false_fail": 1e-3, "target_tv": 0.15}
    assert (
        doc["engine"]["ruled_out"]["target"] == 0.15 and doc["engine"]["ruled_out"]["largest"] > 0
    )
    assert doc["engine"]["speculation_evidence"]["observed"] is False
    assert "INCONCLUSIVE" in (tmp_path / "cert" / "CERTIFICATE.md").read_text()
    broken = {**doc, "engine": "not an object"}
    assert schema_errors(broken, SCHEMA)


# --- schema 2.1 and readers of 2.0 ----------------------------------------------------------------


def test_committed_2_0_certificates_read_as_2_1():
    from exactspec.conformance.core.report import read_certificate

    root = Path(__file__).resolve().parents[1] / "docs" / "certificates"
    old = [
        p
        for p in sorted(root.rglob("certificate.json"))
        if json.loads(p.read_text())["schema_version"] == "2.0"
    ]
    for path in old[:6]:
        doc = read_certificate(path)
        assert doc["schema_version"] == "2.1" and doc["read_from_version"] == "2.0"
        assert schema_errors(doc, SCHEMA) == [], path
        assert all("alpha" not in c and "false_fail_rate" in c for c in doc["checks"])


def test_reader_refuses_an_unknown_version():
    from exactspec.conformance.core.report import read_certificate

    with pytest.raises(ValueError, match="schema_version"):
        read_certificate({"schema_version": "3.0"})
