"""Self-tests of the conformance machinery (fast): contract enforcement with clear messages,
implementation loading, the adversarial Generator, strategies, cases, planning and checks."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from hypothesis import given, settings

from exactspec import reference
from exactspec.conformance.rule.adversarial import ONE_MINUS_ULP, adversarial_generator
from exactspec.conformance.rule.cases import CASES_BY_NAME, CURATED, Case
from exactspec.conformance.rule.harness import (
    ContractViolation,
    Harness,
    ImplementationError,
    ImplUnavailable,
    load_impl,
)
from exactspec.conformance.core.registry import budget_for
from exactspec.conformance.core.profiles import PROFILES
from tests.rule_level import plan_rounds, statistical_checks
from tests.rule_level import (
    confirmatory_records,
    invariant_records,
    statistical_records,
    verdict_of,
)
from exactspec.conformance.rule.strategies import build_case, round_cases
from exactspec.conformance.adapters.reference import Reference
from exactspec.stat_tests import min_discrepancy_chisquare_gof

DEMO = CASES_BY_NAME["demo_uniform_draft"]
QUICK = PROFILES["quick"]


class _Returns:
    def __init__(self, fn):
        self.fn = fn

    def verify(self, p, q, x, rng):
        return self.fn(p, q, x, rng)


@pytest.mark.parametrize(
    "bad, fragment",
    [
        (lambda p, q, x, rng: None, "sequence of int"),
        (lambda p, q, x, rng: [], "no token"),
        (lambda p, q, x, rng: list(range(len(x) + 2)), "at most k+1"),
        (lambda p, q, x, rng: [0.5], "int token ids"),
        (lambda p, q, x, rng: "0", "sequence of int"),
        (lambda p, q, x, rng: [[0]], "flat sequence"),
        (lambda p, q, x, rng: [p.shape[1] + 3], "outside [0, V"),
    ],
)
def test_bad_output_is_a_clear_contract_violation(bad, fragment):
    with pytest.raises(ContractViolation, match=fragment.replace("[", r"\[").replace("+", r"\+")):
        Harness(_Returns(bad), "bad").run(DEMO, 5, seed=1)


def test_bad_output_becomes_contract_verdict():
    records = invariant_records(Harness(_Returns(lambda p, q, x, rng: []), "empty"), DEMO, QUICK)
    assert verdict_of(records) == "CONTRACT_VIOLATION"
    assert "no token" in records[0].result.message


def test_exception_is_reported_with_its_case():
    def boom(p, q, x, rng):
        raise RuntimeError("kaboom")

    with pytest.raises(ImplementationError, match="kaboom.*demo_uniform_draft"):
        Harness(_Returns(boom), "boom").run(DEMO, 3, seed=1)


class _BadBatch:
    def __init__(self, out):
        self.out = out

    def verify(self, p, q, x, rng):
        return reference.verify(p, q, x, rng)

    def verify_batch(self, p, q, x, rng):
        return self.out(p, q, x, rng)


@pytest.mark.parametrize(
    "out, fragment",
    [
        (lambda p, q, x, rng: reference.verify_batch(p, q, x, rng)[0], "must return"),
        (lambda p, q, x, rng: (np.zeros((x.shape[0], 2), int), np.ones(x.shape[0], int)), "shape"),
        (
            lambda p, q, x, rng: (
                np.zeros((x.shape[0], x.shape[1] + 1), int),
                np.ones(x.shape[0], int),
            ),
            "padded with -1",
        ),
        (
            lambda p, q, x, rng: (
                np.full((x.shape[0], x.shape[1] + 1), -1),
                np.zeros(x.shape[0], int),
            ),
            "counts must lie in",
        ),
    ],
)
def test_bad_batch_output(out, fragment):
    with pytest.raises(ContractViolation, match=fragment):
        Harness(_BadBatch(out), "badbatch").run(DEMO, 5, seed=1)


def test_nondeterminism_is_a_contract_violation():
    state = np.random.default_rng(123)  # hidden global randomness: forbidden

    class Leaky:
        def verify(self, p, q, x, rng):
            return reference.verify(p, q, x, state)

    records = invariant_records(Harness(Leaky(), "leaky"), DEMO, QUICK)
    det = [r for r in records if r.check == "determinism"][0]
    assert not det.passed and "only source of randomness" in det.result.message
    assert verdict_of(records) == "CONTRACT_VIOLATION"


def test_load_impl_from_cwd_module(tmp_path, monkeypatch):
    (tmp_path / "my_rule_mod.py").write_text(
        textwrap.dedent("""
        from exactspec import reference
        class Mine:
            def verify(self, p, q, x, rng):
                return reference.verify(p, q, x, rng)
        def factory():
            return Mine()
    """)
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert hasattr(load_impl("my_rule_mod:Mine"), "verify")  # a class is instantiated
    assert hasattr(load_impl("my_rule_mod:factory"), "verify")  # a factory is called


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("no_colon", "MODULE:NAME"),
        ("surely_missing_module_xyz:Thing", "cannot import"),
        ("exactspec.conformance.adapters.reference:Nope", "no attribute"),
        ("exactspec.conformance.rule.cases:CURATED", "verify"),
    ],
)
def test_load_impl_errors(spec, fragment):
    with pytest.raises(ValueError, match=fragment):
        load_impl(spec)


def test_cuda_adapter_unavailable_without_cuda():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    with pytest.raises(ImplUnavailable, match="CUDA"):
        load_impl("exactspec.conformance.adapters.gpu_impl:TorchCUDA")


def test_adversarial_generator_hits_boundaries():
    g = adversarial_generator(3)
    assert isinstance(g, np.random.Generator)
    u = g.random(4000)
    assert (
        (u == 0.0).sum() > 100
        and (u == ONE_MINUS_ULP).sum() > 100
        and u.max() < 1.0
        and u.min() >= 0.0
    )
    u32 = g.random(4000, dtype=np.float32)
    assert (u32 == 0.0).sum() > 100 and u32.max() < 1.0
    assert (
        adversarial_generator(3).random(10).tolist() == adversarial_generator(3).random(10).tolist()
    )


def test_adversarial_generator_exposes_inclusive_boundary():
    case = CASES_BY_NAME["p_zero_where_q_positive"]

    class Inclusive:
        def verify(self, p, q, x, rng):
            out = []
            for i, xi in enumerate(x):
                if rng.random() <= p[i, xi] / q[i, xi]:
                    out.append(int(xi))
                else:
                    r = np.maximum(p[i] - q[i], 0)
                    return out + [int(rng.choice(len(r), p=r / r.sum()))]
            return out + [int(rng.choice(p.shape[1], p=p[-1]))]

    h = Harness(Inclusive(), "inclusive")
    ordinary = h.run(case, 300, seed=5)
    adversarial = h.run(case, 300, seed=5, rng_factory=adversarial_generator)
    from exactspec.conformance.rule.checks import invariant_check

    assert invariant_check("i", ordinary).passed
    assert not invariant_check("i", adversarial).passed


@settings(derandomize=True, max_examples=40, deadline=None)
@given(round_cases())
def test_generated_cases_are_valid_rounds(case):
    assert case.target_probs.shape == (case.k + 1, case.V) and 1 <= case.k <= 8
    assert np.allclose(case.target_probs.sum(1), 1) and np.allclose(case.draft_probs.sum(1), 1)


def test_strategy_edges():
    assert build_case(32768, 2, ["equal"], 1).V == 32768
    c = build_case(6, 3, ["disjoint"] * 4, 2)
    assert np.all(np.minimum(c.target_probs[:-1], c.draft_probs).sum(1) == 0)
    c = build_case(8, 1, ["p_zero_q_pos", "random"], 3)
    assert ((c.target_probs[0] == 0) & (c.draft_probs[0] > 0)).any()
    c = build_case(8, 1, ["one_hot_p", "random"], 3)
    assert c.target_probs[0].max() == 1.0


def test_curated_cases_cover_the_brief():
    names = set(CASES_BY_NAME)
    assert {"demo_uniform_draft", "demo_mixed_draft", "demo_identical_draft"} <= names
    demo = CASES_BY_NAME["demo_mixed_draft"]
    assert demo.k == 4 and np.allclose(
        demo.draft_probs[0], 0.6 * np.array([0.5, 0.3, 0.15, 0.05]) + 0.1
    )
    assert any(c.V >= 32768 for c in CURATED)
    assert max(c.k for c in CURATED) == 8


def test_case_laws_agree_with_reference():
    for case in CURATED:
        if case.enumerable:
            tuples, probs = case.tuple_law
            assert abs(probs.sum() - 1) < 1e-9
            first = np.zeros(case.V)
            for t, pr in zip(tuples, probs):
                first[t[0]] += pr
            assert np.allclose(first, case.target_probs[0], atol=1e-12)
            counts = np.zeros(case.k + 1)
            for t, pr in zip(tuples, probs):
                counts[len(t) - 1] += pr
            assert np.allclose(counts, case.count_law, atol=1e-9)
        if case.stream_enumerable:
            assert abs(case.stream_law.sum() - 1) < 1e-9


def test_case_roundtrip():
    c = Case.from_dict(DEMO.to_dict())
    assert np.array_equal(c.target_probs, DEMO.target_probs) and c.name == DEMO.name


def test_planned_n_meets_the_stated_epsilon():
    for profile in PROFILES.values():
        budget = budget_for("rule", profile, CURATED)
        for case in CURATED:
            plan = plan_rounds(case, profile, budget.per_check_false_fail_rate)
            if not plan["capped"]:
                assert (
                    min_discrepancy_chisquare_gof(
                        plan["n"],
                        plan["bins"],
                        budget.per_check_false_fail_rate,
                        profile.false_pass_rate,
                    )
                    <= plan["epsilon_tv"] * 1.001
                )
                assert plan["epsilon_tv"] <= 2.5 * profile.rule.target_tv
    assert budget_for("rule", QUICK, CURATED).n_checks == sum(
        len(statistical_checks(c)) for c in CURATED
    )


def test_reference_passes_checks_and_sampler_match_is_flagged():
    from exactspec.conformance.adapters.reference import Reference, ReferenceSamplerMatch

    alpha = budget_for("rule", QUICK, CURATED).per_check_false_fail_rate
    ok = statistical_records(Harness(Reference(), "ref"), DEMO, QUICK, alpha)
    assert verdict_of(ok) == "CERTIFIED"
    harness = Harness(ReferenceSamplerMatch(), "sm")
    sm = statistical_records(harness, DEMO, QUICK, alpha, n=4000)
    # accepts differently; exactness not yet confirmed at that deviation
    assert verdict_of(sm) == "INCONCLUSIVE"
    assert all(r.passed for r in sm if r.category == "exactness")
    confirm, unsettled = confirmatory_records(harness, DEMO, QUICK, sm, alpha)
    assert unsettled == [] and confirm and all(r.passed for r in confirm)
    assert {r.check for r in confirm if r.result.details.get("confirmatory")} >= {
        "confirm_position_1",
        "confirm_position_2",
    }
    assert verdict_of(sm + confirm) == "EXACT_NOT_STANDARD"


def test_shared_coin_is_invisible_to_first_token_but_caught():
    from exactspec.conformance.rule.mutants.zoo import SharedCoin

    alpha = budget_for("rule", QUICK, CURATED).per_check_false_fail_rate
    recs = statistical_records(Harness(SharedCoin(), "shared"), DEMO, QUICK, alpha)
    by = {r.check: r for r in recs}
    assert by["position_1"].passed  # the first-token marginal cannot see it
    assert not by["completed_stream"].passed and verdict_of(recs) == "NOT_EXACT"


def test_residual_check_sees_a_wrong_residual_undiluted():
    """`residual_1` (one registry entry, `rule/registry.py`): the token of rounds that reject the first draft
    against norm(max(0, p_1 - q_1)); the reference passes, a residual taken from p fails it."""
    from exactspec.conformance.rule.mutants.zoo import ResidualFromP

    rate = budget_for("rule", QUICK, CURATED).per_check_false_fail_rate
    good = {r.check: r for r in statistical_records(Harness(Reference(), "ref"), DEMO, QUICK, rate)}
    bad = {
        r.check: r
        for r in statistical_records(Harness(ResidualFromP(), "from_p"), DEMO, QUICK, rate)
    }
    assert good["residual_1"].passed and good["residual_1"].category == "standard_rule"
    rounds = good["invariants_statistical_rounds"].result
    rejected_first = round(rounds.n * (1 - rounds.details["reach"][1]))  # rounds with N = 1
    assert good["residual_1"].result.n == rejected_first > 0
    assert not bad["residual_1"].passed and bad["residual_1"].result.p_value < 1e-12
