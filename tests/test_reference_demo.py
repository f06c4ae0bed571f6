"""The seed-article figures come out of the demo."""

from __future__ import annotations

import numpy as np
import pytest

from exactspec.cli import main
from exactspec.reference.demo import demo_rows


def test_demo_reproduces_seed_figures():
    rows = {row["draft"]: row for row in demo_rows(k=4, rounds=20_000, seed=0)}
    assert [
        round(rows[name]["acceptance_rate"], 2)
        for name in ("uniform", "60% of the way", "identical")
    ] == [0.70, 0.88, 1.00]
    assert [
        round(rows[name]["expected_tokens"], 2)
        for name in ("uniform", "60% of the way", "identical")
    ] == [2.77, 3.94, 5.00]
    for row in rows.values():
        assert row["exact_first_token_equals_p"] and row["exact_law_sums_to_one"]
        # 20,000 rounds: each frequency within 4.5 standard errors of p (false-fail ~1e-5 per entry).
        p = np.array([0.5, 0.3, 0.15, 0.05])
        assert np.all(
            np.abs(np.array(row["simulated_first_token"]) - p) < 4.5 * np.sqrt(p * (1 - p) / 20_000)
        )


def test_demo_command_prints_table(capsys):
    assert main(["reference-demo", "--rounds", "2000"]) == 0
    out = capsys.readouterr().out
    assert "uniform" in out and "0.70" in out and "2.77" in out and "yes (rational)" in out


def test_laws_reject_bad_input():
    from exactspec.reference import acceptance_rate, residual, round_distribution

    with pytest.raises(ValueError, match="p and q must have the same shape"):
        acceptance_rate(np.full(3, 1 / 3), np.full(2, 0.5))
    with pytest.raises(ValueError, match="q rows must sum to 1"):
        residual(np.full(2, 0.5), np.full(2, 0.4))
    with pytest.raises(ValueError, match="exactly 1 in rational mode"):
        from fractions import Fraction

        round_distribution(
            [[Fraction(1, 2), Fraction(1, 3)]] * 2, [[Fraction(1, 2), Fraction(1, 2)]]
        )
    with pytest.raises(ValueError, match="more than"):
        round_distribution(np.full((9, 40), 1 / 40), np.full((8, 40), 1 / 40))
