"""The synthetic serving engine (`conformance.engine.serve.synthetic_*`): its model's rows are the oracle's warped
law, plain decoding samples them, every mode does what its table entry says (exact modes measure as exact, every
bug measurably deviates at the default settings: T = 0.7, max_tokens 16, k 4), and the server speaks llama.cpp's
``/completion`` in its own process, under real concurrency.

Statistical checks use fixed seeds, so each outcome is a fixed number for a given code version; the level each
states is what the check would have at random seeds. Deviation bounds are one-sided at 1 - 1e-3 each
(`synthetic_deviation`).
"""

from __future__ import annotations

import asyncio
import os

import numpy as np
import pytest
from exactspec.conformance.engine.serve import synthetic_deviation as deviation
from exactspec.conformance.engine.serve.synthetic_engine import (
    MODES,
    NO_LOAD,
    SimulatedLoad,
    draw,
    generate,
)
from exactspec.conformance.engine.serve.synthetic_model import (
    Chain,
    SyntheticModel,
    entropy_nats,
)
from exactspec.conformance.engine.serve.zoo_deviation import (
    plug_in_tv,
    split_lower_bound,
)
from exactspec.reference.sampling import sample_token
from exactspec.reference.warping import SamplingParams
from scipy.stats import chisquare

PROMPT = list(deviation.DEFAULT_PROMPT)
T07 = Chain(SamplingParams(0.7))
TRUNCATED = Chain(SamplingParams(0.7, 10, 0.9, 0.05))
LLAMA_ORDER = Chain(SamplingParams(0.7, 10, 0.9, 0.05), temperature_last=True)
EXACT = sorted(name for name, mode in MODES.items() if mode.exact)
BUGS = sorted(name for name, mode in MODES.items() if not mode.exact)
ALPHA = 1e-3  # level of the chi-square checks
#: Completions per bug mode for its lower bound (the weaker the bug, the more), lm-like profile.
BUG_N = {"shared-uniform": 20_000, "eos-at-round-end": 20_000, "kv-not-rolled-back": 20_000}


@pytest.fixture(scope="module")
def model():
    return SyntheticModel()


def chi_square_pvalue(counts: np.ndarray, probs: np.ndarray) -> float:
    """Pearson's test of counts against probs, cells with expectation < 5 pooled into one."""
    expected = probs * counts.sum()
    small = expected < 5
    observed = np.append(counts[~small], counts[small].sum())
    expected = np.append(expected[~small], expected[small].sum())
    keep = expected > 0
    return float(chisquare(observed[keep], expected[keep]).pvalue)


# -- the model ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "chain", [T07, TRUNCATED, Chain(SamplingParams(0.0)), Chain(SamplingParams(1.3, 5))]
)
def test_rows_are_sampling_params_warp_of_the_logits(model, chain):
    for context in ([5], [5, 9], [3, 200, 17], [255, 255]):
        assert np.array_equal(
            model.target_row(context, chain), chain.params.warp(model.target_logits(context))
        )
        assert np.array_equal(
            model.draft_row(context, chain), chain.params.warp(model.draft_logits(context))
        )


def test_llama_order_warps_the_filters_at_t1_then_the_temperature(model):
    for context in ([5, 9], [3, 200, 17], [40, 41]):
        logits = model.target_logits(context)
        survivors = SamplingParams(1.0, 10, 0.9, 0.05).warp(logits) > 0
        expected = SamplingParams(0.7).warp(np.where(survivors, logits, -np.inf))
        assert np.array_equal(model.target_row(context, LLAMA_ORDER), expected)
    differ = (
        np.abs(model.target_table(LLAMA_ORDER) - model.target_table(TRUNCATED)).sum(axis=-1) > 1e-9
    )
    assert 0.05 < differ.mean() < 1  # the order changes the law in some states


def test_teacher_forced_rows_follow_the_context(model):
    tokens = generate(model, "plain", PROMPT, 12, T07, 3).tokens
    rows = model.position_rows(PROMPT, tokens, T07)
    for i, row in enumerate(rows):
        assert np.array_equal(row, model.target_row(PROMPT + tokens[:i], T07))
    a, b = (int(np.flatnonzero(model.token_class == c)[0]) for c in (0, 1))
    # the second order
    assert not np.array_equal(model.target_row([a, 9], T07), model.target_row([b, 9], T07))


def test_profiles_have_the_stated_shape():
    lm, flat = SyntheticModel(profile="lm-like"), SyntheticModel(profile="flat")
    assert (lm.target_table(T07).max(axis=-1) >= 0.9).mean() > 0.6  # most states peaked
    for chosen, low, high in ((lm, 0.1, 1.5), (flat, 2.5, 3.6)):
        completions = [
            generate(chosen, "plain", PROMPT, 16, T07, seed).tokens for seed in range(300)
        ]
        rows = np.concatenate([chosen.position_rows(PROMPT, tokens, T07) for tokens in completions])
        assert low < entropy_nats(rows).mean() < high
        drafts = np.stack(
            [
                chosen.draft_row(PROMPT + tokens[:i], T07)
                for tokens in completions
                for i in range(len(tokens))
            ]
        )
        # acceptance rate 1 - TV(p, q)
        assert 0.6 < np.minimum(rows, drafts).sum(axis=1).mean() < 0.85


def test_the_fast_draw_is_the_reference_sampler():
    rng = np.random.default_rng(0)
    for _ in range(3000):
        row = rng.random(9) ** 3 * (rng.random(9) > 0.4)
        if row.sum() > 0:
            seed = int(rng.integers(2**32))
            assert draw(row, np.random.default_rng(seed)) == sample_token(
                row, np.random.default_rng(seed)
            )


# -- the loop -----------------------------------------------------------------------------------------------------


def test_plain_samples_the_warped_target(model):
    """Position 1, and the joint law of the first two tokens, by chi-square at level ALPHA over 6000 seeds."""
    first = model.target_row(PROMPT, T07)
    completions = [generate(model, "plain", PROMPT, 2, T07, seed).tokens for seed in range(6000)]
    counts = np.bincount([tokens[0] for tokens in completions], minlength=model.vocab)
    assert chi_square_pvalue(counts, first) > ALPHA
    joint = first[:, None] * np.stack(
        [model.target_row(PROMPT + [a], T07) for a in range(model.vocab)]
    )
    joint[model.eos] = 0.0
    joint[model.eos, 0] = first[model.eos]  # EOS first: the completion ends (coded as (EOS, 0))
    pairs = np.zeros_like(joint)
    for tokens in completions:
        pairs[tokens[0], tokens[1] if len(tokens) > 1 else 0] += 1
    assert chi_square_pvalue(pairs.ravel(), joint.ravel()) > ALPHA


@pytest.mark.parametrize(
    "chain", [T07, TRUNCATED, LLAMA_ORDER], ids=["t07", "truncated", "llama-order"]
)
def test_sampler_match_is_seed_coupled_to_plain(model, chain):
    for seed in range(300):
        assert (
            generate(model, "sampler-match", PROMPT, 16, chain, seed).tokens
            == generate(model, "plain", PROMPT, 16, chain, seed).tokens
        )


def test_exact_uncoupled_is_not_seed_coupled(model):
    differ = sum(
        generate(model, "exact-uncoupled", PROMPT, 16, T07, seed).tokens
        != generate(model, "plain", PROMPT, 16, T07, seed).tokens
        for seed in range(100)
    )
    assert differ > 50


@pytest.mark.parametrize("name", sorted(MODES))
def test_every_mode_respects_max_tokens_and_eos(model, name):
    load = SimulatedLoad()
    for max_tokens in (1, 2, 3, 5, 9):
        for seed in range(40):
            g = generate(model, name, PROMPT, max_tokens, TRUNCATED, seed, load=load)
            assert 1 <= len(g.tokens) <= max_tokens
            assert 0 <= g.draft_n_accepted <= g.draft_n
            assert g.stopped_by_eos == (model.eos in g.tokens)
            if name != "eos-at-round-end" and model.eos in g.tokens:
                assert g.tokens.index(model.eos) == len(g.tokens) - 1
            if len(g.tokens) < max_tokens:
                assert g.stopped_by_eos


def test_the_eos_bug_emits_tokens_after_eos(model):
    past_end = 0
    for seed in range(400):
        tokens = generate(model, "eos-at-round-end", PROMPT, 16, T07, seed).tokens
        past_end += model.eos in tokens[:-1]
    assert past_end > 10


@pytest.mark.parametrize("name", ["load-temp-1.15", "batch-rows-mixed"])
def test_load_modes_are_the_exact_rule_without_load(model, name):
    for seed in range(200):
        assert (
            generate(model, name, PROMPT, 16, T07, seed).tokens
            == generate(model, "exact", PROMPT, 16, T07, seed).tokens
        )
    under_load = [
        generate(model, name, PROMPT, 16, T07, seed, load=SimulatedLoad()).tokens
        for seed in range(50)
    ]
    assert under_load != [
        generate(model, "exact", PROMPT, 16, T07, seed).tokens for seed in range(50)
    ]


# -- deviation ----------------------------------------------------------------------------------------------------


class _ZooRows:
    """`zoo_deviation`'s rows interface over padded completions (a dummy first token: positions 1..m -> 2..m+1)."""

    def __init__(self, model, chain):
        self.model, self.chain = model, chain

    def after(self, prefix):
        return self.model.target_row(PROMPT + list(prefix[1:]), self.chain)


def test_the_vectorised_estimator_is_the_zoos(model):
    tokens = deviation.simulate(model, "temp-verify-1.15", tuple(PROMPT), T07, 6, 1200)
    completions = [[-7] + [int(t) for t in row if t >= 0] for row in tokens]
    rows = _ZooRows(model, T07)
    pre, table = deviation.prefixes(model, tuple(PROMPT), tokens), deviation.rows_of(model, T07)
    assert deviation.plug_in_totals(pre, table).sum() / (1200 * 6) == pytest.approx(
        plug_in_tv(completions, rows, 7), abs=1e-12
    )
    first = np.arange(1200) < 600
    values = deviation.split_values(pre, table, first, min_group=1, fallback=False)
    assert deviation.bernstein_lower_bound(values, 1e-3) == pytest.approx(
        split_lower_bound(completions[:600], completions[600:], rows, 7, 1e-3), abs=1e-12
    )


@pytest.mark.parametrize("name", EXACT)
def test_exact_modes_measure_as_exact(name):
    result = deviation.measure_mode(name, n=10_000).summary
    assert result.lower_bound == 0.0
    # the plug-in's own bias (~0.03 here) plus the McDiarmid margin
    assert result.upper_bound < 0.085


def test_exact_rule_measures_as_exact_with_truncation_in_llama_order():
    result = deviation.measure_mode("exact", n=10_000, chain=LLAMA_ORDER).summary
    assert result.lower_bound == 0.0 and result.upper_bound < 0.085


@pytest.mark.parametrize("name", BUGS)
def test_every_bug_deviates_at_the_default_settings(name):
    result = deviation.measure_mode(name, n=BUG_N.get(name, 8000)).summary
    assert result.lower_bound > 0.0, result


def test_load_temp_deviates_only_under_load():
    assert deviation.measure_mode("load-temp-1.15", n=8000, load=NO_LOAD).summary.lower_bound == 0.0
    assert (
        deviation.measure_mode("load-temp-1.15", n=8000, load=SimulatedLoad()).summary.lower_bound
        > 0.0
    )


# -- the server ---------------------------------------------------------------------------------------------------

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
from exactspec.conformance.engine.collect.client import SamplerChain  # noqa: E402
from exactspec.conformance.engine.serve.synthetic_server import SyntheticServer  # noqa: E402

REQUEST = {
    **SamplerChain(
        temperature=0.7, top_k=10, top_p=0.9, min_p=0.05, max_tokens=16, n_probs=5
    ).request(),
    "prompt": PROMPT,
}


LONG = {"max_tokens": 64, "n_predict": 64, "n_probs": 0}


@pytest.fixture(scope="module")
def sampler_match_server():
    with SyntheticServer("sampler-match") as server:
        yield server


def test_server_answers_in_llama_cpp_shape(sampler_match_server, model):
    body = httpx.post(
        sampler_match_server.base_url + "/completion", json={**REQUEST, "seed": 11}
    ).json()
    tokens = body["tokens"]
    # seed-coupled, llama's order
    assert tokens == generate(model, "plain", PROMPT, 16, LLAMA_ORDER, 11).tokens
    assert body["stop_type"] == ("eos" if tokens[-1] == model.eos else "limit")
    assert body["timings"]["draft_n"] >= body["timings"]["draft_n_accepted"] >= 0
    rows = model.position_rows(PROMPT, tokens, LLAMA_ORDER)
    for token, row, entry in zip(tokens, rows, body["completion_probabilities"]):
        assert entry["id"] == token and entry["prob"] == row[token]
        listed = [(e["id"], e["prob"]) for e in entry["top_probs"]]
        assert (
            listed
            == sorted(
                ((int(i), float(row[i])) for i in np.flatnonzero(row)), key=lambda x: (-x[1], x[0])
            )[:5]
        )
    openai = httpx.post(
        sampler_match_server.base_url + "/v1/completions", json={**REQUEST, "seed": 11}
    ).json()
    assert openai["choices"][0]["finish_reason"] in ("stop", "length")


def test_server_seeds_and_refusals(sampler_match_server):
    url = sampler_match_server.base_url + "/completion"
    a, b = (httpx.post(url, json={**REQUEST, "seed": -1}).json() for _ in range(2))
    assert a["generation_settings"]["seed"] != b["generation_settings"]["seed"]
    for extra in (
        {"repeat_penalty": 1.1},
        {"samplers": ["top_k", "min_p", "top_p", "temperature"]},
        {"prompt": [5, 999]},
        {"max_tokens": 0},
    ):
        response = httpx.post(url, json={**REQUEST, **extra})
        assert response.status_code == 400, extra


def test_plain_server_reports_no_draft_counters():
    with SyntheticServer("plain", profile="flat", vocab=64) as server:
        body = httpx.post(
            server.base_url + "/completion", json={**REQUEST, "prompt": [5, 9], "seed": 1}
        ).json()
        assert "draft_n" not in body["timings"] and len(body["tokens"]) <= 16
        props = httpx.get(server.base_url + "/props").json()["exactspec"]
        assert props["mode"] == "plain" and props["model"]["vocab"] == 64


def test_server_counts_concurrent_requests_and_stops_by_pid():
    with SyntheticServer("load-temp-1.15") as server:

        async def batches():
            async with httpx.AsyncClient(base_url=server.base_url) as client:
                for _ in range(5):
                    await asyncio.gather(
                        *(
                            client.post("/completion", json={**REQUEST, **LONG, "seed": s})
                            for s in range(4)
                        )
                    )

        asyncio.run(batches())
        props = httpx.get(server.base_url + "/props").json()["exactspec"]
        pid = server.pid
    assert props["max_in_flight"] >= 2 and sum(props["in_flight_histogram"].values()) == 20
    assert any(int(n) > 1 for n in props["in_flight_histogram"])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
