"""The per-check false-fail table (docs/alpha-table.json): recomputed, every realised rate is <= its nominal one
and their sum is <= the level's stated total at every profile and level; every row names its guarantee; the
committed table is the current one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exactspec.conformance import alpha_table
from exactspec.conformance.core.profiles import PROFILE_NAMES

COMMITTED = Path(__file__).resolve().parents[1] / "docs" / "alpha-table.json"
REGENERATE = "regenerate with: python -m exactspec.conformance.alpha_table --out docs"


def _check_level(level: str) -> dict:
    doc = alpha_table.table((level,), PROFILE_NAMES)[level]
    for profile, t in doc.items():
        assert t["n_checks"] > 0
        for row in t["rows"]:
            assert 0.0 <= row["realised"] <= row["nominal"] * (1 + 1e-9), (profile, row)
            assert row["guarantee"] in alpha_table.GUARANTEES, row
            if row["guarantee"] == "asymptotic only":  # unproven: counted at nominal, and says why
                assert row["realised"] == row["nominal"] and row["how"], row
            if row["how"] == "exact tail, rate computed exactly":
                assert row["realised"] > 0.0, row  # a computed size, not a placeholder
        assert t["sum_nominal"] <= t["total_stated"] * (1 + 1e-9), profile
        assert t["sum_realised"] <= t["total_stated"] * (1 + 1e-9) and t["within"], profile
        assert t["asymptotic_only"] == sum(r["guarantee"] == "asymptotic only" for r in t["rows"])
        if level in ("rule", "tree"):  # the confirmatory tests' share is stated next to the budget
            assert t["confirm"]["worst_case_exact_non_standard"] >= t["sum_nominal"] * (1 - 1e-9)
            assert t["confirm"]["within_if_confirmed"]
    return doc


@pytest.mark.parametrize("level", alpha_table.level_names())
def test_recomputed_table_within_stated_totals_and_committed(level):
    if level == "sequence":
        pytest.importorskip("torch")  # the sequence laws are enumerated on the tiny torch models
    doc = _check_level(level)
    committed = json.loads(COMMITTED.read_text())[level]
    for profile, t in doc.items():
        got = [(r["case"], r["check"], r["n"]) for r in t["rows"]]
        want = [(r["case"], r["check"], r["n"]) for r in committed[profile]["rows"]]
        assert [r["guarantee"] for r in t["rows"]] == [
            r["guarantee"] for r in committed[profile]["rows"]
        ], REGENERATE
        assert got == want, f"docs/alpha-table.json is stale for {level}/{profile}: {REGENERATE}"


def test_exact_realised_rate_is_below_level_and_close_to_it():
    """A 2-bin check at n = 2000: the exact size at 1e-6 is <= 1e-6 and not absurdly conservative."""
    import numpy as np

    size = alpha_table.exact_realised_rate(np.array([0.3, 0.7]), 2000, 1e-6)
    assert 2e-7 < size <= 1e-6
    assert alpha_table.exact_realised_rate(np.full(4, 0.25), 100, 1e-3) is None


def test_no_check_rests_on_an_asymptotic_tail():
    """Every level's table has no asymptotic-only check: a tree position whose rows differ by prefix is exact KS on
    a fixed number of PIT values; the engine's checks are e-processes (Ville's inequality) proven at every look;
    the confirmatory tests stay inside the budget; an unknown check kind is refused."""
    rows = {r["check"]: r for r in alpha_table.level_rows("engine", "quick")[0]}
    assert set(rows) == {
        "law_drift",
        "law_lr",
        "context_law",
        "near_zero_tokens",
        "load_law",
        "reference_law",
    }
    assert all(
        r["guarantee"] == "proven bound" and "Ville" in r["how"] and r["n"] is None
        for r in rows.values()
    )
    tree = {(r["case"], r["check"]): r for r in alpha_table.level_rows("tree", "quick")[0]}
    # rows by path: the PIT's exact KS
    assert tree[("wor_w3_d2", "position_2")]["guarantee"] == "exact"
    assert tree[("wor_w3_d2", "position_2")]["how"].startswith("exact (KS")
    # one row: LR
    assert tree[("wor_w3_d2", "position_1")]["how"] != tree[("wor_w3_d2", "position_2")]["how"]
    assert all(
        alpha_table.confirm_share(level, p)["within_if_confirmed"]
        for p in PROFILE_NAMES
        for level in ("rule", "tree")
    )
    for level in ("tree", "engine"):
        for profile in PROFILE_NAMES:
            assert not [
                r
                for r in alpha_table.table((level,), (profile,))[level][profile]["rows"]
                if r["guarantee"] == "asymptotic only"
            ], (level, profile)
    with pytest.raises(ValueError, match="kind"):
        alpha_table.check_row("rule", "c", "x", None, 10, 20.0, 1e-3, 1e-3, kind="chi2")


def test_rows_follow_the_tests_own_binning():
    """A law whose pooling leaves one bin still runs the LR test (the mode against the rest) and its row says so; a
    point mass and a test no observation reaches are hard (0)."""
    row = alpha_table.check_row("rule", "c", "x", [0.999, 0.0005, 0.0005], 50, 20.0, 1e-3, 1e-3)
    assert row["bins"] == 2 and row["guarantee"] == "exact" and 0 < row["realised"] <= 1e-3
    assert (
        alpha_table.check_row("rule", "c", "x", [0.0, 1.0], 50, 20.0, 1e-3, 1e-3)["guarantee"]
        == "hard (0)"
    )
    assert (
        alpha_table.check_row("rule", "c", "x", [0.5, 0.5], 0, 20.0, 1e-3, 1e-3)["realised"] == 0.0
    )
