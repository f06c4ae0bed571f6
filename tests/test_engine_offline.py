"""The engine level's offline certification (`exactspec certify-samples`), on synthetic sample files drawn
from toy autoregressive laws (numpy only): the sample-file reader, the PIT on top-N + tail reports within the
tolerance, the hard checks, the two certification routes (coupling, law), the void rules, and one verdict per kind
of candidate (correct, shifted first token, wrong at position 3 only, unsupported token, T=0 divergence, never
drafted, exact but not coupled, context-dependent residual)."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from exactspec.conformance.engine import hard
from exactspec.conformance.engine.certify_samples import main as certify_main
from exactspec.conformance.engine.law_stream import categories, pit_value
from exactspec.conformance.engine.engine_level import certify_samples
from exactspec.conformance.core import get_profile, get_level
from exactspec.conformance.engine.samples import (
    Completion,
    Counters,
    Header,
    PrefixProbs,
    read_samples,
    write_samples,
)
from tests.test_conformance_core import SCHEMA, schema_errors

V, EOS, TOP_N, MAX_TOKENS = 6, 5, 4, 5
PROMPTS = {"p0": (11, 12), "p1": (13,)}


# --------------------------------------------------------------------------------------------------
# A toy autoregressive law and the sample files it produces
# --------------------------------------------------------------------------------------------------


def base_law(prompt_id: str, prefix: tuple[int, ...]) -> np.ndarray:
    """Next-token law after `prefix`: a prompt-dependent first row, then a Markov chain; EOS has mass 0.05."""
    if not prefix:
        row = np.array(
            [0.35, 0.25, 0.2, 0.1, 0.05, 0.05]
            if prompt_id == "p0"
            else [0.1, 0.2, 0.3, 0.25, 0.1, 0.05]
        )
    else:
        row = np.roll(np.array([0.4, 0.25, 0.15, 0.1, 0.05, 0.0]), prefix[-1])
        row[EOS] = 0.0
        row = 0.95 * row / row.sum()
        row[EOS] = 0.05
    return row


def sharp_law(prompt_id: str, prefix: tuple[int, ...]) -> np.ndarray:
    """A peaked law (top-1 about 0.93 at every prefix): completions share their prefixes, so a run of a few
    thousand completions bounds a deviation of any shape."""
    if not prefix:
        return np.array(
            [0.9, 0.06, 0.03, 0.006, 0.002, 0.002]
            if prompt_id == "p0"
            else [0.05, 0.92, 0.02, 0.006, 0.002, 0.002]
        )
    row = np.roll(np.array([0.95, 0.03, 0.015, 0.005, 0.0, 0.0]), prefix[-1])
    row[EOS] = 0.0
    row = 0.99 * row / row.sum()
    row[EOS] = 0.01
    return row


def truncated(law, top_k: int):
    """The law after a top-k sampler stage (what a post-sampling report lists)."""

    def warped(pid, prefix):
        row = law(pid, prefix).copy()
        row[np.argsort(-row, kind="stable")[top_k:]] = 0.0
        return row / row.sum()

    return warped


def shifted_at(position: int, law=base_law):
    """`law` with mass 0.15 moved from the most to the least probable token at 1-based `position` only."""

    def warped(pid, prefix):
        row = law(pid, prefix).copy()
        if len(prefix) == position - 1:
            hi, lo = int(np.argmax(row)), int(np.argmin(np.where(row > 0, row, 9)))
            row[hi] -= 0.15
            row[lo] += 0.15
        return row

    return warped


def leaking(law, leak: float = 0.03):
    """`law` that sometimes emits the most probable token OUTSIDE the support (probability 0 in `law`)."""

    def warped(pid, prefix):
        row = law(pid, prefix).copy()
        outside = np.flatnonzero(row == 0)
        row = (1 - leak) * row
        row[outside[0]] += leak
        return row

    return warped


def flattened(law, mix: float = 0.3):
    """`law` mixed with the uniform law on its support at every position (a too-hot candidate)."""

    def warped(pid, prefix):
        row = law(pid, prefix)
        support = row > 0
        return (1 - mix) * row + mix * support / support.sum()

    return warped


def cached(law):
    """`law` with its rows memoised (the files' prefixes repeat a lot)."""
    rows: dict = {}

    def memo(pid, prefix):
        if (pid, prefix) not in rows:
            rows[pid, prefix] = law(pid, prefix)
        return rows[pid, prefix]

    return memo


def report(row: np.ndarray) -> list[list]:
    order = np.argsort(-row, kind="stable")[:TOP_N]
    return [[int(i), float(row[i])] for i in order]


def sample(law, pid: str, seed: int, stream: int, greedy: bool = False) -> list[int]:
    rng = np.random.default_rng([seed, stream, int(pid[1:])])
    tokens: list[int] = []
    while len(tokens) < MAX_TOKENS and (not tokens or tokens[-1] != EOS):
        row = law(pid, tuple(tokens))
        tokens.append(
            int(np.argmax(row))
            if greedy
            else min(V - 1, int(np.searchsorted(np.cumsum(row), rng.random(), side="right")))
        )
    return tokens


RANDOM = {"seeds": {"kind": "random", "space": 2**32 - 1, "key": "ab"}, "concurrency": 4}


def header(role: str, defaults: dict, coupled: bool = False, design: dict | None = None) -> Header:
    spec = (
        {"type": "draft-model", "draft_sampling": "probabilistic", "expect_seed_coupled": coupled}
        if role == "candidate"
        else None
    )
    return Header(
        role=role,
        engine={
            "name": "toy",
            "version": "1",
            "base_url": "http://127.0.0.1:1",
            "flags": [],
            "speculation": spec,
        },
        model={"name": "toy-6", "sha256": None},
        request_defaults=defaults,
        prompts=dict(PROMPTS),
        created="2026-12-01T00:00:00+00:00",
        exactspec_version="test",
        design=design,
    )


def completions(
    law, reported_law, n: int, stream: int, draft_n: int, greedy: bool = False, seed_start: int = 0
) -> list[Completion]:
    out = []
    for pid in PROMPTS:
        for seed in range(seed_start, seed_start + n):
            tokens = sample(law, pid, seed, stream, greedy)
            tops = tuple(
                tuple(map(tuple, report(reported_law(pid, tuple(tokens[:t])))))
                for t in range(len(tokens))
            )
            out.append(
                Completion(
                    prompt_id=pid,
                    seed=seed,
                    tokens=tuple(tokens),
                    top_probs=tops,
                    probs_kind="post_sampling",
                    finish_reason="stop" if tokens[-1] == EOS else "length",
                    timings={"draft_n": draft_n, "draft_n_accepted": draft_n // 2},
                )
            )
    return out


def prefix_records(
    reference_law, cand: list[Completion], depth: int = MAX_TOKENS
) -> list[PrefixProbs]:
    """The reference's reports for every prefix of `cand` (both ends' completions, as the one command asks) up to
    `depth` generated tokens (teacher forcing)."""
    seen: dict[tuple, PrefixProbs] = {}
    for c in cand:
        for t in range(min(depth, len(c.tokens))):
            key = (c.prompt_id, c.tokens[:t])
            if key not in seen:
                row = report(reference_law(c.prompt_id, c.tokens[:t]))
                seen[key] = PrefixProbs(
                    c.prompt_id, c.tokens[:t], tuple(map(tuple, row)), "post_sampling"
                )
    return list(seen.values())


def make_files(
    tmp_path,
    candidate_law=base_law,
    *,
    n: int = 800,
    draft_n: int = 7,
    top_k: int = 0,
    greedy: bool = False,
    mutate=None,
    coupled: bool = False,
    design: dict | None = None,
    reference_law=None,
):
    """Write REF.jsonl and CAND.jsonl; `mutate(list_of_candidate_completions)` edits the candidate's tokens.
    `coupled`: the candidate is drawn at the reference's seeds with the reference's randomness (a seed-coupled
    engine); otherwise at disjoint seeds (or, with a `design`, the same seeds and fresh randomness)."""
    defaults = {
        "temperature": 0.0 if greedy else 1.0,
        "top_k": top_k,
        "top_p": 1.0,
        "min_p": 0.0,
        "max_tokens": MAX_TOKENS,
        "n_probs": TOP_N,
        "post_sampling_probs": True,
    }
    ref_law = cached(reference_law or (truncated(base_law, top_k) if top_k else base_law))
    candidate_law = cached(candidate_law)
    ref = completions(ref_law, ref_law, n, stream=0, draft_n=0, greedy=greedy)
    cand = completions(
        candidate_law,
        ref_law,
        n,
        stream=0 if coupled else 1,
        draft_n=draft_n,
        greedy=greedy,
        seed_start=0 if coupled or design else n,
    )
    if mutate is not None:
        cand = mutate(cand)
    ref_path, cand_path = tmp_path / "ref.jsonl", tmp_path / "cand.jsonl"
    write_samples(
        ref_path,
        header("reference", defaults, design=design),
        ref + prefix_records(ref_law, cand + ref),
    )
    write_samples(cand_path, header("candidate", defaults, coupled, design=design), cand)
    return ref_path, cand_path


#: The quick profile with a target per-token TV of 0.4, which 300 completions per prompt reach: most tests here
#: are about what the checks catch, not about the target (tested on its own below).
QUICK_LOOSE = get_profile("quick").with_settings(
    engine=dataclasses.replace(get_profile("quick").engine, target_tv=0.4)
)


def certify(ref_path, cand_path, profile=QUICK_LOOSE):
    return certify_samples(read_samples(ref_path), read_samples(cand_path), profile)


# --------------------------------------------------------------------------------------------------
# The verdict of each kind of candidate
# --------------------------------------------------------------------------------------------------


def test_correct_candidate_on_a_peaked_law_is_certified_for_any_shape(tmp_path):
    """n = 2000 per prompt of a peaked law; quick (false-fail 1e-3 over 10 checks, target 0.15): the any-shape law
    route reaches the target, so the bare CERTIFIED; the report states n, the rates and each route's bound."""
    result = certify(*make_files(tmp_path, sharp_law, n=2000, reference_law=sharp_law), "quick")
    assert result.verdict == "CERTIFIED", result.reasons
    stat = result.statistical
    assert len(stat) == result.budget["n_checks"] == 2 * 5
    level = result.budget["per_check_false_fail_rate"]
    assert level == pytest.approx(1e-3 / 10) and result.budget["within_budget"]
    assert all(r.result.n > 0 and r.result.false_fail_rate == level for r in stat)
    drift = next(r for r in stat if r.check == "law_drift")
    assert drift.result.n == 2000 and drift.result.details["positions"] == [1, MAX_TOKENS]
    routes = result.extra["engine"]["ruled_out"]["per_prompt"]
    for entry in routes.values():
        assert entry["any_shape_reached"] and entry["best_any_shape"]["route"] == "law_any"
        best = entry["best_any_shape"]
        assert best["bound"] <= 0.15 and best["kind"] == "realised" and best["covered_share"] > 0.9
    assert result.extra["engine"]["ruled_out"]["positions"] == [1, MAX_TOKENS]


def test_correct_candidate_on_an_open_law_is_qualified_and_says_what_would_reach_any_shape(
    tmp_path,
):
    """n = 800 per prompt of a law of about 1.5 nats: the monotone route reaches the quick target, the any-shape
    bound cannot (most prefixes are seen too rarely): QUALIFIED, never the bare word."""
    result = certify(*make_files(tmp_path, n=800), "quick")
    assert result.verdict == "QUALIFIED" and not result.failed
    for entry in result.extra["engine"]["ruled_out"]["per_prompt"].values():
        assert (
            entry["reached"]
            and not entry["any_shape_reached"]
            and entry["best"]["route"] == "law_monotone"
        )
        law_any = next(r for r in entry["routes"] if r["route"] == "law_any")
        assert law_any["bound"] > 0.15 and law_any["covered_share"] < 0.8
    assert len(result.reasons) == 2 and all(
        "monotone law route rules out" in r and "law_any rules out" in r for r in result.reasons
    )
    assert result.extra["engine"]["speculation_evidence"]["draft_n"] == 7 * 1600


def test_a_law_route_short_of_the_target_is_inconclusive_and_says_how_many_completions_would_do(
    tmp_path,
):
    result = certify(*make_files(tmp_path, n=100), "quick")
    assert result.verdict == "INCONCLUSIVE" and not result.failed
    weak = [reason for reason in result.reasons if "short of" in reason]
    assert len(weak) == 2 and "target mean per-token TV 0.15" in weak[0]
    needed = int(
        re.search(r"law_monotone rules out [\d.]+ \(about (\d+) completions", weak[0]).group(1)
    )
    assert 100 < needed < 2000


def _failed(result) -> set[tuple[str, str]]:
    return {(r.case, r.check) for r in result.failed}


def test_shifted_first_token_is_not_exact(tmp_path):
    """Position 1's prefix comes back every completion: the per-prefix check sees a shift there."""
    result = certify(*make_files(tmp_path, shifted_at(1), n=1500))
    assert result.verdict == "NOT_EXACT"
    assert {("p0", "context_law"), ("p1", "context_law")} <= _failed(result)


def test_wrong_only_at_position_3_is_caught(tmp_path):
    result = certify(*make_files(tmp_path, shifted_at(3), n=800))
    assert result.verdict == "NOT_EXACT"
    assert {("p0", "law_drift"), ("p0", "context_law")} & _failed(result)


def _residual_from_p(pid, prefix):
    """A draft sharper than the target after an even last token and flatter after an odd one, with the residual
    drawn from p instead of norm(max(0, p - q)): per-token TV ~0.1, the pooled PIT drift cancels."""
    p = base_law(pid, prefix)
    if not prefix:
        return p
    q = p ** (3.0 if prefix[-1] % 2 == 0 else 0.3)
    q /= q.sum()
    overlap = np.minimum(p, q)
    return overlap + (1 - overlap.sum()) * p


def test_a_residual_whose_direction_changes_with_the_context_is_caught(tmp_path):
    """The review's class: the direction of the deviation depends on the context. Prefixes come back, so the
    context bettors catch it where the pooled drift cannot."""
    result = certify(*make_files(tmp_path, _residual_from_p, n=800))
    assert result.verdict == "NOT_EXACT" and ("p0", "context_law") in _failed(result)


def test_unsupported_token_fails_the_hard_support_check(tmp_path):
    result = certify(*make_files(tmp_path, leaking(truncated(base_law, TOP_N)), n=300, top_k=TOP_N))
    assert result.verdict == "NOT_EXACT"
    support = [r for r in result.records if r.check == "reported_support"]
    assert (
        support
        and not all(r.passed for r in support)
        and all(r.category == "invariant" for r in support)
    )
    assert "outside the" in next(r for r in support if not r.passed).result.message


def test_a_candidate_that_leaks_tokens_its_reference_excludes_fails_near_zero_tokens(tmp_path):
    """The reference reports a truncated law (tail mass 0) without saying top_k, so the support is not known to be
    fully reported and the hard check cannot judge; 3 % of the candidate's tokens fall outside it."""
    ref_path, cand_path = make_files(
        tmp_path, leaking(truncated(base_law, TOP_N)), n=600, top_k=TOP_N
    )
    for path in (ref_path, cand_path):
        _edit(path, edit_header=_defaults(top_k=0))
    result = certify(ref_path, cand_path)
    assert result.verdict == "NOT_EXACT"
    near = [r for r in result.records if r.check == "near_zero_tokens"]
    assert (
        near
        and all(not r.passed for r in near)
        and not any(r.check == "reported_support" for r in result.records)
    )


def test_supported_candidate_under_top_k_passes_the_support_check(tmp_path):
    result = certify(*make_files(tmp_path, truncated(base_law, TOP_N), n=300, top_k=TOP_N))
    assert result.verdict in ("CERTIFIED", "QUALIFIED") and not result.failed, result.reasons
    assert all(r.passed for r in result.records if r.check == "reported_support")


def _diverge_at_seed_23(cand: list[Completion]) -> list[Completion]:
    """The candidate (seeds 20..39 when n = 20) diverges at position 2 of prompt p1's seed 23."""
    out = []
    for c in cand:
        if c.prompt_id == "p1" and c.seed == 23:
            c = replace(c, tokens=(c.tokens[0], (c.tokens[1] + 1) % EOS, *c.tokens[2:]))
        out.append(c)
    return out


def test_greedy_divergence_is_not_exact_and_names_the_first_divergence(tmp_path):
    result = certify(*make_files(tmp_path, n=20, greedy=True, mutate=_diverge_at_seed_23))
    assert result.verdict == "NOT_EXACT" and not result.statistical
    failure = next(r for r in result.failed)
    assert failure.check == "greedy_equality" and failure.case == "p1"
    assert "seed 23: position 2" in failure.result.message
    # a failed prompt rules nothing out
    ruled = result.extra["engine"]["ruled_out"]["per_prompt"]["p1"]
    assert ruled["what"].startswith("nothing") and not ruled["reached"]


def test_greedy_equal_outputs_are_certified(tmp_path):
    result = certify(*make_files(tmp_path, n=20, greedy=True))
    assert result.verdict == "CERTIFIED" and {r.check for r in result.records} == {
        "greedy_equality"
    }


def _vary(every: int, offset: int = 0):
    """Completions whose last token changes at one seed in `every` (an engine whose T = 0 output is not fixed)."""

    def mutate(completions):
        return [
            replace(c, tokens=(*c.tokens[:-1], (c.tokens[-1] + 1) % EOS))
            if (c.seed + offset) % every == 0
            else c
            for c in completions
        ]

    return mutate


def test_greedy_is_judged_against_the_references_own_spread(tmp_path):
    """A reference that varies at T = 0 (one seed in 5): a candidate varying as often passes the spread test
    (Fisher's exact, one-sided); one varying at every other seed fails it."""

    def run(candidate_every: int, name: str):
        (tmp_path / name).mkdir()
        ref_path, cand_path = make_files(
            tmp_path / name, n=200, greedy=True, mutate=_vary(candidate_every, 1)
        )
        _edit(
            ref_path,
            edit_record=lambda r: (
                {**r, "tokens": _vary(5)([_as_completion(r)])[0].tokens}
                if r["kind"] == "completion"
                else r
            ),
        )
        return certify(ref_path, cand_path)

    same = run(5, "same")
    assert same.verdict == "CERTIFIED" and {r.check for r in same.records} == {"greedy_spread"}
    worse = run(2, "worse")
    assert worse.verdict == "NOT_EXACT" and {check for _, check in _failed(worse)} == {
        "greedy_spread"
    }


def _as_completion(record: dict) -> Completion:
    return Completion(record["prompt_id"], record["seed"], tuple(record["tokens"]))


def test_candidate_that_never_drafted_is_inconclusive_with_exit_status_4(tmp_path):
    ref_path, cand_path = make_files(tmp_path, n=800, draft_n=0)
    result = certify(ref_path, cand_path, "quick")
    assert result.verdict == "INCONCLUSIVE" and result.reasons == [
        "speculation not observed: the candidate's draft counters are all 0 or absent"
    ]
    status = certify_main(
        [str(ref_path), str(cand_path), "--profile", "quick", "--out", str(tmp_path / "cert")]
    )
    assert status == 4
    doc = json.loads((tmp_path / "cert" / "certificate.json").read_text())
    assert doc["level"] == "engine" and doc["verdict"] == "INCONCLUSIVE" and doc["passed"] is False
    assert doc["inconclusive"] == doc["reasons"] == result.reasons and doc["voided"] == []
    assert "INCONCLUSIVE" in (tmp_path / "cert" / "CERTIFICATE.md").read_text()
    assert schema_errors(doc, SCHEMA) == []
    assert doc["engine"]["speculation_evidence"]["observed"] is False


def test_counters_read_around_batches_are_speculation_evidence(tmp_path):
    ref_path, cand_path = make_files(tmp_path, n=800, draft_n=0)
    with cand_path.open("a") as handle:
        handle.write(json.dumps(Counters(40, 12, 800, "/metrics").to_dict()) + "\n")
    result = certify(ref_path, cand_path, "quick")
    assert result.verdict == "QUALIFIED", result.reasons
    evidence = result.extra["engine"]["speculation_evidence"]
    assert (
        evidence["draft_n"] == 40
        and evidence["batches"] == 1
        and evidence["acceptance_rate"] == 0.3
    )


def test_reference_whose_reports_disagree_with_its_samples_voids_the_law_routes_never_the_candidate(
    tmp_path,
):
    """Reports from a different law than the one sampled (too hot at every position), the same for both ends: the
    reference's self-check fails, the law routes are void: INCONCLUSIVE. The candidate's paired checks stay valid
    (they compare the two ends' tokens) and pass: an exact candidate is never NOT_EXACT for wrong reports."""
    result = certify(*_lying_files(tmp_path))
    assert ("p0", "reference_law") in _failed(result) and result.verdict == "INCONCLUSIVE"
    assert "p0/reference_law" in result.voided and not any(
        r.check == "reference_law" for r in result.counted
    )
    paired = [
        r
        for r in result.counted
        if r.check in ("law_drift", "law_lr", "context_law", "near_zero_tokens")
    ]
    assert len(paired) == 8 and all(r.passed for r in paired)
    assert any("disagree with its reports" in reason for reason in result.reasons)


def _lying_files(tmp_path):
    lying = flattened(base_law, 0.6)
    defaults = {"temperature": 1.0, "top_k": 0, "max_tokens": MAX_TOKENS, "n_probs": TOP_N}
    ref = completions(base_law, lying, 400, stream=0, draft_n=0)
    cand = completions(base_law, lying, 400, stream=1, draft_n=5, seed_start=400)
    write_samples(
        tmp_path / "r.jsonl", header("reference", defaults), ref + prefix_records(lying, cand + ref)
    )
    write_samples(tmp_path / "c.jsonl", header("candidate", defaults), cand)
    return tmp_path / "r.jsonl", tmp_path / "c.jsonl"


def test_teacher_forced_reports_beyond_the_tolerance_from_decode_time_void_the_reports(tmp_path):
    """The reference's reports while sampling and when teacher-forced differ (0.01 moved between its top two after
    one prefix): the report tolerance premise is contradicted, the checks that read the reports are void."""
    ref_path, cand_path = make_files(tmp_path, n=300)

    def move(record):
        if (
            record["kind"] == "prefix_probs"
            and record["prompt_id"] == "p0"
            and len(record["prefix_tokens"]) == 1
        ):
            record["top_probs"][0][1] -= 0.01
            record["top_probs"][1][1] += 0.01
        return record

    _edit(ref_path, edit_record=move)
    result = certify(ref_path, cand_path)
    assert (
        result.verdict == "INCONCLUSIVE" and "p0" in result.invalid and "p1" not in result.invalid
    )
    assert any("premise is contradicted" in reason for reason in result.reasons)
    assert result.extra["engine"]["ruled_out"]["per_prompt"]["p0"]["routes"] == []


def test_coupling_certifies_a_seed_coupled_engine_from_random_seeds(tmp_path):
    """Random seeds (design), the same at both ends, outputs equal seed for seed: the coupling route reaches the
    standard target (0.05) with 330 seeds (320 needed at beta / 2), where the law route could not."""
    result = certify(*make_files(tmp_path, n=330, coupled=True, design=RANDOM), "standard")
    assert result.verdict == "CERTIFIED", result.reasons
    for entry in result.extra["engine"]["ruled_out"]["per_prompt"].values():
        best = entry["best_any_shape"]
        assert best["route"] == "coupling" and best["mismatches"] == 0
        assert best["bound"] <= 0.05 and best["kind"] == "expected"
        law = next(r for r in entry["routes"] if r["route"] == "law_monotone")
        assert law["bound"] > 0.05


def test_consecutive_seeds_give_no_coupling_route(tmp_path):
    result = certify(*make_files(tmp_path, n=300, coupled=True), "standard")
    assert all(
        r["route"] in ("law_any", "law_monotone")
        for e in result.extra["engine"]["ruled_out"]["per_prompt"].values()
        for r in e["routes"]
    )


def test_an_exact_engine_that_is_not_seed_coupled_declared_coupled_is_never_not_exact(tmp_path):
    """Every seed mismatches (fresh randomness at the candidate): the coupling is disproved, exactness is not.
    The law checks decide (here: CERTIFIED at quick, a peaked law); no record fails."""
    ref_path, cand_path = make_files(
        tmp_path, sharp_law, n=2000, design=RANDOM, reference_law=sharp_law
    )
    _edit(
        cand_path,
        edit_header=lambda h: {
            **h,
            "engine": {
                **h["engine"],
                "speculation": {**h["engine"]["speculation"], "expect_seed_coupled": True},
            },
        },
    )
    result = certify(ref_path, cand_path, "quick")
    assert result.verdict == "CERTIFIED" and not result.failed
    coupling = next(
        r
        for e in result.extra["engine"]["ruled_out"]["per_prompt"].values()
        for r in e["routes"]
        if r["route"] == "coupling"
    )
    assert coupling["mismatches"] > 150 and coupling["needed"] is None
    assert any("seed coupling" in note and "disproved" in note for note in result.notes)


def test_seed_coupling_evidence_and_determinism_name_the_divergence():
    ref = [Completion("p0", seed, (1, 2, seed)) for seed in range(4)]
    assert hard.coupling_pairs(ref, list(ref)) == (4, 0, None)
    cand = [*ref[:2], Completion("p0", 2, (1, 3, 2)), ref[3]]
    shared, mismatched, first = hard.coupling_pairs(ref, cand)
    assert (shared, mismatched) == (4, 1) and "position 2: reference 2, candidate 3" in first[
        "what"
    ]
    assert hard.determinism(ref)["seed_deterministic"] is None  # no repeat records: unknown
    repeats = ref + [Completion("p0", 1, (1, 2, 1), repeat=1), Completion("p0", 3, (0,), repeat=1)]
    assert hard.determinism(repeats) == {
        "repeats": 2,
        "seed_deterministic": False,
        "differing_seeds": [3],
    }


def test_speculation_evidence_sums_the_draft_counters():
    runs = [
        Completion("p0", s, (1,), timings={"draft_n": 4, "draft_n_accepted": 3}) for s in range(3)
    ]
    evidence = hard.speculation_evidence(runs + [Completion("p0", 9, (1,))])
    assert (
        evidence["observed"] and evidence["draft_n"] == 12 and evidence["acceptance_rate"] == 0.75
    )
    assert evidence["completions_reporting"] == 3
    assert not hard.speculation_evidence([Completion("p0", 0, (1,), timings={"draft_n": 0})])[
        "observed"
    ]


def test_pit_values_place_unlisted_tokens_in_the_tail_and_stay_in_the_unit_interval():
    top = ((4, 0.5), (2, 0.3))  # tail mass 0.2 holds every other token
    cats = categories(top)
    assert cats.ids == (4, 2) and cats.probs.tolist() == pytest.approx([0.5, 0.3, 0.2])
    assert pit_value(cats, 7, 0.5) == (2, pytest.approx(0.9)) and pit_value(cats, 4, 1.0) == (
        0,
        pytest.approx(0.5),
    )
    assert cats.near_zero_set() == () and cats.stratum == 1
    # sums over 1: tail reported 0, envelope still > 0
    high = categories(((0, 0.6 + 4e-6), (1, 0.4 + 4e-6)))
    assert high.probs[-1] == 0.0 and high.envelope[-1] > 0 and pit_value(high, 5, 0.3)[1] == 1.0


# --------------------------------------------------------------------------------------------------
# The sample files, the registry, the command line
# --------------------------------------------------------------------------------------------------


def test_samples_round_trip(tmp_path):
    ref_path, cand_path = make_files(tmp_path, n=5)
    ref, cand = read_samples(ref_path), read_samples(cand_path)
    assert ref.header.role == "reference" and cand.header.speculation["type"] == "draft-model"
    assert len(cand.completions) == 10 and ref.prefix_probs
    write_samples(tmp_path / "again.jsonl", cand.header, cand.completions)
    assert read_samples(tmp_path / "again.jsonl").completions == cand.completions


@pytest.mark.parametrize(
    "line, field",
    [
        ({"kind": "completion", "prompt_id": "p0", "seed": 1, "tokens": [1, -2]}, "tokens"),
        ({"kind": "completion", "prompt_id": "nope", "seed": 1, "tokens": [1]}, "prompt_id"),
        ({"kind": "completion", "prompt_id": "p0", "seed": "1", "tokens": [1]}, "seed"),
        (
            {
                "kind": "prefix_probs",
                "prompt_id": "p0",
                "prefix_tokens": [],
                "top_probs": [[1, 0.7], [2, 0.6]],
                "probs_kind": "post_sampling",
            },
            "top_probs",
        ),
        ({"kind": "mystery"}, "kind"),
    ],
)
def test_invalid_record_names_file_line_and_field(tmp_path, line, field):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(header("reference", {}).to_dict()) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(ValueError, match=rf"bad\.jsonl: line 2: field '{field}'"):
        read_samples(path)


def test_mismatched_or_swapped_files_are_usage_errors(tmp_path, capsys):
    ref_path, cand_path = make_files(tmp_path, n=5)
    assert certify_main([str(cand_path), str(ref_path), "--out", str(tmp_path / "o")]) == 2
    assert "expected 'reference'" in capsys.readouterr().err
    (tmp_path / "broken.jsonl").write_text("{not json\n")
    assert (
        certify_main([str(tmp_path / "broken.jsonl"), str(cand_path), "--out", str(tmp_path / "o")])
        == 2
    )


def test_cli_exit_status_0_and_1(tmp_path):
    (tmp_path / "good").mkdir(), (tmp_path / "bad").mkdir()
    # any shape at quick
    good = make_files(tmp_path / "good", sharp_law, n=2000, reference_law=sharp_law)
    assert certify_main([*map(str, good), "--profile", "quick", "--out", str(tmp_path / "c0")]) == 0
    bad = make_files(tmp_path / "bad", shifted_at(3), n=800)
    assert certify_main([*map(str, bad), "--profile", "quick", "--out", str(tmp_path / "c1")]) == 1
    (tmp_path / "open").mkdir()
    qualified = make_files(tmp_path / "open", n=800)  # the monotone class only: QUALIFIED, exit 5
    assert (
        certify_main([*map(str, qualified), "--profile", "quick", "--out", str(tmp_path / "c5")])
        == 5
    )


def test_every_declared_engine_check_has_a_distinct_name_and_profile():
    checks = get_level("engine").checks
    assert len({c.name for c in checks}) == len(checks)
    for name in ("quick", "standard", "full"):
        settings = get_profile(name).to_dict("engine")["settings"]
        # every position asked is read
        assert "positions" not in settings and 0 < settings["target_tv"] < 0.2
    assert {
        plan.test for check in checks for plan in check.plan(_any_case(), get_profile("quick"))
    } == {"sequential", "fisher"}


def _any_case():
    from exactspec.conformance.engine.cases import EngineCase

    return EngineCase(name="x", greedy=False, positions=4)


_BLOCKED_RUN = """
import importlib.abc, sys
attempts = []
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "httpx", "transformers"):
            attempts.append(name)
            raise ImportError(name + " is blocked in this test")
        return None
sys.meta_path.insert(0, Block())
from exactspec.cli import main
status = main(["certify-samples", sys.argv[1], sys.argv[2], "--profile", "quick", "--out", sys.argv[3]])
assert status == 5, status
assert not attempts, attempts
print("BLOCKED-OK")
"""


def test_certify_samples_runs_without_torch_and_httpx(tmp_path):
    ref_path, cand_path = make_files(tmp_path, n=800)
    done = subprocess.run(
        [sys.executable, "-c", _BLOCKED_RUN, str(ref_path), str(cand_path), str(tmp_path / "c")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0 and "BLOCKED-OK" in done.stdout, (
        done.stdout[-2000:] + done.stderr[-2000:]
    )


# --------------------------------------------------------------------------------------------------
# Sample files that cannot mislead (#23): each edit of a valid pair is an exit-2 error naming the file, line
# and field, or an INCONCLUSIVE with its reason
# --------------------------------------------------------------------------------------------------


def _edit(path, edit_header=None, edit_record=None):
    """Rewrite a sample file through `edit_header(dict)` / `edit_record(dict) -> dict | None (drop)`."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    head = edit_header(lines[0]) or lines[0] if edit_header else lines[0]
    body = [r for r in ((edit_record(r) if edit_record else r) for r in lines[1:]) if r is not None]
    path.write_text("".join(json.dumps(r) + "\n" for r in [head, *body]))


def _defaults(**changes):
    def edit(header):
        header["request_defaults"].update(changes)
        return header

    return edit


@pytest.mark.parametrize(
    "change",
    [
        {"ignore_eos": True},
        {"mirostat": 2},
        {"dry_multiplier": 0.8},
        {"samplers": ["temperature", "top_k"]},
        {"some_new_engine_knob": 1},
    ],
)
def test_law_changing_parameters_that_differ_are_a_usage_error(tmp_path, change):
    ref_path, cand_path = make_files(tmp_path, n=50)
    _edit(cand_path, edit_header=_defaults(**change), edit_record=lambda r: {**r, "request": {}})
    code = certify_main(
        [str(ref_path), str(cand_path), "--profile", "quick", "--out", str(tmp_path / "c")]
    )
    assert code == 2
    with pytest.raises(ValueError, match=f"request_defaults.*{next(iter(change))}"):
        certify(ref_path, cand_path)


def test_report_only_parameters_may_differ(tmp_path):
    ref_path, cand_path = make_files(tmp_path, n=300)
    _edit(cand_path, edit_header=_defaults(n_probs=20, post_sampling_probs=False))
    assert certify(ref_path, cand_path).verdict == "QUALIFIED"


def test_a_record_whose_request_is_not_its_headers_law_names_file_line_and_field(tmp_path):
    ref_path, cand_path = make_files(tmp_path, n=50)
    _edit(cand_path, edit_record=lambda r: {**r, "request": {"temperature": 1.3}})
    with pytest.raises(
        ValueError, match=r"cand.jsonl: line 2: field 'request.temperature': 1.3, but the header"
    ):
        read_samples(cand_path)


def test_resume_is_refused_across_engine_builds():
    from exactspec.conformance.engine.sample_store import design_differences

    old = header("candidate", {"temperature": 1.0})
    new = replace(old, engine={**old.engine, "version": "2"})
    assert design_differences(old, new) == ["engine.version"]


def test_a_dropped_prompt_is_inconclusive(tmp_path):
    ref_path, cand_path = make_files(tmp_path, n=300)
    _edit(cand_path, edit_record=lambda r: None if r.get("prompt_id") == "p1" else r)
    result = certify(ref_path, cand_path)
    assert result.verdict == "INCONCLUSIVE"
    assert any(reason.startswith("p1: dropped") for reason in result.reasons)


def test_law_checks_that_cannot_run_are_inconclusive(tmp_path):
    ref_path, cand_path = make_files(tmp_path, n=300)
    _edit(
        ref_path,
        edit_record=lambda r: {**r, "probs_kind": "raw"} if r["kind"] == "prefix_probs" else r,
    )
    _edit(ref_path, edit_header=_defaults(temperature=0.7))
    _edit(cand_path, edit_header=_defaults(temperature=0.7))
    result = certify(ref_path, cand_path)
    assert result.verdict == "INCONCLUSIVE" and "law_drift" not in {r.check for r in result.records}
    assert any(
        "the law checks did not run" in reason and "raw" in reason for reason in result.reasons
    )


def test_reports_wrong_at_a_deeper_prefix_void_the_checks_instead_of_blaming_the_candidate(
    tmp_path,
):
    """Both samples exact, but the reference misreports every distribution after a prefix of length >= 1 (its
    top two probabilities swapped) and nowhere else, at both ends alike: its own tokens fail `reference_law`, so the
    law routes and the support check are void and the run is INCONCLUSIVE, never NOT_EXACT: the candidate's paired
    checks compare both ends' tokens against the same wrong reports and pass."""
    ref_path, cand_path = make_files(tmp_path, n=600)

    def misreport(record):
        if record["kind"] == "prefix_probs" and record["prefix_tokens"]:
            top = record["top_probs"]
            top[0][1], top[1][1] = top[1][1], top[0][1]
        if record["kind"] == "completion":
            for row in record["top_probs"][1:]:
                row[0][1], row[1][1] = row[1][1], row[0][1]
        return record

    _edit(ref_path, edit_record=misreport)
    result = certify(ref_path, cand_path)
    checks = {(r.case, r.check): r for r in result.records}
    assert not checks[("p0", "reference_law")].passed
    assert result.verdict == "INCONCLUSIVE" and "p0/reference_law" in result.voided
    assert all(
        checks[("p0", name)].passed
        for name in ("law_drift", "law_lr", "context_law", "near_zero_tokens")
    )
    assert not result.failed or all(f"{r.case}/{r.check}" in result.voided for r in result.failed)


# --------------------------------------------------------------------------------------------------
# Reports within the tolerance never fail a check; beyond it they are an input error
# --------------------------------------------------------------------------------------------------


def _full_reports_rounded_high(by: float):
    """Edit the reference's prefix_probs records: list all V tokens, each `by` high (so the list sums to over 1
    and the reported tail is 0)."""
    law = cached(base_law)

    def edit(record):
        if record.get("kind") == "prefix_probs":
            row = law(record["prompt_id"], tuple(record["prefix_tokens"]))
            record["top_probs"] = [
                [int(i), float(row[i]) + by] for i in np.argsort(-row, kind="stable")
            ]
        return record

    return edit


def test_reports_rounded_high_and_a_token_they_do_not_list_never_fail_a_check(tmp_path):
    """Every report sums to 1 + 6e-6 (tail reported 0) and one candidate token is unlisted: a PIT value of 1, within
    the slack, and the tail's envelope is positive, so no bettor loses everything on it."""
    ref_path, cand_path = make_files(tmp_path, n=300)
    _edit(ref_path, edit_record=_full_reports_rounded_high(1e-6))

    def unlisted_second_token(record):
        if (
            record.get("kind") == "completion"
            and record["seed"] == 300
            and record["prompt_id"] == "p0"
        ):
            record["tokens"] = [record["tokens"][0], 77]
            record["top_probs"] = record["top_probs"][:2]
        return record

    _edit(cand_path, edit_record=unlisted_second_token)
    result = certify(ref_path, cand_path)
    assert not result.failed, result.reasons
    monotone = next(
        r
        for r in result.extra["engine"]["ruled_out"]["per_prompt"]["p0"]["routes"]
        if r["route"] == "law_monotone"
    )
    assert 0 < monotone["bound"] < 1


def test_a_report_beyond_the_rounding_tolerance_is_an_error_naming_file_line_and_field(tmp_path):
    ref_path, cand_path = make_files(tmp_path, n=20)
    seen = []

    def one_report_over(record):
        if record.get("kind") == "prefix_probs" and not seen:
            seen.append(1)
            # 0.9 + 0.08 + tail 0.1: 1.08
            record["top_probs"] = [[i, p + 0.02] for i, p in record["top_probs"]]
            record["top_probs"].append([5, 0.1])
        return record

    _edit(ref_path, edit_record=one_report_over)
    with pytest.raises(
        ValueError,
        match=r"ref.jsonl: line \d+: field 'top_probs': .*more than the report tolerance",
    ):
        read_samples(ref_path)
    assert certify_main([str(ref_path), str(cand_path), "--out", str(tmp_path / "c")]) == 2


def test_the_certificate_states_each_prompts_entropy(tmp_path):
    """Prompt entropy from the reference's reports along its own completions (tail lumped: a lower bound):
    between the entropy of the reported top-N alone and log(V); p1's first row is the more open one."""
    result = certify(*make_files(tmp_path, n=300))
    entropy = result.extra["engine"]["prompt_entropy_nats"]
    assert set(entropy) == set(PROMPTS) and all(0.5 < h < np.log(V) for h in entropy.values())
    from exactspec.conformance.engine.certificate import to_markdown

    doc = {"engine": result.extra["engine"]}
    line = next(
        x
        for x in to_markdown({**_minimal_doc(), **doc}).splitlines()
        if x.startswith("Prompt entropy")
    )
    assert "p0 " in line and "p1 " in line


def _minimal_doc() -> dict:
    return {
        "impl": "x",
        "verdict": "CERTIFIED",
        "verdict_text": "",
        "profile": {"promise": ""},
        "budget": {
            "total_false_fail": 1e-3,
            "n_checks": 0,
            "per_check_false_fail_rate": 1e-3,
            "false_fail_rate_spent": 0.0,
        },
        "checks": [],
    }


def test_tokens_after_an_end_token_fail_the_hard_check(tmp_path):
    """The reference stops on EOS (token 5); a candidate that goes on after one (an engine checking for EOS only at
    a round's end) fails `tokens_past_end`, naming the seed and position, whatever its per-token deviation."""

    def leak_past_eos(cand):
        first = next(
            i
            for i, c in enumerate(cand)
            if c.prompt_id == "p0" and c.tokens[-1] == EOS and len(c.tokens) < MAX_TOKENS
        )
        return [
            replace(c, tokens=(*c.tokens, 0), top_probs=None, finish_reason="length")
            if i == first
            else c
            for i, c in enumerate(cand)
        ]

    result = certify(*make_files(tmp_path, n=300, mutate=leak_past_eos))
    assert result.verdict == "NOT_EXACT" and ("p0", "tokens_past_end") in _failed(result)
    failure = next(r for r in result.failed if r.check == "tokens_past_end")
    assert failure.category == "invariant" and "token 5" in failure.result.message
    (tmp_path / "clean").mkdir()
    clean = certify(*make_files(tmp_path / "clean", n=300))
    assert [r.passed for r in clean.records if r.check == "tokens_past_end"] == [True, True]


# --------------------------------------------------------------------------------------------------
# Common-mode report errors (both ends read against the same wrong reports) never make an exact candidate
# NOT_EXACT: the candidate's checks compare the two ends (permutation e-processes, proofs C18)
# --------------------------------------------------------------------------------------------------


def tempered(law, factor: float):
    """`law` at a temperature `factor` times higher (each row to the power 1 / factor, normalised)."""

    def warped(pid, prefix):
        row = law(pid, prefix) ** (1.0 / factor)
        return row / row.sum()

    return warped


def _common_mode_files(tmp_path, candidate_law, n: int, stream_seed: int):
    """Both ends sample `candidate_law` / base_law; the reports are base_law at a temperature 1.04 times higher."""
    wrong = cached(tempered(base_law, 1.04))
    defaults = {"temperature": 1.0, "top_k": 0, "max_tokens": MAX_TOKENS, "n_probs": TOP_N}
    ref = completions(base_law, wrong, n, stream=10 * stream_seed, draft_n=0)
    cand = completions(
        cached(candidate_law), wrong, n, stream=10 * stream_seed + 1, draft_n=5, seed_start=n
    )
    write_samples(
        tmp_path / "r.jsonl", header("reference", defaults), ref + prefix_records(wrong, cand + ref)
    )
    write_samples(tmp_path / "c.jsonl", header("candidate", defaults), cand)
    return tmp_path / "r.jsonl", tmp_path / "c.jsonl"


@pytest.mark.parametrize("run", range(6))
def test_an_exact_candidate_with_common_mode_report_errors_is_never_not_exact(tmp_path, run):
    """The audit's case: reports off by a common temperature factor 1.04, an exact candidate. Six independent
    runs (seeded), 1500 completions a prompt, at the standard profile: never NOT_EXACT; the reference's self-check
    sees the error and the run is INCONCLUSIVE (no route can certify on wrong reports)."""
    result = certify(*_common_mode_files(tmp_path, base_law, 1500, run), "standard")
    assert result.verdict != "NOT_EXACT" and not [r for r in result.counted if not r.passed], (
        result.reasons
    )
    assert result.verdict == "INCONCLUSIVE"


def test_a_buggy_candidate_is_still_not_exact_when_the_reports_are_wrong_for_both(tmp_path):
    """The same wrong reports, a candidate at a temperature 1.3 times higher than the reference: the paired checks
    compare the ends, so the bug is caught whatever the reports say."""
    result = certify(*_common_mode_files(tmp_path, tempered(base_law, 1.3), 1500, 99), "standard")
    assert result.verdict == "NOT_EXACT", result.reasons
    assert {"law_lr", "law_drift"} & {check for _, check in _failed(result)}


# --------------------------------------------------------------------------------------------------
# A pooled run: many prompts, few completions each, certified together
# --------------------------------------------------------------------------------------------------


def test_a_pooled_run_certifies_the_prompt_set_where_each_prompt_alone_falls_short(tmp_path):
    """A seed-coupled engine, two prompts with 170 random seeds each: alone, each prompt's coupling route misses the
    standard target (about 320 seeds needed); pooled, the 340 seeds of the prompt set reach it. The hard checks
    still run per prompt; the statistics once."""
    ref_path, cand_path = make_files(tmp_path, n=170, coupled=True, design=RANDOM)
    alone = certify(ref_path, cand_path, "standard")
    pooled = certify_samples(
        read_samples(ref_path), read_samples(cand_path), "standard", pooled=True
    )
    assert alone.verdict != "CERTIFIED" and pooled.verdict == "CERTIFIED", pooled.reasons
    ((name, entry),) = pooled.extra["engine"]["ruled_out"]["per_prompt"].items()
    assert name == "pooled (2 prompts)" and entry["best_any_shape"]["route"] == "coupling"
    assert entry["best_any_shape"]["seeds"] == 340 and pooled.extra["engine"]["pooled"]
    assert {r.check for r in pooled.records if r.case == "p0"} == {"tokens_past_end"}
    assert {r.check for r in pooled.statistical} == {
        "law_drift",
        "law_lr",
        "context_law",
        "near_zero_tokens",
        "reference_law",
    }
    assert pooled.budget["n_checks"] == 5


def test_a_pooled_run_still_catches_a_bug_in_one_prompt(tmp_path):
    """The candidate is wrong only on p1 (mass moved at position 3): pooled, it is NOT_EXACT."""

    def wrong_on_p1(pid, prefix):
        return shifted_at(3)(pid, prefix) if pid == "p1" else base_law(pid, prefix)

    ref_path, cand_path = make_files(tmp_path, wrong_on_p1, n=800)
    result = certify_samples(
        read_samples(ref_path), read_samples(cand_path), QUICK_LOOSE, pooled=True
    )
    assert result.verdict == "NOT_EXACT", result.reasons


def test_reference_tokens_without_a_teacher_forced_report_void_the_paired_checks(tmp_path):
    """The candidate is wrong at position 3 (NOT_EXACT when both ends are read alike); drop the teacher-forced
    reports of the prefixes only the reference visited: the two ends are no longer read alike, so the paired checks
    are void and the run INCONCLUSIVE, naming the missing reports."""
    ref_path, cand_path = make_files(tmp_path, shifted_at(3), n=800)
    candidate_prefixes = {
        (c.prompt_id, c.tokens[:t])
        for c in read_samples(cand_path).completions
        for t in range(len(c.tokens))
    }
    _edit(
        ref_path,
        edit_record=lambda r: (
            None
            if r["kind"] == "prefix_probs"
            and (r["prompt_id"], tuple(r["prefix_tokens"])) not in candidate_prefixes
            else r
        ),
    )
    result = certify(ref_path, cand_path)
    assert result.verdict == "INCONCLUSIVE" and {"p0/law_lr", "p1/law_lr"} <= set(result.voided)
    assert any("no teacher-forced report" in reason for reason in result.reasons)


def _labelled(
    completions_list: list[Completion], loaded: list[Completion] | None = None
) -> list[Completion]:
    """Every 4th seed's completion labelled "serial" (sampled alone), the others "loaded"; with `loaded`, the loaded
    ones taken from that list instead (the same seeds drawn from another law: a bug under load only)."""
    other = {(c.prompt_id, c.seed): c for c in loaded or []}
    out = []
    for i, c in enumerate(sorted(completions_list, key=lambda c: (c.prompt_id, c.seed))):
        serial = (c.seed % 4) == 0
        source = c if serial or not loaded else other[(c.prompt_id, c.seed)]
        out.append(replace(source, load="serial" if serial else "loaded"))
    return out


def test_a_bug_only_under_load_fails_the_load_check_and_an_exact_candidate_passes_it(tmp_path):
    """The candidate's completions sampled alone follow the law; under load it is hotter (temperature x 1.6): the
    load check compares the two directly (a quarter of the seeds sampled alone) and names the load; with every
    completion exact it passes."""
    hot = cached(tempered(base_law, 1.6))
    hot_completions = completions(hot, base_law, 1600, stream=1, draft_n=5, seed_start=1600)
    ref_path, cand_path = make_files(
        tmp_path, n=1600, mutate=lambda cand: _labelled(cand, hot_completions)
    )
    result = certify(ref_path, cand_path)
    assert result.verdict == "NOT_EXACT", result.reasons
    load = [r for r in result.records if r.check == "load_law"]
    assert (
        load
        and any(not r.passed for r in load)
        and "depends on the load" in next(r for r in load if not r.passed).result.message
    )
    (tmp_path / "exact").mkdir()
    clean = certify(*make_files(tmp_path / "exact", n=600, mutate=_labelled))
    assert [r.passed for r in clean.records if r.check == "load_law"] == [
        True,
        True,
    ] and not clean.failed
