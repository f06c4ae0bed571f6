"""The one kill table of every level (`exactspec.conformance.kill_table`): its JSON, Markdown and exit code."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from exactspec.conformance import kill_table as kt

ROW_KEYS = {
    "name",
    "kind",
    "models",
    "expected",
    "verdict",
    "as_expected",
    "failed_checks",
    "first_failure",
    "missed_by_first_token_only",
    "diagnosis",
    "seconds",
}
HEADER = "| mutant | models | expected | verdict | failed checks | missed by first-token-only test | seconds |"


def _load(out_dir) -> dict:
    return json.loads((out_dir / kt.JSON_NAME).read_text())


def test_rule_subset_at_quick(tmp_path):
    """Two rule-level mutants at quick: one only the later positions reveal, one breaking the contract."""
    code = kt.main(
        [
            "--level",
            "rule",
            "--profile",
            "quick",
            "--mutants",
            "NoMinBernoulli,SharedCoin",
            "--valid",
            "",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    table = _load(tmp_path)
    rows = {r["name"]: r for r in table["rows"]}
    assert [r["name"] for r in table["rows"]] == ["SharedCoin", "NoMinBernoulli"]  # zoo order
    assert all(set(r) == ROW_KEYS for r in table["rows"])
    shared, bernoulli = rows["SharedCoin"], rows["NoMinBernoulli"]
    assert shared["verdict"] == "NOT_EXACT" and shared["as_expected"]
    # one coin for all positions: position 1 is exact
    assert shared["missed_by_first_token_only"] is True
    assert "position_1" not in shared["failed_checks"] and shared["failed_checks"]
    assert (
        bernoulli["verdict"] == "CONTRACT_VIOLATION"
        and bernoulli["missed_by_first_token_only"] is False
    )
    assert "torch.bernoulli" in bernoulli["models"] and bernoulli["first_failure"]
    summary = table["summary"]
    assert summary["level"] == "rule" and summary["profile"] == "quick" and summary["passed"]
    assert (summary["mutants"], summary["mutants_rejected"], summary["valid_variants"]) == (2, 2, 0)
    assert summary["mutants_missed_by_first_token_only"] == ["SharedCoin"]
    markdown = (tmp_path / kt.MARKDOWN_NAME).read_text()
    assert (
        HEADER in markdown
        and "`SharedCoin` (mutant)" in markdown
        and "Mutants rejected: **2/2**" in markdown
    )


def test_mutant_free_valid_variant_certified(tmp_path):
    """The standard rule itself, through `exactspec kill-table`, with no mutant: certified, exit 0."""
    from exactspec import cli

    code = cli.main(
        [
            "kill-table",
            "--level",
            "rule",
            "--mutants",
            "",
            "--valid",
            "Rule",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    (row,) = _load(tmp_path)["rows"]
    assert (row["name"], row["kind"], row["verdict"]) == ("Rule", "valid_variant", "CERTIFIED")
    assert row["as_expected"] and row["failed_checks"] == [] and row["first_failure"] is None
    assert row["missed_by_first_token_only"] is None  # a valid variant has nothing to miss
    assert "| n/a |" in (tmp_path / kt.MARKDOWN_NAME).read_text()


def _fake_level(monkeypatch, verdicts: dict[str, str]) -> None:
    from exactspec.conformance.rule.level import LEVEL

    subjects = [
        kt.MutantSpec("caught", "mutant", "a bug", (kt.REJECTED,), object),
        kt.MutantSpec("escaped", "mutant", "another bug", ("NOT_EXACT",), object),
        kt.MutantSpec("fine", "valid_variant", "no bug", ("CERTIFIED",), object),
    ]
    monkeypatch.setattr(LEVEL, "mutants", lambda profile="quick": subjects)
    monkeypatch.setattr(
        kt,
        "run_subject",
        lambda level, subject, profile: kt.Outcome(verdicts[subject.name], [], None, False),
    )


@pytest.mark.parametrize(
    "escaped_verdict, code", [("NOT_EXACT", 0), ("CERTIFIED", 1), ("CONTRACT_VIOLATION", 1)]
)
def test_exit_code_follows_every_row(monkeypatch, tmp_path, escaped_verdict, code):
    """1 when a mutant is certified or gets a verdict it does not expect; the marker accepts any rejection."""
    verdicts = {"caught": "FAILED", "escaped": escaped_verdict, "fine": "CERTIFIED"}
    _fake_level(monkeypatch, verdicts)
    assert kt.main(["--level", "rule", "--out", str(tmp_path)]) == code
    table = _load(tmp_path)
    assert table["summary"]["passed"] is (code == 0)
    assert table["summary"]["mutants_rejected"] == 1 + (escaped_verdict != "CERTIFIED")
    missed = {r["name"]: r["missed_by_first_token_only"] for r in table["rows"]}
    assert missed == {
        "caught": True,
        "escaped": None if escaped_verdict == "CERTIFIED" else True,
        "fine": None,
    }


def test_valid_variant_rejected_fails(monkeypatch, tmp_path):
    verdicts = {"caught": "NOT_EXACT", "escaped": "NOT_EXACT", "fine": "NOT_EXACT"}
    _fake_level(monkeypatch, verdicts)
    assert kt.main(["--level", "rule", "--out", str(tmp_path)]) == 1
    assert "**NOT_EXACT (WRONG)**" in (tmp_path / kt.MARKDOWN_NAME).read_text()


def test_bad_input(tmp_path, capsys):
    assert kt.main(["--level", "rule", "--mutants", "NoSuchMutant", "--out", str(tmp_path)]) == 2
    assert "mutants" in capsys.readouterr().err and not (tmp_path / kt.JSON_NAME).exists()
    with pytest.raises(ValueError, match="level"):
        kt.kill_table("kernel")
    with pytest.raises(ValueError, match="profile"):
        kt.kill_table("rule", profile="fast")
    with pytest.raises(SystemExit):
        kt.main(["--profile", "quick"])  # --level is required


def test_runs_as_a_module(tmp_path):
    pytest.importorskip("torch")  # the sequence level's zoo is built on torch models
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "exactspec.conformance.kill_table",
            "--level",
            "sequence",
            "--valid",
            "NoSuchVariant",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert (
        done.returncode == 2
        and "valid: unknown valid_variant name(s) ['NoSuchVariant']" in done.stderr
    )


@pytest.mark.parametrize(
    "name, details, caught",
    [
        ("structure", None, True),
        ("position_0_chisquare_row1", {}, True),
        ("position_2_chisquare", {}, False),
        ("sequence_chisquare", None, False),
        ("greedy_equality", {"mismatches": [{"first_difference_at": 3}]}, False),
        (
            "greedy_equality",
            {"mismatches": [{"first_difference_at": 3}, {"first_difference_at": 0}]},
            True,
        ),
        ("zero_probability_tokens", {"examples": [{"position": 0}]}, True),
        ("zero_probability_tokens", {"examples": [{"position": 7}]}, False),
    ],
)
def test_sequence_first_token_analogue(name, details, caught):
    """A first-token-only sequence test sees the format, position 0's law, and failures located at token 0."""
    from exactspec.conformance.core.records import CheckRecord, hard_result
    from exactspec.conformance.sequence.level import LEVEL

    record = CheckRecord("i", "c", name, "exactness", hard_result(name, False, 1, "", details))
    assert LEVEL.first_token_failure(record) is caught


def test_rule_level_imports_no_torch():
    code = (
        "import sys\n"
        "from exactspec.conformance import kill_table as kt\n"
        "from exactspec.conformance.core.levels import get_level\n"
        "assert len(get_level('rule').mutants()) >= 20 and len(get_level('tree').mutants()) >= 6\n"
        "assert 'torch' not in sys.modules, 'the rule level imported torch'\n"
        "print('NO-TORCH')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and "NO-TORCH" in done.stdout, done.stderr[-2000:]


@pytest.mark.slow
def test_sequence_level_row(tmp_path):
    """One generation-level mutant through the same table: EOS inside a round shows in the first token."""
    pytest.importorskip("torch")
    code = kt.main(
        [
            "--level",
            "sequence",
            "--mutants",
            "mutant-eos-only-at-round-end",
            "--valid",
            "",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    (row,) = _load(tmp_path)["rows"]
    assert set(row) == ROW_KEYS and row["verdict"] != "CERTIFIED" and row["as_expected"]
    assert "structure" in row["failed_checks"] and row["missed_by_first_token_only"] is False


def test_a_level_that_diagnoses_gets_a_diagnosis_column_and_the_others_do_not():
    from exactspec.conformance.kill_table import to_markdown

    row = {
        "name": "m",
        "kind": "mutant",
        "models": "a bug",
        "expected": ["NOT_EXACT"],
        "verdict": "NOT_EXACT",
        "as_expected": True,
        "failed_checks": ["law_lr"],
        "first_failure": "x",
        "missed_by_first_token_only": False,
        "diagnosis": None,
        "seconds": 1.0,
    }
    summary = {
        "level": "engine",
        "profile": "quick",
        "mutants": 1,
        "mutants_rejected": 1,
        "mutants_as_expected": 1,
        "valid_variants": 0,
        "valid_variants_as_expected": 0,
        "mutants_missed_by_first_token_only": [],
    }
    assert "diagnosis |" not in to_markdown({"summary": summary, "rows": [row]})
    diagnosed = to_markdown({"summary": summary, "rows": [{**row, "diagnosis": "temperature"}]})
    assert HEADER + " diagnosis |" in diagnosed and "| 1.0 | temperature |" in diagnosed
