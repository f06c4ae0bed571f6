"""Bad invocations of the engine commands, as a new user makes them in the first minute: each gives ONE line on
stderr naming what to fix and its documented exit code (`exactspec.outcomes.ExitCode`), never a traceback or
"internal error", in every dialect (llama.cpp, vllm, openai, an in-process engine) and prompt form (token ids, text,
chat messages):

* a URL where nothing listens (a 127.0.0.1 port bound and closed here): found by the probe before any sampling,
  exit 6 naming the role, the URL and the flag to fix; an in-process engine that cannot be built: exit 6 naming it;
* an engine that answers every request with an error (a small fake started here): exit 6 naming the endpoint and
  the engine's own message;
* a bad prompts file, a bad sampling value, a missing argument: exit 2 naming the file and line, or the flag.
"""

from __future__ import annotations

import json
import socket

import pytest

pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from exactspec.cli import main as exactspec_main  # noqa: E402
from tests.test_engine_collect import FakeLlama, serve  # noqa: E402

DIALECTS = ("llama.cpp", "vllm", "openai", "python")
FORMS = {
    "ids": {"prompt_tokens": [1, 2, 3]},
    "text": {"text": "Name a river."},
    "messages": {"messages": [{"role": "user", "content": "Name a river."}]},
}
ENGINE_MESSAGE = "the model is not loaded"
TEMPLATE = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}<assistant>"


class Unreachable:
    """An in-process engine whose model server is not there: building it fails."""

    def __init__(self, role: str) -> None:
        raise ConnectionError("cannot reach the model server at http://127.0.0.1:9")


class Failing:
    """An in-process engine that is built, then fails every call."""

    def __init__(self, role: str) -> None:
        self.role = role

    def _fail(self, *args: object) -> list:
        raise RuntimeError(ENGINE_MESSAGE)

    complete = report = tokenize = chat_tokenize = _fail


class ErrorServer:
    """An engine that answers every path with HTTP 500 and its reason, in the shape OpenAI-style servers use."""

    def __init__(self) -> None:
        self.app = Starlette(routes=[Route("/{path:path}", self.fail, methods=["GET", "POST"])])

    async def fail(self, request: Request) -> JSONResponse:
        return JSONResponse({"error": {"message": ENGINE_MESSAGE}}, status_code=500)


@pytest.fixture
def free_url() -> str:
    """A 127.0.0.1 URL where nothing listens (the port bound, then closed)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


def _tokenizer_dir(tmp_path) -> str:
    """A model directory with a tokenizer and a chat template (the openai dialect's `messages` need one)."""
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    vocab = {chr(ord("a") + i): i for i in range(26)}
    (folder / "tokenizer.json").write_text(
        json.dumps({"model": {"type": "BPE", "vocab": vocab}, "added_tokens": []})
    )
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": TEMPLATE}))
    return str(folder)


def _run(tmp_path, command: str, dialect: str, form: str, url: str, adapter: str) -> int:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"prompt_id": "p", **FORMS[form]}) + "\n")
    out = (
        ["--out", str(tmp_path / "out")]
        if command == "certify"
        else ["--out-dir", str(tmp_path / "out")]
    )
    if dialect == "python":
        where = ["--engine-adapter", f"tests.test_engine_user_errors:{adapter}"]
    else:
        where = ["--dialect", dialect, "--reference-url", url, "--candidate-url", url]
        where += ["--tokenizer", _tokenizer_dir(tmp_path)] if dialect == "openai" else []
    return exactspec_main(
        [
            "engine",
            command,
            "--prompts",
            str(prompts),
            *out,
            "--temperature",
            "0.7",
            "--retries",
            "1",
            *where,
        ]
    )


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err and "internal error" not in err, err
    return err


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("command", ["certify", "collect"])
def test_an_unreachable_engine_is_named_at_once_with_exit_6(
    tmp_path, capsys, free_url, command, dialect, form
):
    code = _run(tmp_path, command, dialect, form, free_url, "Unreachable")
    line = _one_line(capsys)
    assert code == 6, line
    if dialect == "python":
        assert line == (
            f"exactspec engine {command}: --engine-adapter tests.test_engine_user_errors:Unreachable: "
            "building the reference raised ConnectionError: cannot reach the model server at "
            "http://127.0.0.1:9"
        )
    else:
        assert line.startswith(
            f"exactspec engine {command}: the reference: nothing answers at {free_url} ("
        ), line
        assert line.endswith("start the engine there, or fix --reference-url"), line
    assert not list((tmp_path / "out").glob("*.jsonl")), "nothing sampled"


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_an_engine_that_answers_with_errors_is_named_with_its_message_and_exit_6(
    tmp_path, capsys, dialect, form
):
    with serve(ErrorServer()) as url:
        code = _run(tmp_path, "certify", dialect, form, url, "Failing")
    line = _one_line(capsys)
    assert code == 6 and ENGINE_MESSAGE in line, line
    assert dialect == "python" or f"{url}/" in line and "answered HTTP 500" in line, line
    assert not (tmp_path / "out" / "certificate.json").exists()


@pytest.fixture
def prompts_file(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt_id": "a", "prompt_tokens": [1, 2]}\n')
    return path


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--temperature", "-1"], "--temperature: must be >= 0 (got -1)"),
        (["--temperature", "0.7", "--top-p", "0"], "--top-p: must be in (0, 1] (got 0)"),
        (["--temperature", "0.7", "--top-p", "1.5"], "--top-p: must be in (0, 1] (got 1.5)"),
        (["--temperature", "0.7", "--min-p", "1"], "--min-p: must be in [0, 1) (got 1)"),
        (["--temperature", "0.7", "--top-k", "-1"], "--top-k: must be >= 0 (0: off) (got -1)"),
        (["--temperature", "0.7", "--max-tokens", "0"], "--max-tokens: must be >= 1 (got 0)"),
        (
            ["--temperature", "0.7", "--teacher-n-probs", "0"],
            "--teacher-n-probs: must be an integer >= 1 (got 0)",
        ),
        (
            ["--temperature", "0.7", "--concurrency", "0"],
            "--concurrency: must be an integer >= 1 (got 0)",
        ),
        (
            ["--temperature", "0.7", "--serial-share", "2"],
            "--serial-share: must be a number in [0, 1] (got 2.0)",
        ),
        (
            ["--temperature", "0.7", "--max-per-prompt", "0"],
            "--max-per-prompt: must be an integer >= 1 (got 0)",
        ),
        (
            ["--temperature", "0.7", "--request-timeout-s", "0"],
            "--request-timeout-s: must be > 0 (got 0)",
        ),
        (["--temperature", "0.7", "--retries", "0"], "--retries: must be >= 1 (got 0)"),
        (
            ["--temperature", "0.7", "--reference-url", "127.0.0.1:8081"],
            "--reference-url: '127.0.0.1:8081' is not an http(s) URL, e.g. http://127.0.0.1:8080",
        ),
    ],
)
def test_a_bad_value_is_one_line_naming_the_flag_with_exit_2(
    tmp_path, capsys, prompts_file, extra, message
):
    code = exactspec_main(
        ["engine", "certify", "--prompts", str(prompts_file), "--out", str(tmp_path / "o"), *extra]
    )
    assert (code, _one_line(capsys)) == (2, f"exactspec engine certify: {message}")


@pytest.mark.parametrize(
    "command, argv, missing",
    [
        ("certify", ["--out", "o", "--temperature", "0.7"], "--prompts"),
        ("certify", ["--prompts", "p.jsonl", "--out", "o"], "--temperature"),
        ("collect", ["--prompts", "p.jsonl", "--out-dir", "o"], "--temperature"),
        ("certify", ["--prompts", "p.jsonl", "--temperature", "0.7"], "--out"),
    ],
)
def test_a_missing_argument_is_one_line_naming_it_with_exit_2(capsys, command, argv, missing):
    with pytest.raises(SystemExit) as exited:
        exactspec_main(["engine", command, *argv])
    assert exited.value.code == 2
    assert _one_line(capsys) == (
        f"exactspec engine {command}: error: the following arguments are required: "
        f"{missing} (see exactspec engine {command} --help)"
    )


def test_no_url_at_all_is_one_line_naming_the_flags(tmp_path, capsys, prompts_file):
    code = exactspec_main(
        [
            "engine",
            "certify",
            "--prompts",
            str(prompts_file),
            "--out",
            str(tmp_path / "o"),
            "--temperature",
            "0.7",
        ]
    )
    assert code == 2 and "--reference-url / --candidate-url: give both" in _one_line(capsys)


@pytest.mark.parametrize(
    "content, where",
    [
        (
            '{"prompt_id": "a", "prompt_tokens": [1]}\n{"prompt_id": "b", "prompt_tokens": [1]\n',
            "line 2: not valid JSON",
        ),
        ('{"prompt_tokens": [1]}\n', "line 1: expected an object with a string 'prompt_id'"),
        (
            '{"prompt_id": "a", "prompt_tokens": [-1]}\n',
            "line 1: 'prompt_tokens' must be a non-empty list",
        ),
        (
            '{"prompt_id": "a", "messages": [{"role": "user"}]}\n',
            "line 1: 'messages' must be a non-empty list",
        ),
    ],
)
def test_a_bad_prompts_file_is_one_line_naming_file_and_line_with_exit_2(
    tmp_path, capsys, content, where
):
    path = tmp_path / "prompts.jsonl"
    path.write_text(content)
    code = exactspec_main(
        [
            "engine",
            "certify",
            "--prompts",
            str(path),
            "--out",
            str(tmp_path / "o"),
            "--temperature",
            "0.7",
            "--reference-url",
            "http://127.0.0.1:9",
            "--candidate-url",
            "http://127.0.0.1:9",
        ]
    )
    line = _one_line(capsys)
    assert code == 2 and f"prompts file {path}: {where}" in line, line


def test_a_damaged_sample_file_to_resume_is_one_line_naming_it_with_exit_2(
    tmp_path, capsys, prompts_file
):
    out = tmp_path / "out"
    out.mkdir()
    (out / "reference.jsonl").write_text("not a header\n")
    with serve(FakeLlama()) as ref_url, serve(FakeLlama(speculative=True)) as cand_url:
        code = exactspec_main(
            [
                "engine",
                "certify",
                "--prompts",
                str(prompts_file),
                "--out",
                str(out),
                "--temperature",
                "0.7",
                "--reference-url",
                ref_url,
                "--candidate-url",
                cand_url,
            ]
        )
    line = _one_line(capsys)
    assert code == 2 and f"{out / 'reference.jsonl'}: line 1:" in line, line


def test_engine_serve_says_in_one_line_why_an_engine_cannot_start_or_a_mode_does_not_exist(
    monkeypatch, capsys
):
    monkeypatch.setenv("EXACTSPEC_LLAMA_SERVER", "/no/such/llama-server")
    assert exactspec_main(["engine", "serve", "--engine", "llama.cpp", "--mode", "ngram"]) == 6
    assert _one_line(capsys) == (
        "exactspec engine serve: llama.cpp could not start: "
        "EXACTSPEC_LLAMA_SERVER=/no/such/llama-server is not an executable file"
    )
    assert (
        exactspec_main(["engine", "serve", "--engine", "llama-cpp-python", "--mode", "draft"]) == 2
    )
    assert (
        _one_line(capsys)
        == "exactspec engine serve: --mode: llama-cpp-python serves plain, ngram, not 'draft'"
    )
