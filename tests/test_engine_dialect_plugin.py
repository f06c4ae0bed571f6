"""A new dialect is one module and one registration line: the toy dialect (`tests/toy_dialect.py`: its options, its
flag ``--toy-token``, its client, its plugin) registered here and run through `exactspec engine certify` end to end
at the quick profile (total false-fail rate 1e-3, anytime-valid; target per-token TV 0.15), against two tiny toy
servers on 127.0.0.1 that serve the in-process toy engine (`serve.toy_adapter.ToyEngine`) over the toy protocol.

The candidate verifies by sampler match, so it is seed-coupled with the reference: declared so, the coupling route
certifies with no report; undeclared, every prefix is teacher-forced through the toy client's `report_after` and the
coupling route still certifies. Budgets are completions per prompt (`--max-per-prompt`); the time limit is the
default safety net, far above a run's time here. Seeds are drawn by a fixed --seed-key: each run is reproducible."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from exactspec.cli import main as exactspec_main  # noqa: E402
from exactspec.conformance.engine import samples  # noqa: E402
from exactspec.conformance.engine.backend import Sampling  # noqa: E402
from exactspec.conformance.engine.collect.dialects import register_dialect, unregister_dialect  # noqa: E402
from exactspec.conformance.engine.serve.toy_adapter import ToyEngine  # noqa: E402
from tests.test_engine_collect import serve  # noqa: E402
from tests.toy_dialect import ToyDialect  # noqa: E402

TOKEN = "s3cret"
KEY = "5eed0000000000000000000000000052"
PROMPTS = [{"prompt_id": "a", "prompt_tokens": [1, 2]}, {"prompt_id": "b", "prompt_tokens": [5]}]


class ToyServer:
    """The toy protocol (`tests/toy_dialect.py`) over a `ToyEngine` of one role; refuses a wrong bearer token."""

    def __init__(self, role: str, rule: str = "standard") -> None:
        self.engine, self.bodies = ToyEngine(role=role, rule=rule), []
        self.app = Starlette(
            routes=[
                Route("/toy/info", self.info),
                Route("/toy/sample", self.sample, methods=["POST"]),
                Route("/toy/report", self.report, methods=["POST"]),
            ]
        )

    def _refused(self, request: Request) -> JSONResponse | None:
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return JSONResponse({"error": "bad token"}, status_code=401)
        return None

    async def info(self, request: Request) -> JSONResponse:
        return self._refused(request) or JSONResponse(
            {"engine": "toy", "version": "1", "model": self.engine.model_name}
        )

    @staticmethod
    def _sampling(body: dict) -> Sampling:
        return Sampling(
            body["temperature"], body["top_k"], body["top_p"], body["min_p"], body["ignore_eos"]
        )

    async def sample(self, request: Request) -> JSONResponse:
        body = await request.json()
        if (refused := self._refused(request)) is not None:
            return refused
        self.bodies.append(body)
        done = self.engine.complete(
            body["prompt"], body["seed"], self._sampling(body), body["max_tokens"]
        )
        top = (
            [
                self.engine.report(
                    body["prompt"] + list(done.tokens[:t]), self._sampling(body), body["n_probs"]
                )
                for t in range(len(done.tokens))
            ]
            if body["n_probs"]
            else None
        )
        return JSONResponse(
            {
                "ids": list(done.tokens),
                "eos": done.stopped_by_eos,
                "drafted": done.draft_n,
                "accepted": done.draft_n_accepted,
                "top": top,
            }
        )

    async def report(self, request: Request) -> JSONResponse:
        body = await request.json()
        return self._refused(request) or JSONResponse(
            {"top": self.engine.report(body["prompt"], self._sampling(body), body["n_probs"])}
        )


@pytest.fixture
def toy_dialect():
    plugin = register_dialect(ToyDialect())  # the one registration line a new dialect needs
    yield plugin
    unregister_dialect(plugin.name)


def _certify(tmp_path, ref_url: str, cand_url: str, *extra: str) -> int:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    return exactspec_main(
        [
            "engine",
            "certify",
            "--dialect",
            "toy",
            "--reference-url",
            ref_url,
            "--candidate-url",
            cand_url,
            "--prompts",
            str(prompts),
            "--out",
            str(tmp_path / "out"),
            "--profile",
            "quick",
            "--temperature",
            "0.7",
            "--max-tokens",
            "6",
            "--seed-key",
            KEY,
            "--max-per-prompt",
            "512",
            "--retry-wait-s",
            "0.01",
            *extra,
        ]
    )


@pytest.mark.parametrize("declared", [True, False], ids=["declared-coupled", "teacher-forced"])
def test_a_toy_dialect_added_in_one_module_certifies_end_to_end(
    toy_dialect, tmp_path, capsys, declared
):
    reference, candidate = ToyServer("reference"), ToyServer("candidate", rule="sampler_match")
    with serve(reference) as ref_url, serve(candidate) as cand_url:
        code = _certify(
            tmp_path,
            ref_url,
            cand_url,
            "--toy-token",
            TOKEN,
            "--speculation-type",
            "draft-model",
            *(["--expect-seed-coupled"] if declared else []),
        )
    doc = json.loads((tmp_path / "out" / "certificate.json").read_text())
    assert code == 0 and doc["verdict"] == "CERTIFIED", doc["reasons"]
    assert all(
        entry["best_any_shape"]["route"] == "coupling"
        for entry in doc["engine"]["ruled_out"]["per_prompt"].values()
    )
    assert json.loads((tmp_path / "out" / "run.json").read_text())["design"]["dialect"] == "toy"
    ref = samples.read_samples(tmp_path / "out" / "reference.jsonl")
    assert (
        ref.header.engine["name"] == "toy" and ref.header.engine["props"]["build_info"] == "toy 1"
    )
    # teacher-forced through the toy client's report_after
    assert bool(ref.prefix_probs) is not declared
    assert candidate.bodies and all(body["temperature"] == 0.7 for body in candidate.bodies)
    assert "CERTIFIED" in capsys.readouterr().out


def test_the_toy_dialect_owns_its_flag_and_its_group_in_the_help(toy_dialect, tmp_path, capsys):
    with pytest.raises(SystemExit):
        exactspec_main(["engine", "certify", "--help"])
    shown = capsys.readouterr().out
    assert (
        "--dialect toy:\n  --toy-token TOY_TOKEN" in shown
        and "{llama.cpp,vllm,openai,toy}" in shown
    )
    code = exactspec_main(
        [
            "engine",
            "certify",
            "--reference-url",
            "http://127.0.0.1:9",
            "--candidate-url",
            "http://127.0.0.1:9",
            "--prompts",
            "p.jsonl",
            "--out",
            str(tmp_path / "o"),
            "--temperature",
            "0.7",
            "--toy-token",
            TOKEN,
        ]
    )
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        "exactspec engine certify: --toy-token: only with --dialect toy (this "
        "run's dialect is llama.cpp)"
    )


def test_a_toy_server_that_refuses_the_token_is_unavailable_naming_its_endpoint_and_message(
    toy_dialect, tmp_path, capsys
):
    with serve(ToyServer("reference")) as ref_url, serve(ToyServer("candidate")) as cand_url:
        code = _certify(tmp_path, ref_url, cand_url, "--toy-token", "wrong", "--retries", "1")
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 6 and not (tmp_path / "out" / "certificate.json").exists()
    assert "/toy/sample answered HTTP 401: bad token" in lines[-1], lines


def test_after_the_test_the_toy_dialect_is_gone(capsys):
    with pytest.raises(SystemExit):
        exactspec_main(["engine", "certify", "--help"])
    assert "--toy-token" not in capsys.readouterr().out
