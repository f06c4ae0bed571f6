"""The sequential statistics (`stat_tests.sequential`) and the coupling certificate (`stat_tests.coupling`): the
anytime bounds cover, the e-process rejects what it should, the sample-size helpers invert the discrepancy ones.

Statistical assertions use fixed seeds; each states its rate, n and the power it relies on."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from exactspec.stat_tests.coupling import (
    assert_coupled_within,
    coupling_bound,
    min_num_samples_coupled_within,
    mismatch_upper_bound,
    spent_rate,
)
from exactspec.stat_tests.sequential import (
    DriftStream,
    drift_bound,
    drift_log_e,
    assert_drift,
    min_discrepancy_drift,
    min_num_samples_drift,
    mixture_log,
    radius,
)


def _stream(values: np.ndarray, strata: np.ndarray, slack: float = 0.0) -> DriftStream:
    """The sums of `values` (in [-1/2, 1/2]) by stratum, with running-mean predictions per stratum."""
    k = int(strata.max()) + 1
    sums, seen, variance = np.zeros(k), np.zeros(k), 0.0
    for value, s in zip(values, strata):
        prediction = min(0.5, max(-0.5, sums[s] / (seen[s] + 1)))
        variance += (value - prediction) ** 2
        sums[s] += value
        seen[s] += 1
    return DriftStream(tuple(sums), variance, slack * values.size, int(values.size))


def test_an_exact_stream_is_never_rejected_and_its_bound_shrinks_like_one_over_root_n():
    rng = np.random.default_rng(1)  # U(0,1) - 1/2: mean 0 exactly; alpha 1e-4, 3 strata
    bounds = []
    for n in (500, 2000, 8000):
        stream = _stream(rng.random(n) - 0.5, rng.integers(0, 3, n))
        assert assert_drift(stream, 1e-4).passed
        bounds.append(drift_bound(stream, 1e-3))
    assert bounds[0] > bounds[1] > bounds[2]
    assert bounds[2] < 0.05 and bounds[0] / bounds[2] == pytest.approx(4.0, rel=0.5)


def test_a_drift_of_one_sign_per_stratum_is_rejected_though_the_pooled_drift_is_zero():
    # stratum 0 drifts +0.05, stratum 1 -0.05: pooled mean 0; n = 8000, alpha 1e-4
    rng = np.random.default_rng(2)
    n = 8000
    strata = rng.integers(0, 2, n)
    values = np.clip(rng.random(n) - 0.5 + np.where(strata == 0, 0.05, -0.05), -0.5, 0.5)
    assert abs(values.mean()) < 0.01
    assert not assert_drift(_stream(values, strata), 1e-4).passed
    assert assert_drift(_stream(values, np.zeros(n, dtype=int)), 1e-4).passed  # pooled: invisible


def test_the_slack_absorbs_a_drift_within_it():
    # mean drift < 0.02, slack 0.02 per value: the null holds; alpha 1e-4, n 20000
    rng = np.random.default_rng(3)
    values = np.clip(rng.random(20000) - 0.5 + 0.02, -0.5, 0.5)
    assert assert_drift(_stream(values, np.zeros(values.size, dtype=int), slack=0.02), 1e-4).passed
    assert not assert_drift(_stream(values, np.zeros(values.size, dtype=int)), 1e-4).passed


def test_the_anytime_bound_covers_the_true_drift_at_every_look():
    """300 streams of 4000 values, true drift 0.02, looks every 200 values: the bound at beta = 0.05 is below the
    drift at some look in at most a few streams (its coverage, 0.95, holds over all looks at once)."""
    rng = np.random.default_rng(4)
    misses = 0
    for _ in range(300):
        values = np.clip(rng.random(4000) - 0.5 + 0.02, -0.5, 0.5)
        true = float(np.clip(np.linspace(0, 1, 10**5) - 0.5 + 0.02, -0.5, 0.5).mean())
        misses += any(
            drift_bound(_stream(values[:n], np.zeros(n, dtype=int)), 0.05) < true
            for n in range(200, 4001, 200)
        )
    assert misses <= 25  # <= 15 expected at 0.05; the binomial 0.999 quantile at 300 x 0.05 is 28


def test_radius_and_sample_size_helpers_are_consistent_and_refuse_bad_input():
    assert radius(100.0, 1e-3) > radius(100.0, 1e-2)
    n = min_num_samples_drift(0.025, 1e-3, strata=3)
    assert min_discrepancy_drift(n, 1e-3, 3) <= 0.025 < min_discrepancy_drift(n - 1, 1e-3, 3)
    for bad in ((100.0, 0.0), (-1.0, 0.1)):
        with pytest.raises(ValueError):
            radius(*bad)
    with pytest.raises(ValueError, match="count"):
        min_discrepancy_drift(0, 1e-3)
    assert mixture_log([0.0, 0.0]) == pytest.approx(0.0)
    assert mixture_log([-math.inf, math.log(4.0)]) == pytest.approx(math.log(2.0))


def test_drift_log_e_grows_with_a_drift_and_stays_small_without():
    rng = np.random.default_rng(5)
    flat = _stream(rng.random(4000) - 0.5, np.zeros(4000, dtype=int))
    tilted = _stream(np.clip(rng.random(4000) - 0.45, -0.5, 0.5), np.zeros(4000, dtype=int))
    assert drift_log_e(flat) < 3.0 < 20.0 < drift_log_e(tilted)


def test_coupling_bounds_zero_and_some_mismatches_and_spends_beta_over_k():
    assert sum(spent_rate(1e-3, k) for k in range(10_000)) <= 1e-3
    n0 = min_num_samples_coupled_within(0.05, 1e-3)  # per-token 0.05 = completion 0.025
    assert mismatch_upper_bound(0, n0, 1e-3) <= 0.025 < mismatch_upper_bound(0, n0 - 1, 1e-3)
    assert min_num_samples_coupled_within(0.05, 1e-3, mismatches=2) > n0
    # k = 0: the bound is the exact (1 - beta_0) quantile: (1 - pi)^n = beta_0
    pi = mismatch_upper_bound(0, 300, 1e-3)
    assert (1 - pi) ** 300 == pytest.approx(spent_rate(1e-3, 0), rel=1e-6)
    bound = coupling_bound(0, 300, 1e-3, seed_space=2**32 - 1)
    assert bound.token_tv == pytest.approx(2 * bound.completion_tv) and bound.completion_tv > pi
    result = assert_coupled_within(0, 300, 0.05, 1e-3)
    assert result.passed and "reaches" in result.message
    short = assert_coupled_within(3, 300, 0.05, 1e-3)
    assert not short.passed and short.details["seeds_needed"] > 300
    with pytest.raises(ValueError):
        mismatch_upper_bound(5, 3, 1e-3)


def test_certifying_with_k_mismatches_at_the_target_has_probability_at_most_beta_k():
    """At pi = the target, certifying with k mismatches needs <= k among the first n_k seeds: a binomial tail."""
    for k in range(4):
        n = min_num_samples_coupled_within(0.1, 1e-2, k)
        assert stats.binom.cdf(k, n, 0.05) <= spent_rate(1e-2, k) * (1 + 1e-9)
