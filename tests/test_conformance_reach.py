"""Issue 13 at the rule level: verdicts that never overclaim, RNG-event findings, the adversarial generator's
reach, cases that reach the bugs (and the three mutants built for them), findings grouped by root cause,
tracebacks, subsets and worker processes. Fixed seeds throughout; statistical checks run at the quick
profile's per-check false-fail rate (total 1e-6, power 0.999 at the stated TV)."""

from __future__ import annotations

import numpy as np
import pytest

from exactspec.conformance import certify_command as certify
from exactspec.conformance.rule.level import LEVEL as RULE
from exactspec.conformance.rule.adversarial import adversarial_generator
from exactspec.conformance.rule.cases import CASES_BY_NAME, CURATED, SUITE_CASES
from exactspec.conformance.core.profiles import get_profile
from exactspec.conformance.core.records import verdict_of
from exactspec.conformance.core.registry import budget_for
from exactspec.conformance.rule.harness import Harness
from exactspec.conformance.rule.mutants import zoo
from exactspec.conformance.rule.report import format_summary
from tests.rule_level import confirmatory_records, run_suite, statistical_records

QUICK = get_profile("quick")
RATE = budget_for("rule", QUICK, SUITE_CASES).per_check_false_fail_rate
SMALL = [CASES_BY_NAME[n] for n in ("p_zero_where_q_positive", "demo_mixed_draft")]


# --- reach of the adversarial generator ---------------------------------------------------------------


class SeedsItsOwnGenerator(zoo.Rule):
    """Exact, but draws only a seed from `rng` and takes its coins from its own generator."""

    def verify_batch(self, target_probs, draft_probs, draft_tokens, rng):
        return super().verify_batch(
            target_probs, draft_probs, draft_tokens, np.random.default_rng(int(rng.integers(2**63)))
        )


class InclusiveSeeded(zoo.InclusiveBoundary):
    """The inclusive-boundary bug behind a seeding adapter: the adversarial extremes never reach `u <= p/q`."""

    def verify_batch(self, target_probs, draft_probs, draft_tokens, rng):
        return super().verify_batch(
            target_probs, draft_probs, draft_tokens, np.random.default_rng(int(rng.integers(2**63)))
        )


def test_tracking_generator_is_a_numpy_generator_and_counts_extremes():
    rng = adversarial_generator(3)
    assert isinstance(rng, np.random.Generator)
    u = rng.random(4000)
    rng.integers(2**63)
    usage = rng.usage
    assert usage["random"]["values"] == 4000 and usage["random"]["extremes"] == int(
        (u == 0).sum() + (u == 2.0**-53).sum() + (u == np.nextafter(1, 0)).sum()
    )
    assert usage["random"]["extremes"] > 500 and usage["integers"]["seed_calls"] == 1


@pytest.mark.parametrize(
    "impl, reached",
    [(zoo.Rule(), True), (SeedsItsOwnGenerator(), False)],
    ids=["coins_from_rng", "seed_only"],
)
def test_report_says_whether_the_adversarial_rng_reached(impl, reached):
    result = run_suite(impl, type(impl).__name__, "quick", cases=SMALL, hypothesis=False)
    assert result.verdict == "CERTIFIED"
    info = result.extra["adversarial_reach"]
    assert info["reached"] is reached
    summary = format_summary(result)
    if reached:
        assert "adversarial RNG reached" in summary
    else:
        assert "adversarial RNG not reached" in summary and "Passing coins through" in summary
        assert any("not reached" in note for note in result.notes)


def test_torch_seeded_adapter_is_not_reached():
    pytest.importorskip("torch")
    # seeds a torch.Generator from rng.integers(2**63)
    from exactspec.conformance.adapters.gpu_impl import (
        TorchCPU,
    )

    result = run_suite(TorchCPU(), "TorchCPU", "quick", cases=SMALL[:1], hypothesis=False)
    assert result.extra["adversarial_reach"]["reached"] is False
    assert "adversarial RNG not reached" in format_summary(result)


def test_seeding_hides_the_inclusive_boundary_and_the_report_says_so():
    hidden = run_suite(InclusiveSeeded(), "seeded", "quick", cases=SMALL[:1], hypothesis=False)
    assert hidden.verdict == "CERTIFIED" and not hidden.extra["adversarial_reach"]["reached"]
    caught = run_suite(
        zoo.InclusiveBoundary(), "direct", "quick", cases=SMALL[:1], hypothesis=False
    )
    assert caught.verdict == "NOT_EXACT"
    (finding,) = caught.extra["findings"]
    assert finding["kind"] == "rng_event" and [e["event"] for e in finding["events"]] == [
        "uniform_zero"
    ]
    assert "2**-24" in finding["summary"] and "2**-53" in finding["summary"]


# --- verdicts that never overclaim ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "mutant",
    [zoo.ResidualFromP, zoo.ResidualSignFlip, zoo.BonusFromDraftRow],
    ids=lambda c: c.__name__,
)
def test_standard_rule_failure_never_certifies_a_non_exact_rule_as_exact(mutant):
    """Each mutant deviates at some position by binned TV > the quick epsilon 0.05 (measured below). Keep
    only its standard-rule records (as if the exactness checks had missed it): the confirmatory test sized
    for the observed deviation must catch it, so the verdict is never EXACT_NOT_STANDARD."""
    case = CASES_BY_NAME["demo_uniform_draft"]
    harness = Harness(mutant(), mutant.__name__)
    records = statistical_records(harness, case, QUICK, RATE)
    deviation = max(
        r.result.details.get("observed_tv_binned", 0.0)
        for r in records
        if r.check.startswith("position_")
    )
    assert deviation > QUICK.rule.target_tv
    standard = [r for r in records if r.category == "standard_rule" or "reach" in r.result.details]
    assert any(not r.passed for r in standard)
    assert verdict_of(standard) == "INCONCLUSIVE"  # unconfirmed: never EXACT_NOT_STANDARD
    confirm, unsettled = confirmatory_records(harness, case, QUICK, standard, RATE)
    assert unsettled == [] and verdict_of(standard + confirm) == "NOT_EXACT"


class BiasedCoin(zoo.Rule):
    """Accepts with probability min(1, p/q) + 0.006: a coin compared in low precision (a 0.6 % bias)."""

    def uniforms(self, rng, batch, k):
        return rng.random((batch, k)) - 0.006


def test_acceptance_bias_of_half_a_percent_is_resolved_and_left_inconclusive():
    case = CASES_BY_NAME["acceptance_rate_k1"]
    harness = Harness(BiasedCoin(), "biased")
    records = statistical_records(harness, case, QUICK, RATE)
    by = {r.check: r for r in records}
    assert by["acceptance_rate"].result.n > 500_000 and not by["acceptance_rate"].passed
    # too small for the token laws
    assert all(r.passed for r in records if r.category == "exactness")
    confirm, unsettled = confirmatory_records(harness, case, QUICK, records, RATE)
    assert confirm == [] and unsettled and "rounds" in unsettled[0]
    assert verdict_of(records + confirm, unsettled) == "INCONCLUSIVE"


# --- cases that reach the bugs, and the mutants built for them -------------------------------------------


def test_reach_cases_have_the_promised_rows():
    near = CASES_BY_NAME["near_equal_draft"]
    drafted = near.draft_probs > 0
    ratio = near.target_probs[:-1][drafted] / near.draft_probs[drafted]
    assert (
        ratio.min() >= 0.9 and ratio.max() < 1 and np.isclose(ratio, 0.95, rtol=1e-12).mean() > 0.5
    )
    zipf = CASES_BY_NAME["zipf_2048_draft_top64"]
    p, q = zipf.target_probs[0], zipf.draft_probs[0]
    ranks = np.argsort(np.argsort(-p, kind="stable"), kind="stable")
    assert (
        zipf.V == 2048 and np.count_nonzero(q) == 64 and ranks[np.maximum(p - q, 0) > 0].min() >= 64
    )
    # rank order != id order
    assert not np.array_equal(np.argsort(-p, kind="stable")[:64], np.arange(64))
    padded = CASES_BY_NAME["padded_vocab_50304"]
    assert (padded.target_probs[:, 50257:] == 0).all() and (padded.draft_probs[:, 50257:] > 0).all()
    for name in ("bf16_exact_rows", "acceptance_rate_k1"):
        rows = np.concatenate([CASES_BY_NAME[name].target_probs, CASES_BY_NAME[name].draft_probs])
        as32 = rows.astype(np.float32)
        # bf16
        assert (
            np.array_equal(as32.astype(np.float64), rows)
            and not (as32.view(np.uint32) & 0xFFFF).any()
        )
    deep = CASES_BY_NAME["deep_k8_high_acceptance"]
    assert deep.k == 8 and np.prod(deep.alphas) > 0.5
    vary = CASES_BY_NAME["rows_vary_by_round"]
    assert vary.varying and len(vary.pool[0]) == 8 and not vary.enumerable


def test_deep_case_plans_the_last_position_to_its_epsilon():
    from tests.rule_level import plan_rounds

    deep = CASES_BY_NAME["deep_k8_high_acceptance"]
    plan = plan_rounds(deep, QUICK, RATE)
    assert plan["primary"] == "position_9"
    records = statistical_records(Harness(zoo.Rule(), "rule"), deep, QUICK, RATE, plan["n"])
    last = next(r for r in records if r.check == "position_9")
    assert last.passed and last.result.detectable_tv <= 1.1 * QUICK.rule.target_tv


@pytest.mark.parametrize(
    "mutant, reaching, blind",
    [
        (zoo.NearEqualShortcut, "near_equal_draft", "demo_mixed_draft"),
        (zoo.RankMappingBeyond16, "zipf_2048_draft_top64", "rows_differ_k3"),
        (zoo.StaleWorkspace, "rows_vary_by_round", "rows_differ_k3"),
    ],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_new_mutants_are_caught_by_the_case_built_for_them(mutant, reaching, blind):
    """Rejected on the case that reaches the bug; certified on an ordinary case (each case on a fresh instance),
    so it is the new case that catches it."""
    assert (
        run_suite(
            mutant(), mutant.__name__, "quick", cases=[CASES_BY_NAME[reaching]], hypothesis=False
        ).verdict
        in zoo.KILLED
    )
    assert (
        run_suite(
            mutant(), mutant.__name__, "quick", cases=[CASES_BY_NAME[blind]], hypothesis=False
        ).verdict
        == "CERTIFIED"
    )


# --- findings, tracebacks, subsets, workers ------------------------------------------------------------


def test_one_invariant_violation_is_one_finding_with_the_checks_it_touched():
    result = run_suite(
        zoo.ResidualSignFlip(),
        "flip",
        "quick",
        cases=[CASES_BY_NAME["p_zero_where_q_positive"]],
        hypothesis=False,
    )
    (finding,) = result.extra["findings"]
    assert finding["kind"] == "invariant" and finding["cases"] == ["p_zero_where_q_positive"]
    assert len(finding["checks"]) >= 3 and len(finding["checks"]) == len(result.failed)


class Crashes(zoo.Rule):
    def verify_batch(self, target_probs, draft_probs, draft_tokens, rng):
        return self._inner_step(draft_tokens)

    def _inner_step(self, draft_tokens):
        raise RuntimeError("")


def test_an_implementation_exception_is_reported_with_its_traceback():
    result = run_suite(Crashes(), "crash", "quick", cases=SMALL, hypothesis=False)
    assert result.verdict == "CONTRACT_VIOLATION"
    (finding,) = [f for f in result.extra["findings"] if f["kind"] == "contract"]
    # one root cause, every case it hit
    assert sorted(finding["cases"]) == sorted(c.name for c in SMALL)
    record = result.failed[0]
    assert (
        "_inner_step" in record.result.details["traceback"]
        and "RuntimeError" in record.result.details["traceback"]
    )


def test_workers_give_the_same_records_as_one_process():
    serial = run_suite(zoo.Rule(), "rule", "quick", cases=SMALL, hypothesis=False, workers=1)
    parallel = run_suite(zoo.Rule(), "rule", "quick", cases=SMALL, hypothesis=False, workers=2)
    assert [(r.case, r.check, r.result.p_value) for r in serial.records] == [
        (r.case, r.check, r.result.p_value) for r in parallel.records
    ]


def test_certify_runs_a_subset(tmp_path, capsys):
    assert certify.select_cases(RULE, "quick", None, "demo_mixed_draft,one_hot_draft", None) == [
        "demo_mixed_draft",
        "one_hot_draft",
    ]
    assert set(certify.select_cases(RULE, "quick", None, None, "demo")) == {
        c.name for c in CURATED if "demo" in c.name
    }
    with pytest.raises(ValueError, match="--cases"):
        certify.select_cases(RULE, "quick", None, "no_such_case", None)
    code = certify.main(
        [
            "--impl",
            "exactspec.conformance.rule.mutants.zoo:Rule",
            "--profile",
            "quick",
            "-k",
            "one_hot_d",
            "--no-hypothesis",
            "--no-progress",
            "--workers",
            "1",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0 and "one_hot_draft" in capsys.readouterr().out
    assert (
        certify.main(
            [
                "--impl",
                "exactspec.conformance.rule.mutants.zoo:Rule",
                "-k",
                "zzz",
                "--out",
                str(tmp_path),
            ]
        )
        == 2
    )


def test_real_model_cases_in_other_dtypes_run_only_when_named():
    """--real-model adds the float32 SmolLM2 cases; the bfloat16 ones only through -k or --cases."""
    from exactspec.conformance.core.levels import get_level

    sequence = get_level("sequence")
    default = certify.select_cases(sequence, "quick", None, None, None, real_model=True)
    assert "real_greedy" in default and not [n for n in default if n.endswith("_bf16")]
    assert certify.select_cases(sequence, "quick", None, None, "bf16", real_model=True) == [
        "real_pit_t0.7_k4_bf16",
        "real_greedy_bf16",
    ]
    assert certify.select_cases(
        sequence, "quick", None, "real_greedy_bf16", None, real_model=True
    ) == ["real_greedy_bf16"]
