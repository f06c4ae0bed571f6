"""`exactspec generate` on the hidden --tiny model (a tiny random Llama): output, figures, argument errors."""

from __future__ import annotations

import argparse
import re

import pytest

from exactspec.cli import main as exactspec_main
from exactspec.gpu_impl.cli import cli


def _run(capsys, *argv):
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("draft", ["prompt-lookup", "self-int8", "early-exit:2", "early-exit"])
def test_generate_tiny_reports_figures(capsys, draft):
    code, out, err = _run(
        capsys,
        "hello there",
        "--tiny",
        "--draft",
        draft,
        "-k",
        "3",
        "--max-new-tokens",
        "12",
        "--temperature",
        "0.7",
        "--seed",
        "1",
    )
    assert code == 0, err
    assert len(out.rstrip("\n")) == 12  # the char tokenizer: one character per token, no EOS
    assert "acceptance alpha:" in err and "per position:" in err
    assert "tokens per target call:" in err and "tokens/s" in err


def test_generate_tiny_greedy_matches_plain(capsys):
    code, out, err = _run(
        capsys,
        "abc abc abc",
        "--tiny",
        "--draft",
        "self-int8",
        "--temperature",
        "0",
        "--max-new-tokens",
        "10",
        "--compare-plain",
    )
    assert code == 0, err
    assert "plain decoding:" in err and "speedup" in err
    assert "(median of 3 interleaved pairs, " in err  # one ~1 s pair is too noisy to print alone
    assert "greedy outputs identical to plain decoding: yes" in err
    code2, out2, _ = _run(
        capsys,
        "abc abc abc",
        "--tiny",
        "--draft",
        "none",
        "--temperature",
        "0",
        "--max-new-tokens",
        "10",
    )
    assert code2 == 0 and out2 == out


def test_generate_tiny_sampled_lookup_matches_plain(capsys):
    """At T > 0 a prompt-lookup draft is verified on plain decoding's stream: the same tokens for the same seed."""
    code, _, err = _run(
        capsys,
        "abc abc abc",
        "--tiny",
        "--draft",
        "prompt-lookup",
        "--temperature",
        "0.8",
        "--max-new-tokens",
        "16",
        "--seed",
        "3",
        "--compare-plain",
    )
    assert code == 0, err
    assert (
        "sampled outputs (a deterministic draft, verified on plain decoding's random stream) identical to plain "
        "decoding: yes" in err
    )


def test_generate_tiny_is_reproducible_and_no_stream(capsys):
    # a seed fixes the tokens only under a k schedule that does not follow the timers
    args = [
        "xyz",
        "--tiny",
        "--draft",
        "prompt-lookup",
        "--max-new-tokens",
        "8",
        "--seed",
        "5",
        "--k-policy",
        "fixed",
    ]
    _, first, _ = _run(capsys, *args)
    _, second, _ = _run(capsys, *args, "--no-stream")
    assert first == second


@pytest.mark.parametrize("policy", ["cost", "grow-shrink"])
def test_k_policies_keep_greedy_output(capsys, policy):
    code, out, err = _run(
        capsys,
        "abc abc abc",
        "--tiny",
        "--temperature",
        "0",
        "--max-new-tokens",
        "12",
        "--k-policy",
        policy,
        "--compare-plain",
    )
    assert code == 0, err
    assert "greedy outputs identical to plain decoding: yes" in err
    assert ("cost calibration" in err) == (policy == "cost")
    assert re.search(
        rf"fixed k = \d+: speedup [\d.]+x over plain \(median of 3\); --k-policy {policy}: [\d.]+x, [\d.]+ of fixed k's",
        err,
    )


def test_dispatcher_runs_generate(capsys):
    code = exactspec_main(["generate", "hi", "--tiny", "--draft", "none", "--max-new-tokens", "4"])
    out = capsys.readouterr().out
    assert code == 0 and len(out.rstrip("\n")) == 4


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--draft", "bogus"], "--draft must be one of"),
        (["--draft", "early-exit:x"], "early-exit:N"),
        (["--draft", "model:"], "model:PATH"),
        (["-k", "0"], "integer >= 1"),
        (["--k-policy", "greedy"], "invalid choice"),
        (["--cpu-matmul", "fast"], "invalid choice"),
        (["--max-new-tokens", "-1"], "integer >= 0"),
        (["--temperature", "warm"], "expected a number"),
    ],
)
def test_bad_arguments_are_argparse_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["hi", "--tiny", *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--temperature", "-1"], "temperature must be >= 0"),
        (["--top-p", "1.5"], "top_p must be in (0, 1]"),
        (["--min-p", "2"], "min_p must be in [0, 1]"),
        (["--draft", "early-exit:9"], "1 <= N < 4"),
        (["--draft", "model:/nonexistent/model"], "does not exist"),
        (["--model", "/nonexistent/model"], "--tiny and --model"),
        (["--chat"], "no chat template"),
        (["--device", "nonsense-device"], "not usable"),
    ],
)
def test_bad_values_are_clear_errors(capsys, argv, message):
    code, _, err = _run(capsys, "hi", "--tiny", *argv)
    assert code == 2
    assert "exactspec generate: error:" in err and message in err


def test_model_path_errors_without_tiny(capsys):
    code, _, err = _run(capsys, "hi", "--model", "/nonexistent/model")
    assert code == 2 and "does not exist" in err


def test_model_draft_from_local_directory(tmp_path, capsys):
    from exactspec.gpu_impl.models import tiny_llama

    tiny_llama(vocab_size=64, hidden_size=32, n_layers=1, seed=9).save_pretrained(
        tmp_path / "draft"
    )
    code, out, err = _run(
        capsys, "hello", "--tiny", "--draft", f"model:{tmp_path / 'draft'}", "--max-new-tokens", "6"
    )
    assert code == 0, err
    assert "acceptance alpha:" in err
    tiny_llama(vocab_size=80, hidden_size=32, n_layers=1, seed=9).save_pretrained(
        tmp_path / "other"
    )
    code, _, err = _run(capsys, "hello", "--tiny", "--draft", f"model:{tmp_path / 'other'}")
    assert code == 2 and "vocab" in err


def test_parse_draft_forms():
    assert cli.parse_draft("early-exit:3") == cli.DraftSpec("early-exit", n_layers=3)
    assert cli.parse_draft("model:/a/b") == cli.DraftSpec("model", path="/a/b")
    assert cli.parse_draft("none").kind == "none"
    with pytest.raises(ValueError):
        cli.parse_draft("early-exit:0")
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    assert "Defaults" in parser.format_help()
