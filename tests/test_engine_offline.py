"""The engine level's offline certification (`exactspec certify-samples`), on synthetic sample files drawn
from toy autoregressive laws (numpy only): the sample-file reader, the permutation test's invariances and
calibration, the randomized PIT on top-N + tail reports, the hard checks, and one verdict per kind of
candidate (correct, shifted first token, wrong at position 3 only, unsupported token, T=0 divergence,
never drafted)."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from exactspec.conformance.engine import hard, pit
from exactspec.conformance.engine.certify_samples import main as certify_main
from exactspec.conformance.engine.level import certify_samples
from exactspec.conformance.core import get_profile, get_level
from exactspec.conformance.engine.samples import Completion, Header, PrefixProbs, read_samples, write_samples
from exactspec.stat_tests import pit_uniformity_test
from exactspec.stat_tests.permutation import permutation_homogeneity, pooled_bins
from tests.test_conformance_core import SCHEMA, schema_errors

V, EOS, TOP_N, MAX_TOKENS = 6, 5, 4, 5
PROMPTS = {"p0": (11, 12), "p1": (13,)}


# --------------------------------------------------------------------------------------------------
# A toy autoregressive law and the sample files it produces
# --------------------------------------------------------------------------------------------------

def base_law(prompt_id: str, prefix: tuple[int, ...]) -> np.ndarray:
    """Next-token law after `prefix`: a prompt-dependent first row, then a Markov chain; EOS has mass 0.05."""
    if not prefix:
        row = np.array([.35, .25, .2, .1, .05, .05] if prompt_id == "p0" else [.1, .2, .3, .25, .1, .05])
    else:
        row = np.roll(np.array([0.4, 0.25, 0.15, 0.1, 0.05, 0.0]), prefix[-1])
        row[EOS] = 0.0
        row = 0.95 * row / row.sum()
        row[EOS] = 0.05
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
        tokens.append(int(np.argmax(row)) if greedy else min(V - 1, int(np.searchsorted(np.cumsum(row), rng.random(),
                                                                                        side="right"))))
    return tokens


def header(role: str, defaults: dict, coupled: bool = False) -> Header:
    spec = {"type": "draft-model", "draft_sampling": "probabilistic", "expect_seed_coupled": coupled} \
        if role == "candidate" else None
    return Header(role=role, engine={"name": "toy", "version": "1", "base_url": "http://127.0.0.1:1", "flags": [],
                                     "speculation": spec},
                  model={"name": "toy-6", "sha256": None}, request_defaults=defaults, prompts=dict(PROMPTS),
                  created="2026-12-01T00:00:00+00:00", exactspec_version="test")


def completions(law, reported_law, n: int, stream: int, draft_n: int, greedy: bool = False,
                seed_start: int = 0) -> list[Completion]:
    out = []
    for pid in PROMPTS:
        for seed in range(seed_start, seed_start + n):
            tokens = sample(law, pid, seed, stream, greedy)
            tops = tuple(tuple(map(tuple, report(reported_law(pid, tuple(tokens[:t]))))) for t in range(len(tokens)))
            out.append(Completion(prompt_id=pid, seed=seed, tokens=tuple(tokens), top_probs=tops,
                                  probs_kind="post_sampling", finish_reason="stop" if tokens[-1] == EOS else "length",
                                  timings={"draft_n": draft_n, "draft_n_accepted": draft_n // 2}))
    return out


def prefix_records(reference_law, cand: list[Completion], depth: int = 4) -> list[PrefixProbs]:
    """The reference's reports for every candidate prefix up to `depth` generated tokens (teacher forcing)."""
    seen: dict[tuple, PrefixProbs] = {}
    for c in cand:
        for t in range(min(depth, len(c.tokens))):
            key = (c.prompt_id, c.tokens[:t])
            if key not in seen:
                row = report(reference_law(c.prompt_id, c.tokens[:t]))
                seen[key] = PrefixProbs(c.prompt_id, c.tokens[:t], tuple(map(tuple, row)), "post_sampling")
    return list(seen.values())


def make_files(tmp_path, candidate_law=base_law, *, n: int = 800, draft_n: int = 7, top_k: int = 0,
               greedy: bool = False, mutate=None):
    """Write REF.jsonl and CAND.jsonl; `mutate(list_of_candidate_completions)` edits the candidate's tokens."""
    defaults = {"temperature": 0.0 if greedy else 1.0, "top_k": top_k, "top_p": 1.0, "min_p": 0.0,
                "max_tokens": MAX_TOKENS, "n_probs": TOP_N, "post_sampling_probs": True}
    ref_law = cached(truncated(base_law, top_k) if top_k else base_law)
    candidate_law = cached(candidate_law)
    ref = completions(ref_law, ref_law, n, stream=0, draft_n=0, greedy=greedy)
    cand = completions(candidate_law, ref_law, n, stream=1, draft_n=draft_n, greedy=greedy, seed_start=n)  # disjoint
    if mutate is not None:
        cand = mutate(cand)
    ref_path, cand_path = tmp_path / "ref.jsonl", tmp_path / "cand.jsonl"
    write_samples(ref_path, header("reference", defaults), ref + prefix_records(ref_law, cand))
    write_samples(cand_path, header("candidate", defaults), cand)
    return ref_path, cand_path


#: The quick profile with a target mean per-token TV of 0.4, which 300 completions per prompt reach:
#: most tests here are about what the checks catch, not about the target (tested on its own below).
QUICK_LOOSE = dataclasses.replace(get_profile("quick"), engine=dataclasses.replace(get_profile("quick").engine,
                                                                                   target_tv=0.4))


def certify(ref_path, cand_path, profile=QUICK_LOOSE):
    return certify_samples(read_samples(ref_path), read_samples(cand_path), profile)


# --------------------------------------------------------------------------------------------------
# The verdict of each kind of candidate
# --------------------------------------------------------------------------------------------------

def test_correct_candidate_is_certified_at_quick_and_the_report_states_n_level_and_detectable_tv(tmp_path):
    result = certify(*make_files(tmp_path, n=1900), "quick")
    assert result.verdict == "CERTIFIED", result.reasons
    stat = result.statistical
    assert len(stat) == result.budget["n_checks"] == 2 * (4 + 1 + 1 + 1 + 1)
    level = result.budget["per_check_false_fail_rate"]
    assert level == pytest.approx(1e-3 / 16) and result.budget["within_budget"]
    for record in stat:
        assert record.result.n > 0 and record.result.false_fail_rate == level
        details = record.result.details
        assert np.isfinite(record.result.detectable_tv) or details.get("detectable_kolmogorov") or \
            details.get("detectable_rate")
    pit_record = next(r for r in stat if r.check == "pit_ks")
    assert pit_record.result.details["completions"] == 1900 and pit_record.result.details["positions"] == [2, 4]
    assert pit_record.result.details["detectable_mean_token_tv"] <= 0.15
    assert result.extra["engine"]["speculation_evidence"]["draft_n"] == 7 * 3800


def test_a_pit_too_weak_for_the_target_is_inconclusive_and_says_how_many_completions_would_do(tmp_path):
    result = certify(*make_files(tmp_path, n=400), "quick")
    assert result.verdict == "INCONCLUSIVE" and not result.failed
    weak = [reason for reason in result.reasons if "underpowered" in reason]
    assert len(weak) == 2 and "target is 0.15" in weak[0]
    needed = int(re.search(r"about (\d+) completions", weak[0]).group(1))
    assert 1500 < needed < 2500


def _failed(result) -> set[tuple[str, str]]:
    return {(r.case, r.check) for r in result.failed}


def test_shifted_first_token_is_not_exact(tmp_path):
    result = certify(*make_files(tmp_path, shifted_at(1)))
    assert result.verdict == "NOT_EXACT"
    assert ("p0", "position_1_permutation") in _failed(result) and ("p1", "position_1_permutation") in _failed(result)


def test_wrong_only_at_position_3_is_caught_there_and_not_at_position_1(tmp_path):
    result = certify(*make_files(tmp_path, shifted_at(3)))
    assert result.verdict == "NOT_EXACT"
    failed = _failed(result)
    assert ("p0", "position_3_permutation") in failed and {("p0", "pit_ks"), ("p1", "pit_ks")} & failed
    assert not {check for _, check in failed} & {"position_1_permutation", "position_2_permutation"}


def test_unsupported_token_fails_the_hard_support_check(tmp_path):
    result = certify(*make_files(tmp_path, leaking(truncated(base_law, TOP_N)), n=300, top_k=TOP_N))
    assert result.verdict == "NOT_EXACT"
    support = [r for r in result.records if r.check == "reported_support"]
    assert support and not all(r.passed for r in support) and all(r.category == "invariant" for r in support)
    assert "outside the" in next(r for r in support if not r.passed).result.message


def test_a_candidate_that_leaks_tokens_its_reference_excludes_fails_near_zero_tokens(tmp_path):
    """The reference reports a truncated law (tail mass 0) without saying top_k, so the support is not known to be
    fully reported and the hard check cannot judge; 3 % of the candidate's tokens fall outside it."""
    ref_path, cand_path = make_files(tmp_path, leaking(truncated(base_law, TOP_N)), n=300, top_k=TOP_N)
    for path in (ref_path, cand_path):
        _edit(path, edit_header=_defaults(top_k=0))
    result = certify(ref_path, cand_path)
    assert result.verdict == "NOT_EXACT"
    near = [r for r in result.records if r.check == "near_zero_tokens"]
    assert near and all(not r.passed for r in near) and not any(r.check == "reported_support" for r in result.records)
    assert near[0].result.details["examples"] and near[0].result.details["detectable_rate"] < 0.03


def test_supported_candidate_under_top_k_passes_the_support_check(tmp_path):
    result = certify(*make_files(tmp_path, truncated(base_law, TOP_N), top_k=TOP_N))
    assert result.verdict == "CERTIFIED", result.reasons
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


def test_greedy_equal_outputs_are_certified(tmp_path):
    result = certify(*make_files(tmp_path, n=20, greedy=True))
    assert result.verdict == "CERTIFIED" and {r.check for r in result.records} == {"greedy_equality"}


def test_candidate_that_never_drafted_is_inconclusive_with_exit_status_4(tmp_path):
    ref_path, cand_path = make_files(tmp_path, n=1900, draft_n=0)
    result = certify(ref_path, cand_path, "quick")
    assert result.verdict == "INCONCLUSIVE" and result.reasons == [
        "speculation not observed: the candidate's draft counters are all 0 or absent"]
    status = certify_main([str(ref_path), str(cand_path), "--profile", "quick", "--out", str(tmp_path / "cert")])
    assert status == 4
    doc = json.loads((tmp_path / "cert" / "certificate.json").read_text())
    assert doc["level"] == "engine" and doc["verdict"] == "INCONCLUSIVE" and doc["passed"] is False
    assert doc["inconclusive"] == doc["reasons"] == result.reasons and doc["voided"] == []
    assert "INCONCLUSIVE" in (tmp_path / "cert" / "CERTIFICATE.md").read_text()
    assert schema_errors(doc, SCHEMA) == []
    assert doc["engine"]["speculation_evidence"]["observed"] is False


def test_reference_whose_reports_disagree_with_its_samples_makes_the_run_inconclusive(tmp_path):
    """Reports from a different law than the one sampled (too hot at every position): the reference's self-check
    fails and voids the PIT."""
    lying = flattened(base_law, 0.6)

    defaults = {"temperature": 1.0, "top_k": 0, "max_tokens": MAX_TOKENS, "n_probs": TOP_N}
    ref = completions(base_law, lying, 800, stream=0, draft_n=0)
    cand = completions(base_law, lying, 800, stream=1, draft_n=5)
    write_samples(tmp_path / "r.jsonl", header("reference", defaults), ref + prefix_records(lying, cand))
    write_samples(tmp_path / "c.jsonl", header("candidate", defaults), cand)
    result = certify(tmp_path / "r.jsonl", tmp_path / "c.jsonl")
    assert ("p0", "reference_pit") in _failed(result)
    assert result.verdict == "INCONCLUSIVE"
    assert "p0/reference_pit" in result.voided and "p0/pit_ks" in result.voided
    assert not any(r.check == "reference_pit" for r in result.counted)
    assert any("reported probabilities disagree" in reason for reason in result.reasons)


def test_seed_coupling_and_determinism_checks_name_the_divergence():
    ref = [Completion("p0", seed, (1, 2, seed)) for seed in range(4)]
    assert hard.seed_coupling(ref, list(ref)).passed
    cand = [*ref[:2], Completion("p0", 2, (1, 3, 2)), ref[3]]
    failed = hard.seed_coupling(ref, cand)
    assert not failed.passed and "seed 2: position 2: reference 2, candidate 3" in failed.message
    assert hard.determinism(ref)["seed_deterministic"] is None  # no repeat records: unknown
    repeats = ref + [Completion("p0", 1, (1, 2, 1), repeat=1), Completion("p0", 3, (0,), repeat=1)]
    assert hard.determinism(repeats) == {"repeats": 2, "seed_deterministic": False, "differing_seeds": [3]}


def test_speculation_evidence_sums_the_draft_counters():
    runs = [Completion("p0", s, (1,), timings={"draft_n": 4, "draft_n_accepted": 3}) for s in range(3)]
    evidence = hard.speculation_evidence(runs + [Completion("p0", 9, (1,))])
    assert evidence["observed"] and evidence["draft_n"] == 12 and evidence["acceptance_rate"] == 0.75
    assert evidence["completions_reporting"] == 3
    assert not hard.speculation_evidence([Completion("p0", 0, (1,), timings={"draft_n": 0})])["observed"]


# --------------------------------------------------------------------------------------------------
# The permutation test
# --------------------------------------------------------------------------------------------------

def _law_sample(rng, probs, n):
    return [int(x) for x in rng.choice(len(probs), size=n, p=probs)]


def test_permutation_pvalue_is_invariant_to_relabelling_and_record_order():
    rng = np.random.default_rng(5)
    a = _law_sample(rng, [0.5, 0.3, 0.15, 0.05], 300)
    b = _law_sample(rng, [0.45, 0.3, 0.15, 0.1], 500)
    p = permutation_homogeneity(a, b, 0.01, rng=1).p_value
    assert permutation_homogeneity(b, a, 0.01, rng=1).p_value == p
    assert permutation_homogeneity(list(rng.permutation(a)), list(rng.permutation(b)), 0.01, rng=1).p_value == p
    assert 0 < p < 1
    c = _law_sample(rng, [0.4, 0.3, 0.2, 0.1], 300)  # equal sizes: the smaller-sample rule has a tie
    assert permutation_homogeneity(a, c, 0.01, rng=2).p_value == permutation_homogeneity(c, a, 0.01, rng=2).p_value


def test_pooled_bins_do_not_depend_on_which_sample_saw_a_category_first():
    a, b = [3, 1, 1, 2], [2, 2, 3, 1, 9]
    _, _, bins = pooled_bins(a, b, min_pooled=1)
    assert bins == pooled_bins(b[::-1], a[::-1], min_pooled=1)[2] == [[1], [2], [3], [9]]
    assert pooled_bins(a, b, min_pooled=3)[2] == [[1], [2], [3, 9]]
    assert pooled_bins(a, b, min_pooled=4)[2] == [[1, 2, 3, 9]]  # a short rare remainder joins the previous bin


def test_permutation_pvalues_under_the_null_are_uniform_ish_and_a_shifted_law_is_rejected():
    rng = np.random.default_rng(11)
    law = [0.4, 0.3, 0.2, 0.1]
    results = [permutation_homogeneity(_law_sample(rng, law, 200), _law_sample(rng, law, 200), 0.1, rng=seed)
               for seed in range(300)]
    permutation = np.array([r.details["p_value_permutation"] for r in results])  # the Monte-Carlo p alone
    assert 0.4 < permutation.mean() < 0.6
    assert 0.12 < np.mean(permutation <= 0.2) < 0.28 and np.mean(permutation <= 0.05) < 0.09
    reported = np.array([r.p_value for r in results])  # 2 min(bound, permutation): valid, conservative
    assert np.mean(reported <= 0.1) <= 0.1 and np.mean([r.passed for r in results]) >= 0.9
    shifted = [0.25, 0.3, 0.2, 0.25]
    result = permutation_homogeneity(_law_sample(rng, law, 1000), _law_sample(rng, shifted, 1000), 1e-4)
    assert not result.passed and result.p_value <= 1e-4 and result.detectable_tv < 0.2


# --------------------------------------------------------------------------------------------------
# The randomized PIT on top-N + tail reports
# --------------------------------------------------------------------------------------------------

def _pit_sample(law, n, seed):
    """Tokens of `law` and the reports of base_law for the same prefixes (the simulated engine)."""
    tokens, reports = [], []
    for s in range(n):
        seq = sample(law, "p0", s, 100 + seed)
        for t, token in enumerate(seq):
            tokens.append(token)
            reports.append(tuple(map(tuple, report(base_law("p0", tuple(seq[:t]))))))
    return tokens, reports


def test_pit_uniforms_pass_under_the_null_and_a_biased_candidate_fails():
    pvalues = []
    for seed in range(20):
        tokens, reports = _pit_sample(base_law, 150, seed)
        u = pit.pit_uniforms(tokens, reports, np.random.default_rng(seed))
        assert u.min() >= 0 and u.max() <= 1
        pvalues.append(pit_uniformity_test(u, 0.01).p_value)
    assert np.mean(np.array(pvalues) < 0.05) <= 0.2 and np.mean(pvalues) > 0.3
    tokens, reports = _pit_sample(flattened(base_law), 300, 0)
    biased = pit_uniformity_test(pit.pit_uniforms(tokens, reports, np.random.default_rng(0)), 1e-3)
    assert not biased.passed and biased.details["detectable_kolmogorov"] < 0.2


def test_pit_places_unlisted_tokens_in_the_tail_category():
    top = ((4, 0.5), (2, 0.3))  # tail mass 0.2 holds every other token
    u = pit.pit_uniforms([7] * 200, [top] * 200, np.random.default_rng(0))
    assert u.min() >= 0.8 and u.max() <= 1.0
    ids, probs = pit.categories(top)
    assert ids == [4, 2] and probs.tolist() == pytest.approx([0.5, 0.3, 0.2])


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


@pytest.mark.parametrize("line, field", [
    ({"kind": "completion", "prompt_id": "p0", "seed": 1, "tokens": [1, -2]}, "tokens"),
    ({"kind": "completion", "prompt_id": "nope", "seed": 1, "tokens": [1]}, "prompt_id"),
    ({"kind": "completion", "prompt_id": "p0", "seed": "1", "tokens": [1]}, "seed"),
    ({"kind": "prefix_probs", "prompt_id": "p0", "prefix_tokens": [], "top_probs": [[1, 0.7], [2, 0.6]],
      "probs_kind": "post_sampling"}, "top_probs"),
    ({"kind": "mystery"}, "kind"),
])
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
    assert certify_main([str(tmp_path / "broken.jsonl"), str(cand_path), "--out", str(tmp_path / "o")]) == 2


def test_cli_exit_status_0_and_1(tmp_path):
    (tmp_path / "good").mkdir(), (tmp_path / "bad").mkdir()
    good = make_files(tmp_path / "good", n=1900)  # the quick profile's target needs ~1,800 per prompt
    assert certify_main([*map(str, good), "--profile", "quick", "--out", str(tmp_path / "c0")]) == 0
    bad = make_files(tmp_path / "bad", shifted_at(1))
    assert certify_main([*map(str, bad), "--profile", "quick", "--out", str(tmp_path / "c1")]) == 1


def test_every_declared_engine_check_has_a_distinct_name_and_profile():
    checks = get_level("engine").checks
    assert len({c.name for c in checks}) == len(checks)
    for name in ("quick", "standard", "full"):
        settings = get_profile(name).to_dict("engine")["settings"]
        assert settings["positions"] >= 3 and settings["max_bins"] >= 40


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
assert status == 0, status
assert not attempts, attempts
print("BLOCKED-OK")
"""


def test_certify_samples_runs_without_torch_and_httpx(tmp_path):
    ref_path, cand_path = make_files(tmp_path, n=1900)
    done = subprocess.run([sys.executable, "-c", _BLOCKED_RUN, str(ref_path), str(cand_path), str(tmp_path / "c")],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0 and "BLOCKED-OK" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]


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


@pytest.mark.parametrize("change", [{"ignore_eos": True}, {"mirostat": 2}, {"dry_multiplier": 0.8},
                                    {"samplers": ["temperature", "top_k"]}, {"some_new_engine_knob": 1}])
def test_law_changing_parameters_that_differ_are_a_usage_error(tmp_path, change):
    ref_path, cand_path = make_files(tmp_path, n=50)
    _edit(cand_path, edit_header=_defaults(**change), edit_record=lambda r: {**r, "request": {}})
    code = certify_main([str(ref_path), str(cand_path), "--profile", "quick", "--out", str(tmp_path / "c")])
    assert code == 2
    with pytest.raises(ValueError, match=f"request_defaults.*{next(iter(change))}"):
        certify(ref_path, cand_path)


def test_report_only_parameters_may_differ(tmp_path):
    ref_path, cand_path = make_files(tmp_path, n=300)
    _edit(cand_path, edit_header=_defaults(n_probs=20, post_sampling_probs=False))
    assert certify(ref_path, cand_path).verdict == "CERTIFIED"


def test_a_record_whose_request_is_not_its_headers_law_names_file_line_and_field(tmp_path):
    ref_path, cand_path = make_files(tmp_path, n=50)
    _edit(cand_path, edit_record=lambda r: {**r, "request": {"temperature": 1.3}})
    with pytest.raises(ValueError, match=r"cand.jsonl: line 2: field 'request.temperature': 1.3, but the header"):
        read_samples(cand_path)


def test_resume_is_refused_across_engine_builds():
    from exactspec.conformance.engine.samples import design_differences

    old = header("candidate", {"temperature": 1.0})
    new = replace(old, engine={**old.engine, "version": "2"})
    assert design_differences(old, new) == ["engine.version"]


def test_a_dropped_prompt_is_inconclusive(tmp_path):
    ref_path, cand_path = make_files(tmp_path, n=300)
    _edit(cand_path, edit_record=lambda r: None if r.get("prompt_id") == "p1" else r)
    result = certify(ref_path, cand_path)
    assert result.verdict == "INCONCLUSIVE"
    assert any(reason.startswith("p1: dropped") for reason in result.reasons)


def test_a_pit_that_cannot_run_is_inconclusive(tmp_path):
    ref_path, cand_path = make_files(tmp_path, n=300)
    _edit(ref_path, edit_record=lambda r: {**r, "probs_kind": "raw"} if r["kind"] == "prefix_probs" else r)
    _edit(ref_path, edit_header=_defaults(temperature=0.7))
    _edit(cand_path, edit_header=_defaults(temperature=0.7))
    result = certify(ref_path, cand_path)
    assert result.verdict == "INCONCLUSIVE" and "pit_ks" not in {r.check for r in result.records}
    assert any("the PIT did not run" in reason and "raw" in reason for reason in result.reasons)


def test_a_check_that_ran_on_nothing_is_inconclusive(tmp_path):
    """Seed coupling declared, but the candidate's seeds are shifted: no shared seed, a check on n = 0."""
    ref_path, cand_path = make_files(tmp_path, n=300)

    def coupled(head):
        head["engine"]["speculation"]["expect_seed_coupled"] = True
        return head
    _edit(cand_path, edit_header=coupled, edit_record=lambda r: {**r, "seed": r["seed"] + 1000})
    result = certify(ref_path, cand_path)
    assert result.verdict == "INCONCLUSIVE"
    assert any("seed_coupling ran on nothing (n = 0)" in reason for reason in result.reasons)


def test_two_sample_tests_never_compare_a_seed_with_itself():
    """Seeds in both files are shared out (an engine may couple its randomness to the seed)."""
    from exactspec.conformance.engine.checks import independent_samples

    ref = [Completion("p0", seed, (seed,)) for seed in range(6)]
    cand = [Completion("p0", seed, (seed,)) for seed in range(3, 9)]
    kept_ref, kept_cand = independent_samples(ref, cand)
    assert {c.seed for c in kept_ref} == {0, 1, 2, 3, 5} and {c.seed for c in kept_cand} == {4, 6, 7, 8}
    assert not {c.seed for c in kept_ref} & {c.seed for c in kept_cand}


def test_reports_wrong_at_a_deeper_prefix_void_the_pit_instead_of_blaming_the_candidate(tmp_path):
    """Both samples exact, but the reference misreports every distribution after a prefix of length >= 1 (its
    top two probabilities swapped): its own tokens fail `reference_pit`, so the candidate's PIT is void and the
    run is INCONCLUSIVE, never NOT_EXACT."""
    ref_path, cand_path = make_files(tmp_path, n=600)

    def misreport(record):
        if record["kind"] == "prefix_probs" and record["prefix_tokens"]:
            top = record["top_probs"]
            top[0][1], top[1][1] = top[1][1], top[0][1]
        return record
    _edit(ref_path, edit_record=misreport)
    result = certify(ref_path, cand_path)
    checks = {(r.case, r.check): r for r in result.records}
    assert not checks[("p0", "reference_pit")].passed and not checks[("p0", "pit_ks")].passed
    assert result.verdict == "INCONCLUSIVE" and "p0/pit_ks" in result.voided
    assert any("reported probabilities disagree" in reason for reason in result.reasons)


# --------------------------------------------------------------------------------------------------
# Rounded reports (#23): rounding within the stated tolerance never fails a check; more than it is INCONCLUSIVE
# --------------------------------------------------------------------------------------------------

def _full_reports_rounded_high(by: float):
    """Edit the reference's prefix_probs records: list all V tokens, each `by` high (so the list sums to over 1
    and the reported tail is 0)."""
    law = cached(base_law)

    def edit(record):
        if record.get("kind") == "prefix_probs":
            row = law(record["prompt_id"], tuple(record["prefix_tokens"]))
            record["top_probs"] = [[int(i), float(row[i]) + by] for i in np.argsort(-row, kind="stable")]
        return record
    return edit


def test_reports_rounded_high_and_a_token_they_do_not_list_never_fail_a_check(tmp_path):
    """Every report sums to 1 + 6e-6 (tail reported 0) and one candidate token is unlisted: before the tolerance,
    a token of reported probability 0 failed the PIT outright; now it is a PIT value of 1, within the slack."""
    ref_path, cand_path = make_files(tmp_path, n=300)
    _edit(ref_path, edit_record=_full_reports_rounded_high(1e-6))

    def unlisted_second_token(record):
        if record.get("kind") == "completion" and record["seed"] == 300 and record["prompt_id"] == "p0":
            record["tokens"] = [record["tokens"][0], 77]
            record["top_probs"] = record["top_probs"][:2]
        return record
    _edit(cand_path, edit_record=unlisted_second_token)
    result = certify(ref_path, cand_path)
    assert result.verdict == "CERTIFIED", result.reasons
    record = next(r for r in result.records if r.case == "p0" and r.check == "pit_ks")
    assert record.passed and record.result.details["slack"] == pytest.approx(V * pit.REPORT_ROUNDING)


def test_a_report_beyond_the_rounding_tolerance_is_an_error_naming_file_line_and_field(tmp_path):
    ref_path, cand_path = make_files(tmp_path, n=20)
    seen = []

    def one_report_over(record):
        if record.get("kind") == "prefix_probs" and not seen:
            seen.append(1)
            record["top_probs"] = [[i, p + 0.02] for i, p in record["top_probs"]]  # 0.9 + 0.08 + tail 0.1: 1.08
            record["top_probs"].append([5, 0.1])
        return record
    _edit(ref_path, edit_record=one_report_over)
    with pytest.raises(ValueError, match=r"ref.jsonl: line \d+: field 'top_probs': .*more than rounding explains"):
        read_samples(ref_path)
    assert certify_main([str(ref_path), str(cand_path), "--out", str(tmp_path / "c")]) == 2


def test_the_pit_of_rounded_reports_stays_within_the_slack():
    top = [[0, 0.6 + 4e-6], [1, 0.4 + 4e-6]]  # sums to 1 + 8e-6 < 1 + 2 x REPORT_ROUNDING: tail reported 0
    u = pit.pit_uniforms([0, 1, 5], [top] * 3, np.random.default_rng(0))
    assert u.max() <= 1.0 and u[2] == 1.0  # the unlisted token: the end of [0, 1]
    ids, probs = pit.categories(top)
    assert ids == [0, 1] and probs[-1] == 0.0 and probs.sum() > 1


def test_the_certificate_states_each_prompts_entropy(tmp_path):
    """Prompt entropy from the reference's reports along its own completions (tail lumped: a lower bound):
    between the entropy of the reported top-N alone and log(V); p1's first row is the more open one."""
    result = certify(*make_files(tmp_path, n=300))
    entropy = result.extra["engine"]["prompt_entropy_nats"]
    assert set(entropy) == set(PROMPTS) and all(0.5 < h < np.log(V) for h in entropy.values())
    from exactspec.conformance.engine.report import to_markdown

    doc = {"engine": result.extra["engine"]}
    line = next(x for x in to_markdown({**_minimal_doc(), **doc}).splitlines() if x.startswith("Prompt entropy"))
    assert "p0 " in line and "p1 " in line


def _minimal_doc() -> dict:
    return {"impl": "x", "verdict": "CERTIFIED", "verdict_text": "", "profile": {"promise": ""},
            "budget": {"total_false_fail": 1e-3, "n_checks": 0, "per_check_false_fail_rate": 1e-3,
                       "false_fail_rate_spent": 0.0}, "checks": []}
