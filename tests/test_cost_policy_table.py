"""benchmarks/README.md's cost-policy table is the one `cost_policy_table.py` prints from results/cost_policy.json."""

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _table_module():
    spec = importlib.util.spec_from_file_location(
        "cost_policy_table", BENCHMARKS / "cost_policy_table.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_table_is_the_result_file(monkeypatch, capsys):
    monkeypatch.setattr(
        sys, "argv", ["cost_policy_table.py", str(BENCHMARKS / "results" / "cost_policy.json")]
    )
    assert _table_module().main() == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 + 21, "header, rule and one line per configuration"
    readme = (BENCHMARKS / "README.md").read_text()
    missing = [line for line in lines if line not in readme]
    assert not missing, (
        f"benchmarks/README.md lacks {missing[:3]}: run benchmarks/cost_policy_table.py"
    )


def test_a_contender_that_did_not_run_prints_a_dash():
    row = _table_module().row(
        {
            "family": "code",
            "temperature": 0.0,
            "background_cores": 3,
            "cost_speedup": {"median": 1.5},
            "fixed_speedup": {"median": 1.25},
            "best_fixed_speedup": {"median": 1.6},
            "best_fixed_k": 3,
            "cost_over_best_fixed": {"median": 0.9},
            "plain_again_ratio": {"median": 1.0},
        }
    )
    assert row == "| code, T = 0, 3 | ×1.50 | ×1.25 | ×1.60 (k = 3) | 0.90 | – | ×1.00 |"
