"""`exactspec engine certify` on the project's synthetic engine with a bug (`serve.synthetic_*`: a random Markov
model, V = 256, served in llama.cpp's `/completion` shape from its own process, each bug one mechanism engines ship),
at the standard profile (total false-fail rate 1e-4, anytime-valid; target mean per-token TV 0.05, power 1 - 1e-3 per
route), T = 0.7, max_tokens 16 (every position read), 4 candidate requests in flight and a serial share of 0.25, one
fixed seed key, at most 8,192 completions a prompt (budgets are completion counts, never seconds): each is NOT_EXACT
on the `lm-like` model and its diagnosis names where and what. The exact engines:
tests/test_engine_synthetic_certify.py."""

from __future__ import annotations

import pytest

pytest.importorskip("httpx")
pytest.importorskip("starlette")

from exactspec.conformance.engine.serve.synthetic_campaign import run_mode  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "mode", ["resample-from-p", "shared-uniform", "late-temp-1.3", "spread-per-prefix"]
)
def test_a_bug_is_not_exact(mode):
    result = run_mode(mode, "lm-like", max_per_prompt=8192)
    assert result.verdict == "NOT_EXACT", result.reasons
    diagnosis = result.extra["diagnosis"]
    # T x 1.3 from position 7: found there, named, fitted there (T ~ 0.91)
    if mode == "late-temp-1.3":
        assert diagnosis["where"]["first"] >= 7 and min(diagnosis["fitted_positions"]) >= 7, (
            diagnosis["where"]
        )
        assert diagnosis["mechanism"]["family"] == "temperature", diagnosis["mechanism"]
        assert 0.7 / 1.3 < diagnosis["fits"][0]["value"] < 1.0, diagnosis["fits"][0]


def test_a_bug_that_shows_only_under_load_is_not_exact_and_named_on_the_loaded_seeds():
    """Temperature x 1.15 only while another request is in flight at the server: the loaded seeds carry the
    evidence, and the load the certificate states was measured (most loaded requests had company)."""
    result = run_mode("load-temp-1.15", "lm-like", max_per_prompt=8192)
    assert result.verdict == "NOT_EXACT", result.reasons
    # the check with the most evidence split by load holds more of it on the loaded seeds than on the serial ones
    # (which check fails first, and whether the pooled stream beats the loaded one, depends on how the server's
    # requests overlapped: a CI run at 09bd1b6 failed on the pooled stream)
    split = [
        r.result.details["log_e_by_load"]
        for r in result.counted
        if {"serial", "loaded"} <= set(r.result.details.get("log_e_by_load") or {})
    ]
    strongest = max(split, key=lambda logs: max(logs.values()))
    assert strongest["loaded"] > strongest["serial"], strongest
    assert "loaded" in result.extra["engine"]["load"]["text"]
    # the diagnosis names the load: hotter loaded than serial
    load = result.extra["diagnosis"]["load"]
    assert load["depends"] and load["loaded"]["value"] < load["serial"]["value"], load
