"""Engine-level meta-test: the engine level's mutant zoo (`conformance.engine.serve.mutants`: exactspec's own
generators and the generation-level mutants it names, `SERVED_MUTANTS`, served over the llama.cpp protocol and
certified by the one command's rounds at the quick profile), with each mutant's per-token deviation measured.

One reference server (exactspec's plain loop, speculation off) answers for every candidate (the zoo's shared
reference). Each mutant's mean per-token TV at the drafted positions is measured by direct simulation
(`zoo_deviation.measure`: no HTTP, a lower confidence bound at 1 - 1e-3). A mutant whose lower bound reaches the
profile's target must be rejected; one below it may pass, and the test records that instead of asserting.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
for _module in ("uvicorn", "starlette", "httpx", "tenacity"):  # the `engine` extra
    pytest.importorskip(_module)

from exactspec.conformance.engine.serve import mutants as zoo  # noqa: E402
from exactspec.conformance.engine.engine_level import certify_samples  # noqa: E402
from exactspec.conformance.engine.serve.mutant_backends import make_backend  # noqa: E402
from exactspec.conformance.engine.serve.mutant_server import EngineServer, sampling_from_request  # noqa: E402
from exactspec.conformance.core.profiles import get_profile  # noqa: E402
from exactspec.conformance.sequence.cases import PROMPT_A  # noqa: E402
from exactspec.conformance.sequence.models import tiny_pair  # noqa: E402
from exactspec.reference.warping import SamplingParams  # noqa: E402

PROFILE = "quick"
CHAIN, K, EOS, MODEL_NAME = zoo.CHAIN, zoo.K, zoo.EOS, zoo.MODEL_NAME
# the server's reading of the chain the collector sends
SAMPLING = sampling_from_request(CHAIN.request())
N_SIM = 3000  # direct (no HTTP) completions of each mutant to bound its per-token deviation
#: A mutant's true parameter in the family its diagnosis fits: drafts sampled at T = 1 while q is taken at the chain's
#: T = 0.5, both truncated to the same top 3, are q^(1/2).
TRUE_PARAMETERS = {"mutant-draft-temperature-mismatch": ("draft-law-mismatch", 0.5)}
backend = zoo.backend


@pytest.fixture(scope="module")
def reference(one_torch_thread):
    """The zoo's shared reference server and samples (stopped at exit)."""
    return zoo.shared_reference(PROFILE)


def serve_and_certify(kind: str, reference, tmp_path):
    """Serve `kind`, certify it in rounds (the one command), and certify its last look's files (with the draft's
    reports, which only a NOT_EXACT's diagnosis reads): the result."""
    pair = reference.pair(kind, tmp_path)
    result = certify_samples(pair.reference, pair.candidate, PROFILE, draft=pair.draft)
    levels = {r.result.false_fail_rate for r in result.records if r.statistical}
    assert levels and all(x <= get_profile(PROFILE).engine.total_false_fail for x in levels)
    return result


def assert_certified(result) -> None:
    failing = [r.result.message for r in result.records if not r.passed]
    assert result.verdict == "CERTIFIED", (result.verdict, result.reasons, failing)
    assert result.speculation_observed
    assert all(
        entry["reached"] for entry in result.extra["engine"]["ruled_out"]["per_prompt"].values()
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gpu_impl", "reference_loop"])
def test_correct_generator_certified(kind, reference, tmp_path):
    assert_certified(serve_and_certify(kind, reference, tmp_path))


@pytest.mark.slow
def test_plain_loop_against_itself(reference, tmp_path):
    """The plain loop as candidate: every check passes, but it never drafted, so the verdict is INCONCLUSIVE
    ("speculation not observed"), never CERTIFIED."""
    result = serve_and_certify("plain", reference, tmp_path)
    assert all(r.passed for r in result.records), [
        r.result.message for r in result.records if not r.passed
    ]
    assert result.verdict == "INCONCLUSIVE" and not result.speculation_observed
    assert any("speculation not observed" in reason for reason in result.reasons)


@pytest.mark.slow
@pytest.mark.parametrize("name", zoo.SERVED_MUTANTS)  # the engine zoo's mutants: the ones it names
def test_mutant_rejected_at_or_above_the_target(name, reference, tmp_path, record_property):
    """A mutant whose mean per-token TV at the drafted positions is at least the quick target (lower bound at
    1 - 1e-3 from N_SIM direct completions) is NOT_EXACT; below it, any verdict but a failure to run is allowed."""
    from exactspec.conformance.engine.serve.zoo_deviation import measure

    result = serve_and_certify(name, reference, tmp_path)
    deviation = measure(name, N_SIM)
    target = get_profile(PROFILE).engine.target_tv
    record_property("token_deviation", deviation.as_dict())
    if deviation.lower_bound >= target:
        assert result.verdict in ("NOT_EXACT", "CONTRACT_VIOLATION"), (
            name,
            deviation,
            result.reasons,
        )
    # the diagnosis names the mutant's mechanism, its parameter inside the interval
    if result.verdict == "NOT_EXACT":
        diagnosis = result.extra["diagnosis"]
        assert diagnosis["mechanism"]["family"] == zoo.DIAGNOSES[name], (
            name,
            diagnosis["mechanism"]["text"],
        )
        if name in TRUE_PARAMETERS:
            family, value = TRUE_PARAMETERS[name]
            fitted = next(f for f in diagnosis["fits"] if f["family"] == family)
            assert fitted["interval"][0] <= value <= fitted["interval"][1], (name, fitted)
    if result.verdict == "CERTIFIED":
        pytest.xfail(f"{name}: per-token deviation {deviation.as_dict()} below the target {target}")
    else:
        assert result.verdict in ("NOT_EXACT", "CONTRACT_VIOLATION", "INCONCLUSIVE"), (
            name,
            result.verdict,
        )


# ---- the server itself (fast) -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def loop_server(one_torch_thread):
    with EngineServer(backend("reference_loop"), model_name=MODEL_NAME) as server:
        yield server


def _post(server, path: str, body: dict):
    import httpx

    return httpx.post(server.base_url + path, json=body, timeout=30.0)


BODY = {"prompt": list(PROMPT_A), "seed": 7, **CHAIN.request()}


def test_server_health_props_tokenize(loop_server):
    import httpx

    assert httpx.get(loop_server.base_url + "/health").json() == {"status": "ok"}
    props = httpx.get(loop_server.base_url + "/props").json()
    assert props["model_path"] == MODEL_NAME and props["exactspec"]["backend"] == "reference_loop"
    assert props["exactspec"]["k"] == K and props["exactspec"]["eos_token_id"] == EOS
    assert _post(loop_server, "/tokenize", {"content": " 0 2 3"}).json() == {"tokens": [0, 2, 3]}


def test_server_native_and_openai_shapes(loop_server):
    """Same seed, same tokens on both endpoints; probabilities are the target's warped rows (post-sampling)."""
    body = {**BODY, "n_probs": 6, "post_sampling_probs": True}
    native = _post(loop_server, "/completion", body).json()
    openai = _post(loop_server, "/v1/completions", body).json()
    tokens = native["tokens"]
    assert 1 <= len(tokens) <= CHAIN.max_tokens and native["stop_type"] in ("eos", "limit")
    assert [e["id"] for e in openai["choices"][0]["logprobs"]["content"]] == tokens
    assert openai["choices"][0]["finish_reason"] == (
        "stop" if native["stop_type"] == "eos" else "length"
    )
    assert native["timings"]["draft_n"] >= native["timings"]["draft_n_accepted"] >= 0
    assert native["timings"]["draft_n"] > 0
    target, _ = tiny_pair(eos_token_id=EOS)
    from exactspec.conformance.sequence.models import target_rows

    rows = target_rows(target, PROMPT_A, tokens, SAMPLING)
    for row, entry in zip(rows, native["completion_probabilities"]):
        listed = {e["id"]: e["prob"] for e in entry["top_probs"]}
        # top-k 3: exactly 3 nonzero
        assert len(listed) == 3 and sum(listed.values()) == pytest.approx(1.0)
        assert all(listed[i] == pytest.approx(row[i], abs=1e-12) for i in listed)
        assert entry["prob"] == pytest.approx(row[entry["id"]], abs=1e-12)
    raw = _post(loop_server, "/completion", {**body, "post_sampling_probs": False}).json()
    assert "top_logprobs" in raw["completion_probabilities"][0] and raw["tokens"] == tokens


def test_server_seed_determinism(loop_server):
    first = _post(loop_server, "/completion", {**BODY, "seed": 11}).json()["tokens"]
    assert _post(loop_server, "/completion", {**BODY, "seed": 11}).json()["tokens"] == first
    seeds = {
        tuple(_post(loop_server, "/completion", {**BODY, "seed": s}).json()["tokens"])
        for s in range(12)
    }
    assert len(seeds) > 1


@pytest.mark.parametrize(
    "change",
    [
        {"repeat_penalty": 1.1},
        {"stream": True},
        {"ignore_eos": True},
        {"prompt": "text"},
        {"max_tokens": 0, "n_predict": 0},
        {"top_p": 0.0},
        {"top_p": 0.9, "samplers": ["top_k", "top_p", "min_p", "temperature"]},
    ],
)
def test_server_refuses_what_it_does_not_implement(loop_server, change):
    answer = _post(loop_server, "/completion", {**BODY, **change})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == 400


def test_request_chain_mapping():
    """llama.cpp's defaults for missing fields; top_k 0 = off; temperature <= 0 = greedy; the pinned chain."""
    assert SAMPLING == SamplingParams(0.5, top_k=3)
    assert sampling_from_request({}) == SamplingParams(0.8, top_k=40, top_p=0.95, min_p=0.05)
    assert sampling_from_request(
        {"temperature": -1, "top_k": 0, "top_p": 1, "min_p": 0}
    ) == SamplingParams(0.0)


def test_backend_arguments_are_checked():
    target, draft = tiny_pair(eos_token_id=EOS)
    with pytest.raises(ValueError, match="kind"):
        make_backend("no-such-mutant", target, draft, k=K)
    with pytest.raises(ValueError, match="k must be"):
        make_backend("reference_loop", target, draft, k=0)
    with pytest.raises(ValueError, match="draft"):
        make_backend("gpu_impl", target, None, k=K)
    with pytest.raises(ValueError, match="ready_timeout_s"):
        EngineServer(make_backend("plain", target), ready_timeout_s=0)


# ---- the kill table and the per-token deviation (fast) ---------------------------------------------


def test_kill_table_keeps_each_profiles_table_apart():
    from exactspec.conformance.kill_table import default_out

    assert default_out("engine", "quick").name == "engine"
    assert default_out("engine", "standard").name == "engine-standard"


def test_measured_token_deviation_separates_exact_from_mutant(one_torch_thread):
    """The textbook loop's bounds contain 0; a mutant verified at T = 1 sits far above the standard target,
    with lower <= estimate <= upper."""
    from exactspec.conformance.engine.serve.zoo_deviation import measure

    exact = measure("reference_loop", 3000)
    mutant = measure("mutant-target-verified-at-t1", 3000)
    assert exact.lower_bound == 0.0 and exact.estimate < 0.03
    assert 0.05 < mutant.lower_bound <= mutant.estimate <= mutant.upper_bound
    with pytest.raises(ValueError, match="n_completions"):
        measure("reference_loop", 10)
