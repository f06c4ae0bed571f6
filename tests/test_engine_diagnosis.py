"""The diagnosis of a NOT_EXACT engine certificate (`conformance.engine.diagnosis`), on the toy sample files of
`test_engine_offline` (V = 6, top-4 reports, T = 1, 5 tokens): each mechanism the families name is the best fit
of a candidate built with it, its parameter inside the fitted interval; the localisation finds a late bug's first
position; a CERTIFIED carries no diagnosis, and the diagnosis never changes a verdict."""

from __future__ import annotations

import json

import numpy as np
import pytest
from exactspec.conformance.engine.checks import prompts
from exactspec.conformance.engine.diagnosis import diagnose
from exactspec.conformance.engine.diagnosis.families import (
    FAMILIES,
    family_named,
    fit,
    log_likelihood,
)
from exactspec.conformance.engine.diagnosis.tokens import TokenTable, token_tables
from exactspec.conformance.engine.samples import read_samples

from tests.test_engine_offline import (
    MAX_TOKENS,
    QUICK_LOOSE,
    base_law,
    certify,
    make_files,
    truncated,
)


def tempered(law, theta: float, from_position: int = 2):
    """`law` raised to `theta` (renormalised) at positions >= `from_position`: the wrong temperature there."""

    def warped(pid, prefix):
        row = law(pid, prefix)
        if len(prefix) + 1 < from_position:
            return row
        powered = np.where(row > 0, row, 0.0) ** theta
        return powered / powered.sum()

    return warped


def stale(law, eps: float):
    """`law` whose token comes, with probability eps, from the previous position's law (a row not advanced)."""

    def warped(pid, prefix):
        row = law(pid, prefix)
        return row if not prefix else (1 - eps) * row + eps * law(pid, prefix[:-1])

    return warped


def _diagnosis(tmp_path, candidate_law, n=1000, **kwargs):
    ref, cand = make_files(tmp_path, candidate_law, n=n, **kwargs)
    parts = prompts(read_samples(ref), read_samples(cand))
    return diagnose(parts, MAX_TOKENS, 1.0), certify(ref, cand)


@pytest.mark.parametrize("theta", [0.7, 1.5])
def test_a_wrong_temperature_is_named_with_its_factor_inside_the_interval(tmp_path, theta):
    diagnosis, result = _diagnosis(tmp_path, tempered(base_law, theta))
    best = diagnosis["fits"][0]
    assert diagnosis["mechanism"]["family"] == "temperature", diagnosis["mechanism"]
    assert best["interval"][0] <= theta <= best["interval"][1], best
    assert "T ~" in diagnosis["mechanism"]["text"]
    assert (
        result.verdict == "NOT_EXACT"
        and result.extra["diagnosis"]["mechanism"]["family"] == "temperature"
    )


def test_a_row_not_advanced_is_named_stale_row(tmp_path):
    diagnosis, _ = _diagnosis(tmp_path, stale(base_law, 0.4))
    assert diagnosis["mechanism"]["family"] == "stale-row", diagnosis["fits"][:2]
    best = diagnosis["fits"][0]
    assert best["interval"][0] <= 0.4 <= best["interval"][1]


def test_truncation_on_one_side_is_named_top_k(tmp_path):
    diagnosis, _ = _diagnosis(tmp_path, truncated(base_law, 2))
    assert diagnosis["mechanism"]["family"] == "top-k", diagnosis["fits"][:2]
    assert diagnosis["fits"][0]["value"] == 2


def test_a_late_bug_is_localised_to_its_first_position(tmp_path):
    diagnosis, _ = _diagnosis(tmp_path, tempered(base_law, 0.5, from_position=4))
    assert diagnosis["where"]["first"] == 4, [
        (e["position"], e["candidate"].get("best")) for e in diagnosis["by_position"]
    ]
    early = [e for e in diagnosis["by_position"] if e["position"] < 4]
    assert all(
        e["candidate"]["best"]["gain_nats"] < diagnosis["where"]["threshold_nats"] for e in early
    )
    # fitted where it lives, not diluted by the exact positions
    assert min(diagnosis["fitted_positions"]) == 4
    best = diagnosis["fits"][0]
    assert best["family"] == "temperature" and abs(best["value"] - 0.5) < 0.1, best


def test_the_reference_control_fits_exact_and_an_exact_candidate_names_nothing(tmp_path):
    diagnosis, result = _diagnosis(tmp_path, base_law)
    assert (
        diagnosis["mechanism"]["family"] is None
        and "none of the named families" in diagnosis["mechanism"]["text"]
    )
    for f in diagnosis["fits"]:
        assert (
            f["reference"]["interval"][0]
            <= f["reference"]["exact"]
            <= f["reference"]["interval"][1]
        ), f
    # no diagnosis noise on a pass
    assert result.verdict != "NOT_EXACT" and "diagnosis" not in result.extra


def test_every_family_is_exact_at_its_exact_value(tmp_path):
    ref, cand = make_files(tmp_path, base_law, n=50)
    table, _ = token_tables(prompts(read_samples(ref), read_samples(cand)), MAX_TOKENS)
    reported = np.where(table.listed, table.probs, 0.0)
    reported /= reported.sum(axis=1, keepdims=True)
    for family in FAMILIES:
        law = family.law(table, family.exact(table))
        assert np.allclose(law, reported), family.name
        assert fit(family, table).tokens == table.size
    with pytest.raises(ValueError, match="no deviation family 'nope'"):
        family_named("nope")


def test_the_certificate_shows_the_diagnosis_and_the_verdict_does_not_depend_on_it(
    tmp_path, monkeypatch
):
    from exactspec.conformance.engine import engine_level as level
    from exactspec.conformance.engine.certificate import write_engine_report

    ref, cand = make_files(tmp_path, tempered(base_law, 0.6), n=600)
    result = certify(ref, cand)
    write_engine_report(result, tmp_path / "cert")
    markdown = (tmp_path / "cert" / "CERTIFICATE.md").read_text()
    assert "## Diagnosis" in markdown and "**Mechanism:** temperature" in markdown
    assert json.loads((tmp_path / "cert" / "certificate.json").read_text())["diagnosis"][
        "mechanism"
    ]["family"]
    # the pictures, linked from the Markdown
    for picture in (
        "diagnosis_prefix.png",
        "diagnosis_positions.png",
    ):
        assert (tmp_path / "cert" / picture).stat().st_size > 1000 and f"]({picture})" in markdown
    calls = []
    monkeypatch.setattr(
        level, "diagnose", lambda *a: calls.append(a) or {"mechanism": {"family": "x", "text": "x"}}
    )
    again = certify(ref, cand, QUICK_LOOSE)
    assert calls and again.verdict == result.verdict and again.reasons == result.reasons
    assert again.extra["diagnosis"]["mechanism"]["family"] == "x"


def test_explain_rediagnoses_a_certificate_folder_from_its_files_gzipped_or_not(tmp_path, capsys):
    import gzip
    import shutil

    from exactspec.cli import main as exactspec

    ref, cand = make_files(tmp_path, tempered(base_law, 0.6), n=600)
    folder = tmp_path / "cert"
    folder.mkdir()
    with open(ref, "rb") as source, gzip.open(folder / "reference.jsonl.gz", "wb") as target:
        shutil.copyfileobj(source, target)
    shutil.copyfile(cand, folder / "candidate.jsonl")
    assert exactspec(["engine", "explain", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "no certificate.json" in out and "**Mechanism:** temperature" in out and "T ~" in out
    assert exactspec(["engine", "explain", str(folder), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mechanism"]["family"] == "temperature"
    (folder / "candidate.jsonl").unlink()
    assert exactspec(["engine", "explain", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no candidate.jsonl" in err[0]


def test_tokens_outside_the_reported_support_name_a_truncation_skipped_on_one_side(tmp_path):
    """The reference samples top-3 (its post-sampling reports list 3 tokens and a zero tail); the candidate skips the
    truncation: its tokens outside the support name the mechanism, the reference's own show none."""
    ref, cand = make_files(tmp_path, base_law, n=300, top_k=3)
    parts = prompts(read_samples(ref), read_samples(cand))
    diagnosis = diagnose(parts, MAX_TOKENS, 1.0)
    assert (
        diagnosis["outside_tokens"] > 10 and diagnosis["mechanism"]["family"] == "outside-support"
    )
    assert "none of the reference's own" in diagnosis["mechanism"]["text"]


def test_a_greedy_divergence_is_named_from_its_hard_check(tmp_path):
    from tests.test_engine_offline import _diverge_at_seed_23

    result = certify(*make_files(tmp_path, n=20, greedy=True, mutate=_diverge_at_seed_23))
    assert result.verdict == "NOT_EXACT"
    mechanism = result.extra["diagnosis"]["mechanism"]
    assert mechanism["family"] == "greedy-divergence" and "greedy_equality" in mechanism["text"], (
        mechanism
    )


def test_explain_needs_no_extra_and_a_subcommand_whose_extra_is_missing_says_what_to_install(
    monkeypatch, capsys
):
    """On the base install (no httpx) `engine certify` says which package it needs; `engine explain` still runs."""
    import argparse
    import importlib

    from exactspec.conformance.engine import cli

    real = importlib.import_module

    def without_httpx(name, package=None):
        if name in (".collect.engine_certify", ".serve.command", ".collect.engine_collect"):
            raise ModuleNotFoundError("No module named 'httpx'", name="httpx")
        return real(name, package)

    monkeypatch.setattr(cli.importlib, "import_module", without_httpx)
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    # unavailable here
    assert cli.run(parser.parse_args(["certify", "--prompts", "p.jsonl", "--out", "o"])) == 6
    assert "needs a missing package" in capsys.readouterr().err
    assert cli.run(parser.parse_args(["explain", "/no/such/folder"])) == 2
    assert "CERT_DIR" in capsys.readouterr().err


def test_a_diagnosis_that_fails_is_stated_and_the_verdict_stands(tmp_path, monkeypatch):
    from exactspec.conformance.engine import engine_level as level

    def broken(*args):
        raise RuntimeError("boom")

    ref, cand = make_files(tmp_path, tempered(base_law, 0.6), n=300)
    monkeypatch.setattr(level, "diagnose", broken)
    result = certify(ref, cand)
    assert result.verdict == "NOT_EXACT"
    assert (
        "could not be made (RuntimeError: boom)" in result.extra["diagnosis"]["mechanism"]["text"]
    )


def random_table(rng: np.random.Generator, n: int = 80, width: int = 6) -> TokenTable:
    """A table of n rows with 2..width listed categories each (descending masses, some 0, a tail), a shorter
    prefix's report at some rows and the draft's q (post-sampling and raw) at others: every branch of the laws."""
    listed = np.arange(width)[None, :] < rng.integers(2, width + 1, size=n)[:, None]
    masses = -np.sort(-rng.dirichlet(np.ones(width + 1), size=n)[:, :width], axis=1)
    masses[rng.random((n, width)) < 0.1] = 0.0
    probs = np.where(listed, masses, 0.0)
    ids = np.where(listed, rng.permuted(np.tile(np.arange(width), (n, 1)), axis=1), -1)
    category = np.array([rng.integers(0, row.sum()) for row in listed])

    def masses_at(rate: float) -> np.ndarray:
        return np.where(listed & (rng.random((n, width)) > rate), rng.random((n, width)), 0.0)

    return TokenTable(
        probs,
        ids,
        listed,
        masses_at(0.3),
        rng.random(n) < 0.7,
        category,
        rng.integers(1, 6, size=n),
        rng.integers(0, 3, size=n),
        np.array(["p0"] * n, dtype=object),
        np.array([""] * n, dtype=object),
        [("p0", (i,)) for i in range(n)],
        category,
        0,
        masses_at(0.2),
        rng.random(n) < 0.8,
        masses_at(0.2),
    )


def test_every_grid_evaluator_equals_its_law_at_each_value():
    """A family's fast grid evaluator (what `fit` reads) is its law's log-likelihood at every grid value."""
    rng = np.random.default_rng(20261207)
    fast = [family for family in FAMILIES if family.grid_log_likelihoods is not None]
    assert {"top-k", "shared-uniform", "stale-row"} <= {f.name for f in fast}
    for table in (random_table(rng), random_table(rng, n=1, width=3)):
        for family in fast:
            grid = np.append(family.grid(table), family.exact(table))
            slow = [log_likelihood(table, family.law(table, float(v))) for v in grid]
            assert np.allclose(family.grid_log_likelihoods(table, grid), slow, rtol=1e-9), (
                family.name
            )


def test_a_hard_check_is_named_first_with_the_law_fit_beside_it(tmp_path):
    """Two bugs in one run (llama.cpp's speculative example: tokens past EOS, and greedy drafts accepted as if
    sampled): the failed hard check names its mechanism, and a family that fits the listed tokens is stated beside
    it; with an exact law nothing is added."""
    failed = [
        {
            "case": "p0",
            "check": "tokens_past_end",
            "message": "position 3: token 5 is followed by 1",
        }
    ]
    for folder, law, also in (
        ("hot", tempered(base_law, 0.6), "temperature"),
        ("exact", base_law, None),
    ):
        (tmp_path / folder).mkdir()
        ref, cand = make_files(tmp_path / folder, law, n=600)
        mechanism = diagnose(
            prompts(read_samples(ref), read_samples(cand)), MAX_TOKENS, 1.0, failed
        )["mechanism"]
        assert mechanism["family"] == "tokens-past-end", mechanism
        assert mechanism.get("also", {}).get("family") == also, mechanism
        assert ("At the listed tokens: temperature" in mechanism["text"]) == (also is not None)
