"""benchmarks/README.md's "Beside llama.cpp" table is the one `dtypes_table.py` prints from results/dtypes.json,
and bench_dtypes marks a run whose greedy text is not its dtype's plain decoding's."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_table_is_the_result_file(monkeypatch, capsys):
    monkeypatch.setattr(
        sys, "argv", ["dtypes_table.py", str(BENCHMARKS / "results" / "dtypes.json")]
    )
    assert _module("dtypes_table").main() == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(lines) == 2 + 4, "header, rule and one line per prompt family"
    readme = (BENCHMARKS / "README.md").read_text()
    missing = [line for line in lines if line not in readme]
    assert not missing, f"benchmarks/README.md lacks {missing[:3]}: run benchmarks/dtypes_table.py"


def _run(tokens_per_s: float, same: bool | None = None) -> dict:
    run = {
        "tokens_per_s": {"median": tokens_per_s},
        "decode_tokens_per_s": {"median": 2 * tokens_per_s},
    }
    if same is not None:
        run["same_tokens_as_plain"] = same
    return run


def test_a_fastest_run_with_another_text_is_marked_and_a_missing_dtype_is_a_dash():
    family = {
        "family": "code",
        "runs": {
            "llama.cpp:plain": _run(70.0),
            "float32:plain": _run(30.0, True),
            "float32:k3": _run(60.0, True),
            "float32:cost": _run(50.0, True),
            "bfloat16:plain": _run(25.0, True),
            "bfloat16:k8": _run(90.0, False),
            "bfloat16:cost": _run(80.0, True),
        },
    }
    assert _module("dtypes_table").row(family) == (
        "| code | 70.0 (140.0) | 30.0 (60.0) | 60.0 (120.0), k = 3 | 25.0 (50.0) "
        "| 90.0 (180.0), k = 8 (text ≠ plain's) | – |"
    )


def test_measure_family_compares_each_run_with_its_dtypes_plain_text():
    pytest.importorskip("torch")
    bench = _module("bench_dtypes")
    texts = {
        "float32:plain": [1, 2, 3],
        "float32:k3": [1, 2, 3],
        "bfloat16:plain": [1, 2, 3],
        "bfloat16:k8": [1, 2, 4],
    }
    runs = {name: (lambda seed, text=text: (3, 0.3, 0.2, text)) for name, text in texts.items()}
    runs["llama.cpp:plain"] = lambda seed: (3, 0.1, 0.05, 5.0)
    figures = bench.measure_family(runs, repeats=2)
    assert figures["float32:k3"]["same_tokens_as_plain"] is True
    assert figures["bfloat16:k8"]["same_tokens_as_plain"] is False
    assert "same_tokens_as_plain" not in figures["llama.cpp:plain"]
    assert figures["float32:k3"]["tokens_per_s"]["median"] == pytest.approx(10.0)
