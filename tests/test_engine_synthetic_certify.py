"""`exactspec engine certify` on the project's synthetic engine (`serve.synthetic_*`: a random Markov model, V = 256,
served in llama.cpp's `/completion` shape from its own process, plain and speculative modes, each bug one mechanism
engines ship), at the standard profile (total false-fail rate 1e-4, anytime-valid; target mean per-token TV 0.05,
power 1 - 1e-3 per route), T = 0.7, max_tokens 16 (every position read), 4 candidate requests in flight and a serial
share of 0.25, one fixed seed key. Budgets are completion counts, never seconds.

Which shapes these runs cover: on the `lm-like` model (about 0.5 nats a token: deviations visible, prefixes repeat
early in a completion only) a bug is NOT_EXACT and an exact engine is never NOT_EXACT (QUALIFIED: the any-shape bound
needs more completions than the budget); on the `code-like` model (about 0.05 nats a token: continuations repeat) an
exact engine that is not seed-coupled is CERTIFIED for deviations of any shape. The full table of modes and the
measured deviations: benchmarks/synthetic_certificates.py, benchmarks/synthetic_deviation_table.py. The engines with a bug:
tests/test_engine_synthetic_bugs.py (its own file, so that two test workers share the load)."""

from __future__ import annotations

import pytest

pytest.importorskip("httpx")
pytest.importorskip("starlette")

from exactspec.conformance.engine.serve.synthetic_campaign import run_mode  # noqa: E402

pytestmark = pytest.mark.slow


def test_an_exact_engine_whose_continuations_repeat_is_certified_for_any_shape():
    result = run_mode("exact", "code-like", max_per_prompt=6000)
    assert result.verdict == "CERTIFIED", result.reasons
    for entry in result.extra["engine"]["ruled_out"]["per_prompt"].values():
        # not seed-coupled
        assert entry["any_shape_reached"] and entry["best_any_shape"]["route"] == "law_any"


def test_an_exact_engine_on_open_continuations_is_never_not_exact():
    result = run_mode("exact-alt-order", "lm-like", max_per_prompt=512)
    assert result.verdict in ("QUALIFIED", "INCONCLUSIVE") and not [
        r for r in result.counted if not r.passed
    ]


def test_a_seed_coupled_engine_is_certified_by_coupling_without_teacher_forcing(tmp_path):
    """Declared and held seed coupling: no round teacher-forces (the coupling route needs no report), the law
    checks do not run, and the certificate says that the coupling route decided."""
    result = run_mode("sampler-match", "lm-like", max_per_prompt=1024, out=tmp_path)
    assert result.verdict == "CERTIFIED", result.reasons
    assert not any(r["forced"] for r in result.extra["campaign"]["history"])
    assert "prefix_probs" not in (tmp_path / "reference.jsonl").read_text()
    assert all(
        entry["best_any_shape"]["route"] == "coupling"
        for entry in result.extra["engine"]["ruled_out"]["per_prompt"].values()
    )
    assert any("the law checks did not run" in note for note in result.notes)


def test_a_declared_coupling_that_does_not_hold_resumes_teacher_forcing_and_is_never_not_exact(
    tmp_path,
):
    """Exact but not seed-coupled, declared coupled: round 1 does not force, a seed mismatches, the next round
    teacher-forces every prefix sampled so far, and the law checks decide (never NOT_EXACT for an exact engine)."""
    result = run_mode(
        "exact-uncoupled", "lm-like", max_per_prompt=128, out=tmp_path, declared_coupled=True
    )
    history = result.extra["campaign"]["history"]
    assert not history[0]["forced"] and all(r["forced"] for r in history[1:]) and len(history) >= 2
    assert result.verdict in ("QUALIFIED", "INCONCLUSIVE") and not [
        r for r in result.counted if not r.passed
    ]
    assert any("declared seed coupling is disproved" in note for note in result.notes)
    assert not any("the law checks did not run" in reason for reason in result.reasons)
