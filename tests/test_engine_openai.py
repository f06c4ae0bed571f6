"""The generic OpenAI-compatible dialect (`collect.generic_openai`, `--dialect openai`) against a fake server that
speaks plain OpenAI: no token ids, token strings in `logprobs.tokens` and string-keyed `top_logprobs`, drafts in a
Prometheus counter of its own name, or nowhere. Token strings are mapped through a tokenizer.json written here
(`collect.vocabulary`). The campaigns run at the quick profile (total false-fail rate 1e-3, anytime-valid) on the
fake's seeded toy law, which is the same at both ends for the same seed: the coupling route certifies."""

from __future__ import annotations

import json
import math
import random
import re

import pytest

pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse, PlainTextResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from exactspec.cli import main as exactspec_main  # noqa: E402
from exactspec.conformance.engine import samples  # noqa: E402
from exactspec.conformance.engine.collect.campaign import Certification, run_campaign  # noqa: E402
from exactspec.conformance.engine.collect.client import SamplerChain  # noqa: E402
from exactspec.conformance.engine.collect.generic_openai import (  # noqa: E402
    parse_generic_completion,
    sampled_from_raw,
)
from exactspec.conformance.engine.collect.dialect_openai import OpenAIOptions  # noqa: E402
from exactspec.conformance.engine.collect.plan import (
    CollectionPlan,
    Forcing,
    Identity,
    Limits,
    Transport,
)  # noqa: E402
from exactspec.conformance.engine.collect.vocabulary import Vocabulary  # noqa: E402
from tests.test_engine_collect import PROMPTS, VOCAB, serve, toy_law  # noqa: E402

NAMES = [f"w{i}" for i in range(VOCAB)]  # how the fake shows token i


def write_tokenizer(tmp_path, names=NAMES):
    path = tmp_path / "tokenizer.json"
    path.write_text(
        json.dumps(
            {
                "model": {"type": "BPE", "vocab": {name: i for i, name in enumerate(names)}},
                "decoder": None,
                "added_tokens": [],
            }
        )
    )
    return path


class FakeOpenAI:
    """An OpenAI-compatible look-alike: strings only, its own counter names, the same law at both ends."""

    def __init__(self, speculative: bool = False, ids: bool = False, text: bool = False) -> None:
        self.speculative, self.ids, self.text, self.bodies, self.drafted = (
            speculative,
            ids,
            text,
            [],
            0,
        )
        self.app = Starlette(
            routes=[
                Route("/v1/completions", self.completion, methods=["POST"]),
                Route("/v1/models", self.models),
                Route("/metrics", self.metrics),
                Route("/extras/tokenize", self.tokenize, methods=["POST"]),
            ]
        )

    async def tokenize(self, request: Request) -> JSONResponse:  # llama-cpp-python's shape
        return JSONResponse(
            {
                "tokens": [
                    NAMES.index(w) for w in re.findall(r"w\d", (await request.json())["input"])
                ]
            }
        )

    async def models(self, request: Request) -> JSONResponse:
        return JSONResponse({"data": [{"id": "toy"}]})

    async def metrics(self, request: Request) -> PlainTextResponse:
        return PlainTextResponse(
            f"# TYPE spec_drafted counter\nspec_drafted_total {self.drafted}\n"
            f"spec_accepted_total {self.drafted // 2}\n"
        )

    async def completion(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.bodies.append(body)
        if self.text != isinstance(body["prompt"], str):
            return JSONResponse({"detail": "prompt: wrong type"}, status_code=422)
        prompt = (
            [NAMES.index(w) for w in re.findall(r"w\d", body["prompt"])]
            if self.text
            else body["prompt"]
        )
        rng = random.Random(f"{body['seed']}/{prompt}")
        context, tokens, tops = list(prompt), [], []
        for _ in range(body["max_tokens"]):
            law = toy_law(context)
            token = rng.choices(range(VOCAB), weights=law)[0]
            key = (lambda i: f"token_id:{i}") if self.ids else (lambda i: NAMES[i])
            listed = sorted(range(VOCAB), key=lambda i: -law[i])[: body["logprobs"] or 0]
            tops.append({key(i): math.log(law[i]) for i in listed})
            tokens.append(token)
            context.append(token)
        if self.speculative:
            self.drafted += 4
        logprobs = {
            "tokens": [NAMES[t] for t in tokens],
            "top_logprobs": tops if body["logprobs"] else None,
        }
        choice = {
            "text": "".join(NAMES[t] for t in tokens),
            "finish_reason": "length",
            "logprobs": logprobs,
        }
        if self.ids:
            choice["token_ids"] = tokens
        return JSONResponse({"choices": [choice]})


QUICK = Certification("quick")
SAFETY_NET_S = 1800.0  # seconds: far above a run's time here; the budget is completions per prompt
COUPLED = {"type": "ngram", "draft_sampling": "greedy", "expect_seed_coupled": True}


def _plan(
    tmp_path, ref_url: str, cand_url: str, speculation: dict = COUPLED, **options
) -> CollectionPlan:
    """The generic dialect's plan against the fakes: `options` override the dialect's (`OpenAIOptions`)."""
    base = dict(
        tokenizer=str(write_tokenizer(tmp_path)),
        reports="post_sampling",
        draft_counters=("spec_drafted_total", "spec_accepted_total"),
        request_extra={"repeat_penalty": 1.0},
    )
    transport = Transport(
        dialect="openai",
        options=OpenAIOptions(**{**base, **options}),
        reference_urls=(ref_url,),
        candidate_urls=(cand_url,),
    )
    return CollectionPlan(
        law=SamplerChain(temperature=0.7, max_tokens=3),
        transport=transport,
        limits=Limits(time_limit_s=SAFETY_NET_S, max_per_prompt=2048),
        identity=Identity(speculation=speculation),
        forcing=Forcing(teacher_n_probs=4, reference_n_probs=4),
    )


def test_token_strings_are_mapped_through_the_tokenizer_and_counters_read_by_name(tmp_path):
    reference, candidate = FakeOpenAI(), FakeOpenAI(speculative=True)
    with serve(reference) as ref_url, serve(candidate) as cand_url:
        result = run_campaign(PROMPTS, tmp_path / "run", _plan(tmp_path, ref_url, cand_url), QUICK)
    assert result.verdict == "CERTIFIED", result.reasons
    assert (
        all(isinstance(t, int) for t in candidate.bodies[0]["prompt"])
        and candidate.bodies[0]["repeat_penalty"] == 1
    )
    cand = samples.read_samples(tmp_path / "run" / "candidate.jsonl")
    assert cand.counters and sum(c.draft_n for c in cand.counters) > 0
    assert cand.header.request_defaults["repeat_penalty"] == 1.0
    evidence = result.extra["engine"]["speculation_evidence"]
    assert evidence["observed"] and not evidence["declared"]


def test_declared_speculation_is_said_and_undeclared_unobserved_speculation_is_inconclusive(
    tmp_path,
):
    with serve(FakeOpenAI(ids=True)) as ref_url, serve(FakeOpenAI(ids=True)) as cand_url:
        declared = _plan(
            tmp_path,
            ref_url,
            cand_url,
            tokenizer=None,
            draft_counters=None,
            speculation={
                "type": "ngram",
                "draft_sampling": None,
                "expect_seed_coupled": True,
                "evidence": "declared",
            },
        )
        result = run_campaign(PROMPTS, tmp_path / "declared", declared, QUICK)
        silent = _plan(tmp_path, ref_url, cand_url, tokenizer=None, draft_counters=None)
        unseen = run_campaign(PROMPTS, tmp_path / "silent", silent, QUICK)
    assert result.verdict == "CERTIFIED", result.reasons
    assert "declared by the user" in (tmp_path / "declared" / "CERTIFICATE.md").read_text()
    assert unseen.verdict == "INCONCLUSIVE" and any(
        "speculation not observed" in r for r in unseen.reasons
    )


def test_an_ambiguous_token_string_cuts_the_completion_there_and_is_never_guessed_past(tmp_path):
    vocabulary = Vocabulary.from_path(write_tokenizer(tmp_path, ["a", "b", "a "]))
    assert vocabulary.id_of("b", "x") == 1
    clash = tmp_path / "clash.json"
    clash.write_text(
        json.dumps(
            {"model": {"vocab": {"a": 0, "b": 1}}, "added_tokens": [{"id": 2, "content": "a"}]}
        )
    )
    chain = SamplerChain(max_tokens=3)
    reply = parse_generic_completion(
        {"choices": [{"logprobs": {"tokens": ["b", "a", "b"]}, "finish_reason": "length"}]},
        chain,
        "raw",
        Vocabulary.from_path(clash),
    )
    assert reply.tokens == [1, 0] and reply.finish_reason == "ambiguous token"
    with pytest.raises(ValueError, match=r"ambiguous .* ids \[0, 2\]"):
        Vocabulary.from_path(clash).id_of("a", "position 1")
    with pytest.raises(ValueError, match="'zz' is no token"):
        vocabulary.id_of("zz", "position 3")
    with pytest.raises(ValueError, match="position 1: the token string 'zz' is no token"):
        parse_generic_completion(
            {"choices": [{"logprobs": {"tokens": ["zz"]}}]}, chain, "raw", vocabulary
        )
    with pytest.raises(ValueError, match="give --tokenizer"):
        parse_generic_completion({"choices": [{"logprobs": {"tokens": ["a"]}}]}, chain, "raw", None)


def test_an_end_token_the_server_leaves_out_is_put_back(tmp_path):
    path = tmp_path / "model"
    path.mkdir()
    write_tokenizer(path, ["a", "b", "</s>"])
    (path / "config.json").write_text(json.dumps({"eos_token_id": 2}))
    vocabulary = Vocabulary.from_path(path)
    body = {"choices": [{"logprobs": {"tokens": ["a"]}, "finish_reason": "stop"}]}
    assert parse_generic_completion(body, SamplerChain(max_tokens=3), "raw", vocabulary).tokens == [
        0,
        2,
    ]
    body["choices"][0]["finish_reason"] = "length"
    assert parse_generic_completion(body, SamplerChain(max_tokens=3), "raw", vocabulary).tokens == [
        0
    ]


def test_raw_reports_give_the_sampled_law_only_where_they_determine_it():
    rows = [[[5, 0.5], [3, 0.3], [1, 0.1]]]
    law = sampled_from_raw(rows, SamplerChain(temperature=0.5, top_k=2))
    assert [t for t, _ in law[0]] == [5, 3] and law[0][0][1] == pytest.approx(0.25 / 0.34)
    assert sampled_from_raw(rows, SamplerChain(temperature=0.0)) == [[[5, 1.0]]]
    for chain in (
        SamplerChain(temperature=0.7),
        SamplerChain(temperature=0.7, top_k=4),
        SamplerChain(temperature=0.7, top_k=2, top_p=0.9),
        SamplerChain(temperature=0.7, top_k=2, min_p=0.1),
    ):
        assert sampled_from_raw(rows, chain) is None, chain


def test_a_text_only_server_is_sent_text_that_tokenises_back_to_the_ids(tmp_path):
    reference, candidate = FakeOpenAI(text=True), FakeOpenAI(speculative=True, text=True)
    with serve(reference) as ref_url, serve(candidate) as cand_url:
        result = run_campaign(
            PROMPTS, tmp_path / "run", _plan(tmp_path, ref_url, cand_url, text_prompts=True), QUICK
        )
    assert result.verdict == "CERTIFIED", result.reasons
    assert candidate.bodies[0]["prompt"] in ("w1w2w3", "w1w4")


def test_a_report_listing_an_unmappable_string_leaves_its_prefix_unreported(tmp_path):
    vocabulary = Vocabulary.from_path(write_tokenizer(tmp_path))
    body = {
        "choices": [
            {"logprobs": {"tokens": ["w1"], "top_logprobs": [{"w1": -0.1, "bytes:\\xe2": -2.0}]}}
        ]
    }
    reply = parse_generic_completion(body, SamplerChain(n_probs=2), "post_sampling", vocabulary)
    assert (
        reply.tokens == [1]
        and reply.top_probs is None
        and reply.probs_dropped.startswith("unmappable report")
    )


def test_a_short_top_list_is_dropped_and_ids_are_read_under_their_names():
    body = {
        "choices": [
            {
                "output_token_ids": [3, 1],
                "logprobs": {
                    "top_logprobs": [{"token_id:3": -0.1}, {"token_id:1": -0.2, "token_id:2": -9}]
                },
            }
        ]
    }
    reply = parse_generic_completion(body, SamplerChain(n_probs=2), "raw", None)
    assert reply.tokens == [3, 1] and reply.top_probs is None and "short" in reply.probs_dropped


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--tokenizer", "x.json"], "--tokenizer: only with --dialect openai"),
        (["--dialect", "openai", "--draft-counter", "d"], "give both Prometheus counter names"),
        (
            ["--dialect", "openai", "--request-extra", "[1]"],
            "--request-extra: expected a JSON object",
        ),
        (["--dialect", "openai", "--tokenizer", "/no/such/tokenizer.json"], "does not exist"),
    ],
)
def test_bad_openai_options_are_usage_errors_naming_the_argument(tmp_path, capsys, extra, message):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt_id": "a", "prompt_tokens": [1]}\n')
    code = exactspec_main(
        [
            "engine",
            "certify",
            "--prompts",
            str(prompts),
            "--out",
            str(tmp_path / "o"),
            "--reference-url",
            "http://127.0.0.1:9",
            "--candidate-url",
            "http://127.0.0.1:9",
            "--temperature",
            "0.7",
            *extra,
        ]
    )
    assert code == 2 and message in capsys.readouterr().err


def test_token_by_token_forcing_primes_the_prefixes_the_server_does_not_hold():
    from exactspec.conformance.engine.collect.token_by_token import held_after, priming_prefixes

    prompt = [7, 8]
    assert priming_prefixes((7, 8, 1, 2), prompt, [1, 2, 3]) == []  # holds all but the last: ask it
    # holds more: the last is re-evaluated alone
    assert priming_prefixes((7, 8, 1, 2, 3, 4), prompt, [1, 2, 3]) == []
    # holds prompt + [1]: ask [1, 2] first
    assert priming_prefixes((7, 8, 1, 5), prompt, [1, 2, 3]) == [2]
    assert priming_prefixes((7, 8), prompt, [1, 2, 3]) == [1, 2]
    # less than the prompt: the prompt alone first
    assert priming_prefixes((7, 9), prompt, [1, 2]) == [
        0,
        1,
    ]
    assert priming_prefixes(None, prompt, []) == []  # the prompt itself: evaluated as decoding does
    assert (
        held_after(prompt, [1, 2, 3], cut=False) == (7, 8, 1, 2)
        and held_after(prompt, [1], cut=True) is None
    )


def test_token_by_token_forcing_sends_the_shorter_prefixes_first(tmp_path):
    reference, candidate = FakeOpenAI(text=True), FakeOpenAI(speculative=True, text=True)
    with serve(reference) as ref_url, serve(candidate) as cand_url:
        # the coupling is not declared
        plan = _plan(
            tmp_path,
            ref_url,
            cand_url,
            text_prompts=True,
            token_by_token=True,  # forcing at once:
            speculation={**COUPLED, "expect_seed_coupled": False},
        )
        result = run_campaign(PROMPTS, tmp_path / "run", plan, QUICK)
    assert result.verdict == "CERTIFIED", result.reasons
    primed = [b for b in reference.bodies if b["logprobs"] is None]
    assert primed and all(b["max_tokens"] == 1 for b in primed)
    # the candidate is never primed
    assert not [b for b in candidate.bodies if b["logprobs"] is None]
