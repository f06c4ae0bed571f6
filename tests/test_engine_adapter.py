"""`exactspec engine certify --engine-adapter`: an in-process engine (the toy Markov engine of
`serve.toy_adapter`) certified with no HTTP, with the same rounds, certificate and exit codes.

Statistical figures: the engine level's total false-fail rate at the quick profile is 1e-3 (anytime-valid); the toy's
residual-from-p bug has a mean per-token TV far above the standard target 0.05 and is rejected by the standard
profile's context and law e-processes (simulated power 50/50 at TV 0.14, benchmarks/results/engine_sequential.json).
Seeds are drawn by a fixed --seed-key, so each run is reproducible."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("httpx")

from exactspec.cli import main as exactspec_main  # noqa: E402
from exactspec.conformance.engine.backend import Sampling, load_backend, parse_options  # noqa: E402
from exactspec.conformance.engine.collect.inprocess_client import checked_report  # noqa: E402

TOY = "exactspec.conformance.engine.serve.toy_adapter:ToyEngine"
KEY = "5eed0000000000000000000000000001"


class HalfAdapter:
    """An adapter that cannot report."""

    def __init__(self, role: str) -> None:
        self.role = role

    def complete(self, prompt_ids, seed, sampling, max_tokens):
        raise AssertionError("never called")


def _certify(tmp_path, name: str, *extra: str, profile: str = "quick") -> tuple[int, dict]:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        '{"prompt_id": "a", "prompt_tokens": [1, 2]}\n{"prompt_id": "b", "prompt_tokens": [5]}\n'
    )
    out = tmp_path / name
    code = exactspec_main(
        [
            "engine",
            "certify",
            "--engine-adapter",
            TOY,
            "--prompts",
            str(prompts),
            "--out",
            str(out),
            "--temperature",
            "0.7",
            "--max-tokens",
            "6",
            "--profile",
            profile,
            "--seed-key",
            KEY,
            "--max-per-prompt",
            "512",
            *extra,
        ]
    )
    doc = (
        json.loads((out / "certificate.json").read_text())
        if (out / "certificate.json").exists()
        else {}
    )
    return code, doc


def test_the_exact_rule_in_process_is_qualified_by_the_monotone_law_route_even_declared_coupled(
    tmp_path,
):
    """The standard rule is exact but not seed-coupled with plain sampling: declared coupled, the coupling route
    finds mismatches, which disprove only the coupling. The toy's continuations are open (prefixes rarely repeat), so
    no route bounds deviations of any shape: the monotone law route reaches the target, QUALIFIED (exit 5), and
    nothing fails."""
    code, doc = _certify(tmp_path, "standard", "--expect-seed-coupled")
    assert code == 5 and doc["verdict"] == "QUALIFIED", doc.get("reasons")
    assert all(record["passed"] for record in doc["checks"])
    per_prompt = doc["engine"]["ruled_out"]["per_prompt"]
    assert all(
        entry["best"]["route"] == "law_monotone"
        and entry["reached"]
        and not entry["any_shape_reached"]
        for entry in per_prompt.values()
    )
    assert doc["engine"]["speculation_evidence"]["observed"]


def test_a_sampler_match_engine_in_process_is_certified_by_coupling(tmp_path):
    code, doc = _certify(
        tmp_path, "match", "--adapter-option", "rule=sampler_match", "--expect-seed-coupled"
    )
    assert code == 0 and doc["verdict"] == "CERTIFIED", doc.get("reasons")
    per_prompt = doc["engine"]["ruled_out"]["per_prompt"]
    assert all(entry["best_any_shape"]["route"] == "coupling" for entry in per_prompt.values())


def test_the_residual_from_p_bug_in_process_is_not_exact(tmp_path):
    code, doc = _certify(
        tmp_path, "bug", "--adapter-option", "rule=residual_from_p", profile="standard"
    )
    assert code == 1 and doc["verdict"] == "NOT_EXACT", doc.get("reasons")
    failed = {record["check"] for record in doc["checks"] if not record["passed"]}
    assert failed & {"context_law", "law_drift"}, failed


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--engine-adapter", "no_such_module_x:Engine"], "cannot import 'no_such_module_x'"),
        (
            ["--engine-adapter", "exactspec.conformance.engine.serve.toy_adapter:Nope"],
            "has no 'Nope'",
        ),
        (["--engine-adapter", "no-colon"], "is not module:Class"),
        (["--engine-adapter", TOY, "--reference-url", "http://127.0.0.1:9"], "not both"),
        (["--engine-adapter", TOY, "--adapter-option", "rule"], "is not key=value"),
        (["--engine-adapter", TOY, "--adapter-option", "rule=nope"], "rule: 'nope' must be one of"),
        (
            ["--engine-adapter", TOY, "--dialect", "vllm"],
            "--engine-adapter: selects the python dialect",
        ),
        (
            ["--engine-adapter", TOY, "--tokenizer", "x.json"],
            "--tokenizer: only with --dialect openai",
        ),
        (
            [
                "--adapter-option",
                "rule=standard",
                "--reference-url",
                "http://127.0.0.1:9",
                "--candidate-url",
                "http://127.0.0.1:9",
            ],
            "--adapter-option: only with --engine-adapter",
        ),
    ],
)
def test_bad_adapter_arguments_are_usage_errors_naming_the_argument(
    tmp_path, capsys, extra, message
):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt_id": "a", "prompt_tokens": [1]}\n')
    code = exactspec_main(
        [
            "engine",
            "certify",
            "--prompts",
            str(prompts),
            "--out",
            str(tmp_path / "o"),
            "--temperature",
            "0.7",
            *extra,
        ]
    )
    assert code == 2
    assert message in capsys.readouterr().err


def test_an_adapters_report_is_checked_before_it_is_used():
    assert checked_report([(3, 0.2), (1, 0.5)], 5, "p") == [[1, 0.5], [3, 0.2]]
    for bad, message in [
        ([(1, 0.7), (2, 0.6)], "sum to at most 1"),
        ([(1, 1.5)], r"in \[0, 1\]"),
        ([(1, 0.2), (1, 0.1)], "listed twice"),
        ([], "0 pairs"),
        ([(1, 0.1)] * 6, "6 pairs"),
        (["x"], "pairs"),
    ]:
        with pytest.raises(ValueError, match=message):
            checked_report(bad, 5, "position 2")


def test_an_adapter_is_built_once_per_role_and_must_have_both_methods():
    first = load_backend(TOY, "candidate", {"rule": "standard"})
    assert load_backend(TOY, "candidate", {"rule": "standard"}) is first
    assert load_backend(TOY, "reference", {"rule": "standard"}) is not first
    with pytest.raises(ValueError, match="role"):
        load_backend(TOY, "judge")
    with pytest.raises(ValueError, match="HalfAdapter has no report method"):
        load_backend("tests.test_engine_adapter:HalfAdapter", "reference")
    assert parse_options(["a=1", "b=x=y"]) == {"a": "1", "b": "x=y"}
    assert Sampling().temperature == 1.0
