"""llama-cpp-python, a third real engine, certified in process (`serve.llama_cpp_adapter`) with its own Python
speculative decoding (``LlamaPromptLookupDecoding``), in its own cached venv (`serve.llama_cpp_python`).

The unit tests check the adapter's pieces that need no build: llama.cpp's chain order and the draft counting. The
``slow`` tests build the venv once (its sdist with cmake, several minutes; cached under ~/.cache/exactspec/) and run
`exactspec engine certify --engine-adapter` there on the embedded SmolLM2-135M at the quick profile (total false-fail
rate 1e-3, anytime-valid): at T = 0 the outputs must be equal token for token (8 tokens); at T = 0.7 one round
shows that the engine is not seed-coupled, and that no law check fails. The last one certifies its OpenAI server
(`serve.llama_cpp_python_server`, two processes on 127.0.0.1 stopped by PID) through the generic dialect: text
prompts, token strings, raw reports under top-k 40 and teacher forcing one token at a time.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from exactspec.conformance.engine.backend import Sampling
from exactspec.conformance.engine.serve.llama_cpp_adapter import _CountingDraft, chain_law

ADAPTER = "exactspec.conformance.engine.serve.llama_cpp_adapter:LlamaCppPython"
PROMPTS = Path(__file__).resolve().parents[1] / "examples" / "engine_chat_prompts.jsonl"
SEED_KEY = "11a3a000000000000000000000000001"  # fixed: the same random seeds every run


def test_the_chain_filters_before_the_temperature_as_llama_cpp_does():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    # top-p on the T = 1 law keeps 0.5 and 0.3
    law = chain_law(logits, Sampling(temperature=0.5, top_p=0.75))
    assert law[2] == law[3] == 0.0
    assert law[0] / law[1] == pytest.approx((0.5 / 0.3) ** 2)
    assert chain_law(logits, Sampling(temperature=0.0)).tolist() == [1.0, 0.0, 0.0, 0.0]
    assert chain_law(logits, Sampling(temperature=1.0, min_p=0.5)).tolist() == pytest.approx(
        [0.625, 0.375, 0, 0]
    )


def test_the_draft_counter_counts_what_the_completion_kept():
    draft = _CountingDraft(lambda ids: np.array([7, 8, 9]))
    draft(np.arange(5))  # prompt of 4 + 1 token: proposes positions 1..3 of the completion
    draft(np.arange(9))  # later: positions 5..7, beyond a completion of 6 tokens but 5
    assert draft.counts(4, [3, 7, 8, 1, 5, 7]) == (3 + 1, 2 + 1)


@pytest.fixture(scope="module")
def venv_exactspec() -> Path:
    from exactspec.conformance.engine.serve.llama_cpp_python import ensure_llama_cpp_python

    return ensure_llama_cpp_python().parent / "exactspec"


def _certify(exactspec: Path, out: Path, *extra: str) -> tuple[int, dict, str]:
    result = subprocess.run(
        [
            str(exactspec),
            "engine",
            "certify",
            "--engine-adapter",
            ADAPTER,
            "--prompts",
            str(PROMPTS),
            "--out",
            str(out),
            "--max-tokens",
            "8",
            "--profile",
            "quick",
            "--speculation-type",
            "prompt-lookup",
            "--time-limit-s",
            "900",
            "--seed-key",
            SEED_KEY,
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    doc = (
        json.loads((out / "certificate.json").read_text())
        if (out / "certificate.json").exists()
        else {}
    )
    return result.returncode, doc, result.stderr[-3000:]


@pytest.mark.slow
def test_llama_cpp_python_greedy_speculation_gives_the_plain_outputs(venv_exactspec, tmp_path):
    code, doc, err = _certify(venv_exactspec, tmp_path, "--temperature", "0")
    assert code == 0 and doc["verdict"] == "CERTIFIED", err
    assert doc["engine"]["speculation_evidence"]["observed"], "prompt lookup drafted nothing"


@pytest.mark.slow
def test_llama_cpp_python_sampled_speculation_is_not_seed_coupled_and_passes_the_law_checks(
    venv_exactspec, tmp_path
):
    """Declared seed-coupled, its sampled speculation mismatches plain decoding at some seeds (its drafts are
    evaluated in one batch, and ggml's CPU kernels are not batch-invariant): the coupling is disproved, never
    exactness, and no check fails. One round (32 completions a prompt): INCONCLUSIVE short of the target, or
    QUALIFIED (the monotone route reaches the quick target; no any-shape route can at 32 completions)."""
    code, doc, err = _certify(
        venv_exactspec,
        tmp_path,
        "--temperature",
        "0.7",
        "--expect-seed-coupled",
        "--max-per-prompt",
        "32",
    )
    assert (code, doc["verdict"]) in ((4, "INCONCLUSIVE"), (5, "QUALIFIED")), err
    assert not [check for check in doc["checks"] if not check["passed"]]
    assert any("declared seed coupling is disproved" in note for note in doc["notes"]), doc["notes"]


@pytest.mark.slow
def test_llama_cpp_python_server_through_the_generic_dialect(venv_exactspec, tmp_path):
    """One round (32 completions a prompt) at T = 0.7, top-k 40: the reports are the sampled law (the law route runs),
    decode-time and teacher-forced reports agree (the premise holds), no check fails; INCONCLUSIVE short of the
    target, or QUALIFIED."""
    import shlex
    import sys

    from exactspec.conformance.engine.serve.command import certify_command, servers

    reference, candidate = servers("llama-cpp-python", "ngram", logs=str(tmp_path / "logs"))
    with reference, candidate:
        command = certify_command("llama-cpp-python", "ngram", "greedy", reference, candidate)
        exactspec = Path(sys.executable).parent / "exactspec"
        result = subprocess.run(
            [
                str(exactspec),
                *command[1:],
                "--prompts",
                str(PROMPTS),
                "--out",
                str(tmp_path / "c"),
                "--profile",
                "quick",
                "--temperature",
                "0.7",
                "--top-k",
                "40",
                "--teacher-n-probs",
                "40",
                "--max-tokens",
                "8",
                "--max-per-prompt",
                "32",
                "--seed-key",
                SEED_KEY,
                "--time-limit-s",
                "900",
            ],
            capture_output=True,
            text=True,
            timeout=1200,
        )
    doc = json.loads((tmp_path / "c" / "certificate.json").read_text())
    assert (result.returncode, doc["verdict"]) in ((4, "INCONCLUSIVE"), (5, "QUALIFIED")), (
        shlex.join(command) + result.stderr[-3000:]
    )
    assert not [check for check in doc["checks"] if not check["passed"]]
    assert not [r for r in doc["reasons"] if "premise" in r or "void" in r], doc["reasons"]
    assert {check["check"] for check in doc["checks"]} >= {"law_drift", "context_law"}, (
        "the law route did not run"
    )
