"""How the sequence suite draws and scores its samples: rows of generate_batch calls
with seeds spaced by the batch size, batched teacher forcing, case workers."""

from __future__ import annotations

import numpy as np
import pytest

from exactspec.conformance.core.profiles import get_profile
from exactspec.conformance.sequence import draws
from exactspec.conformance.sequence.adapters import GpuImplAdapter
from exactspec.conformance.sequence.cases import PIT_PROMPT
from exactspec.conformance.sequence.models import pit_pair, target_rows, target_rows_many
from tests.sequence_level import run_sequence_result
from exactspec.reference.warping import SamplingParams


pytestmark = pytest.mark.usefixtures("one_torch_thread")


class _Recorder:
    """generate_batch that records (number of prompts, seed) and returns row r = [seed + r]."""

    def __init__(self):
        self.calls = []

    def generate(self, target, draft, prompt_ids, max_new_tokens, k, sampling, seed):
        raise AssertionError("a batched draw must not call generate")

    def generate_batch(self, target, draft, prompts, max_new_tokens, k, sampling, seed):
        self.calls.append((len(prompts), seed))
        return [[seed + r] for r in range(len(prompts))]


class _Run:
    def __init__(self, adapter, rows_per_call):
        self.adapter, self.base, self.target, self.draft = adapter, 1000, None, None
        self.rows_per_call = rows_per_call
        self.case = type(
            "C", (), {"max_new_tokens": 1, "sampling": SamplingParams(1.0), "k": 2, "batch": 1}
        )()
        self.prompts = [(1, 2, 3)]

    def generate(self, prompt, k, seed):
        return [seed]


def test_batched_draw_spaces_seeds_by_the_batch_size():
    run = _Run(_Recorder(), rows_per_call=32)
    samples, seeds = draws.draw(run, (1, 2, 3), 2, 70)
    assert run.adapter.calls == [(32, 1000), (32, 1032), (6, 1064)]
    # row r of call j: seed base + j*32 + r, no repeat
    assert [s[0] for s in samples] == list(range(1000, 1070))
    assert seeds[:33] == [1000] * 32 + [1032]


def test_multi_prompt_case_packs_copies_of_its_prompts_into_each_call():
    run = _Run(_Recorder(), rows_per_call=32)
    run.case.batch, run.prompts = 2, [(1, 2, 3), (4, 5, 6)]
    rows, seeds = draws.draw_rows(run, 20)
    # 16 copies of the 2 prompts, then the 4 left
    assert run.adapter.calls == [
        (32, 1000),
        (8, 1032),
    ]
    assert [s[0] for s in rows[0]] == list(range(1000, 1032, 2)) + [1032, 1034, 1036, 1038]
    assert [s[0] for s in rows[1]] == [x + 1 for x in range(1000, 1032, 2)] + [
        1033,
        1035,
        1037,
        1039,
    ]
    assert len(seeds) == 20
    quick = _Run(_Recorder(), rows_per_call=1)
    quick.case.batch, quick.prompts = 2, [(1, 2, 3), (4, 5, 6)]
    draws.draw_rows(quick, 3)
    # 1 row per call: one call per sample, seed base + i
    assert quick.adapter.calls == [
        (2, 1000),
        (2, 1001),
        (2, 1002),
    ]


def test_draw_without_generate_batch_calls_generate_per_sample():
    class OnlyGenerate:
        def generate(self, *args):
            raise AssertionError("not reached: _Run.generate is the suite's call")

    run = _Run(OnlyGenerate(), rows_per_call=32)
    samples, seeds = draws.draw(run, (1, 2, 3), 2, 5)
    assert samples == [[1000], [1001], [1002], [1003], [1004]] and seeds == [
        1000,
        1001,
        1002,
        1003,
        1004,
    ]
    assert draws.rows_used(run.adapter, 32) == 1 and draws.rows_used(_Recorder(), 32) == 32
    assert draws.rows_used(_Recorder(), 1) == 1


def test_batched_teacher_forcing_matches_one_forward_per_sample():
    target, _ = pit_pair()
    sampling = SamplingParams(0.7, top_k=20)
    rng = np.random.default_rng(0)
    samples = [list(rng.integers(0, 64, size=n)) for n in (3, 1, 3, 0, 5, 3)]
    got = dict(target_rows_many(target, PIT_PROMPT, samples, sampling))
    assert sorted(got) == [0, 1, 2, 4, 5]  # the empty sample has no rows
    for i, rows in got.items():
        np.testing.assert_allclose(
            rows, target_rows(target, PIT_PROMPT, samples[i], sampling), atol=1e-6
        )


class _SharedStream(GpuImplAdapter):
    """A batched generator whose rows all take the stream of the call's seed: every row of a call is the same."""

    def generate_batch(self, target, draft, prompts, max_new_tokens, k, sampling, seed):
        row = super().generate_batch(target, draft, prompts[:1], max_new_tokens, k, sampling, seed)[
            0
        ]
        return [row] * len(prompts)


@pytest.mark.parametrize("profile", ["quick", "standard"])
def test_every_profile_rejects_rows_that_share_one_stream(profile):
    assert get_profile(profile).sequence.rows_for("exact") == 32
    result = run_sequence_result(_SharedStream(), profile, cases=["t1.0_k2"])
    case = result.cases[0]
    assert case["status"] == "ok" and case["rows_per_call"] == 32
    assert result.verdict == "NOT_EXACT" and not case["passed"]


def test_case_workers_give_the_records_of_a_serial_run():
    cases = ["pit_t1.0_k4", "greedy_v64"]
    serial = run_sequence_result("reference", "quick", cases=cases, workers=1)
    parallel = run_sequence_result("reference", "quick", cases=cases, workers=2)
    assert [(r.case, r.check, r.passed, r.result.p_value) for r in parallel.records] == [
        (r.case, r.check, r.passed, r.result.p_value) for r in serial.records
    ]


def test_quick_draws_its_pit_cases_one_generate_call_per_sample():
    """The batch-1 path's law stays certified at quick: its PIT cases call `generate` once per sample."""
    quick, standard = get_profile("quick").sequence, get_profile("standard").sequence
    assert (quick.rows_for("pit"), quick.rows_for("exact"), standard.rows_for("pit")) == (1, 32, 32)
    result = run_sequence_result(GpuImplAdapter(), "quick", cases=["pit_t1.0_k4", "t1.0_k2"])
    assert result.verdict == "CERTIFIED"
    assert {c["name"]: c["rows_per_call"] for c in result.cases} == {
        "pit_t1.0_k4": 1,
        "t1.0_k2": 32,
    }
    assert result.extra["pit_rows_per_call"] == 1 and result.extra["rows_per_call"] == 32
