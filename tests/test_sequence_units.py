"""Unit tests of the sequence-level machinery (fast)."""

from __future__ import annotations


import numpy as np
import pytest
import torch

from exactspec.conformance.sequence.adapters import hf_sampling_kwargs, load_adapter
from exactspec.conformance.sequence.cases import PROMPT_A
from exactspec.conformance.sequence.exact_law import sequence_law
from exactspec.conformance.sequence.models import tiny_pair
from exactspec.conformance.sequence.reference_loop import ReferenceLoop
from exactspec.reference.sampling import sample_token
from exactspec.conformance.sequence.report import to_markdown
from exactspec.conformance.sequence.checks import plain_greedy, structure_check
from tests.sequence_level import run_sequence_suite
from exactspec.reference.sequences import target_sequence_law
from exactspec.reference.warping import SamplingParams


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.mark.parametrize("eos", [None, 1])
def test_law_matches_reference_target_law(eos):
    target, _ = tiny_pair(eos_token_id=eos)
    sampling = SamplingParams(0.8, top_k=4) if eos is None else SamplingParams(1.0)
    law = sequence_law(target, PROMPT_A, 3, sampling)
    assert abs(law.probs.sum() - 1) < 1e-12
    if eos is None:  # the oracle's whole-sequence law for a prefix-dependent toy model, same rows

        def rows(prefix):
            ids = torch.tensor([list(prefix)])
            with torch.no_grad():
                return sampling.warp(target(input_ids=ids).logits[0, -1].double().numpy()).tolist()

        ref = target_sequence_law(rows, PROMPT_A, 3)
        for outcome, p in ref.items():
            assert abs(law.probs[law.index[outcome]] - p) < 1e-9
    else:
        assert all(o[-1] == eos or len(o) == 3 for o in law.outcomes)
        assert any(len(o) < 3 for o in law.outcomes)


def test_reference_loop_deterministic_and_well_formed():
    target, draft = tiny_pair(eos_token_id=1)
    loop = ReferenceLoop()
    a = [loop.generate(target, draft, PROMPT_A, 4, 3, SamplingParams(1.0), s) for s in range(30)]
    b = [loop.generate(target, draft, PROMPT_A, 4, 3, SamplingParams(1.0), s) for s in range(30)]
    assert a == b
    assert structure_check(a, 4, 1, 6, range(30)).passed


def test_structure_check_flags_tokens_after_eos_and_overlong():
    assert not structure_check([[2, 1, 3]], 3, 1, 6, [0]).passed
    assert not structure_check([[2, 2, 3, 4]], 3, None, 6, [0]).passed
    assert not structure_check([[2]], 3, None, 6, [0]).passed
    assert structure_check([[2, 1]], 3, 1, 6, [0]).passed


def test_inverse_cdf_never_zero_probability():
    rng = np.random.default_rng(0)
    probs = np.array([0.0, 0.5, 0.0, 0.5, 0.0])
    assert {sample_token(probs, rng) for _ in range(200)} <= {1, 3}


def test_greedy_reference_equals_plain_greedy():
    target, draft = tiny_pair()
    out = ReferenceLoop().generate(target, draft, PROMPT_A, 6, 3, SamplingParams(0.0), 0)
    assert out == plain_greedy(target, PROMPT_A, 6)


def test_hf_sampling_kwargs_disable_defaults():
    kw = hf_sampling_kwargs(SamplingParams(0.7))
    assert kw["top_k"] == 0 and kw["top_p"] == 1.0 and kw["min_p"] is None and kw["do_sample"]
    assert hf_sampling_kwargs(SamplingParams(0.0))["do_sample"] is False


def test_loader_refuses_rule_level_adapters():
    class RuleOnly:
        def verify(self, *a):
            return []

    from exactspec.errors import AdapterLoadError

    assert load_adapter(RuleOnly()) is None and load_adapter("reference") is not None
    with pytest.raises(AdapterLoadError, match="the sequence level was asked for"):
        run_sequence_suite(RuleOnly(), "quick")


def test_small_run_reports_alpha_n_and_detectable():
    report = run_sequence_suite("reference", "quick", cases=["t1.0_k2", "greedy_tiny"])
    assert report["passed"]
    checks = [c for case in report["cases"] for c in case["checks"]]
    stat = [c for c in checks if c["false_fail_rate"] > 0]
    assert stat and all(c["n"] > 0 and c["detectable_tv"] is not None for c in stat)
    md = to_markdown(report)
    assert "CERTIFIED" in md and "binned TV" in md
