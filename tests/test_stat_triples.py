"""stat_tests names every test as a triple (after TFP's statistical_testing.py): assert_X runs it,
min_discrepancy_X(n, ...) is what it detects with n samples, min_num_samples_X(discrepancy, ...) the n it needs.
Each test's reported detectable figure is its min_discrepancy_X; each min_num_samples_X inverts it."""

from __future__ import annotations

import numpy as np
import pytest

import exactspec.stat_tests as st

OLD_NAMES = (
    "required_samples",
    "detectable_tv",
    "chisquare_gof",
    "multinomial_exact_test",
    "zero_probability_check",
    "pit_uniformity_test",
    "tokens_per_round_test",
    "mean_tokens_test",
    "two_sample_chisquare",
    "permutation_homogeneity",
    "rare_event_test",
    "drift_test",
    "min_num_seeds_coupling",
)


def test_every_exported_test_is_a_triple_and_no_old_name_is_left():
    tests = [name[len("assert_") :] for name in st.__all__ if name.startswith("assert_")]
    assert len(tests) >= 12
    for x in tests:
        assert f"min_discrepancy_{x}" in st.__all__ and f"min_num_samples_{x}" in st.__all__, x
    for name in st.__all__:
        assert hasattr(st, name), name
    assert not [name for name in OLD_NAMES if hasattr(st, name)]


def test_plan_gof_lives_in_power():
    assert st.plan_gof.__module__ == "exactspec.stat_tests.power"


@pytest.mark.parametrize(
    "x, args",
    [
        ("chisquare_gof", (12, 1e-3, 1e-3)),
        ("multinomial_lr", (12, 1e-3, 1e-3)),
        ("multinomial_exact", (6, 1e-3, 1e-3)),
        ("two_sample_chisquare", (12, 1e-3, 1e-3)),
        ("permutation_homogeneity", (12, 1e-3, 1e-3)),
    ],
)
def test_binned_tv_triples_invert_each_other(x, args):
    find, detect = getattr(st, f"min_num_samples_{x}"), getattr(st, f"min_discrepancy_{x}")
    n = find(0.03, *args)
    if x in ("two_sample_chisquare", "permutation_homogeneity"):  # n per side, equal sizes
        assert detect(n, n, *args) <= 0.03 < detect(n // 2 - 2, n // 2 - 2, *args)
    else:
        assert detect(n, *args) <= 0.03 < detect(n - 1, *args)


def test_other_triples_invert_each_other():
    n = st.min_num_samples_within_support(0.01, 1e-3)
    assert (
        st.min_discrepancy_within_support(n, 1e-3)
        <= 0.01
        < st.min_discrepancy_within_support(n - 1, 1e-3)
    )
    n = st.min_num_samples_pit_uniform(0.05, 1e-3, 1e-3)
    assert (
        st.min_discrepancy_pit_uniform(n, 1e-3, 1e-3)
        <= 0.05
        < st.min_discrepancy_pit_uniform(n - 1, 1e-3, 1e-3)
    )
    n = st.min_num_samples_mean_tokens(0.05, 2.4, 1.8, 1e-3)
    assert (
        st.min_discrepancy_mean_tokens(n, 2.4, 1.8, 1e-3)
        <= 0.05
        < st.min_discrepancy_mean_tokens(n - 1, 2.4, 1.8, 1e-3)
    )
    n = st.min_num_samples_rare_events(2e-3, 3e-4, 1e-4)
    assert st.min_discrepancy_rare_events(n, 3e-4, 1e-4) <= 2e-3
    law = np.array([0.4, 0.3, 0.2, 0.1])
    n = st.min_num_samples_tokens_per_round(0.03, law, 1e-3)
    assert st.min_discrepancy_tokens_per_round(n, law, 1e-3) <= 0.03
    n = st.min_num_samples_coupled_within(0.05, 1e-3)
    assert (
        st.min_discrepancy_coupled_within(n, 1e-3)
        <= 0.05
        < st.min_discrepancy_coupled_within(n - 1, 1e-3)
    )
    n = st.min_num_samples_drift(0.05, 1e-3)
    assert st.min_discrepancy_drift(n, 1e-3) <= 0.05


def test_each_test_reports_its_min_discrepancy():
    rng = np.random.default_rng(0)
    p = np.array([0.5, 0.3, 0.15, 0.05, 0.0])
    s = rng.choice(5, size=3000, p=p)
    r = st.assert_chisquare_gof(s, p, 1e-3)
    assert r.detectable_tv == st.min_discrepancy_chisquare_gof(3000, r.details["n_bins"], 1e-3)
    r = st.assert_chisquare_gof(s, p, 1e-3, method="lr")
    assert r.detectable_tv == st.min_discrepancy_multinomial_lr(3000, r.details["n_bins"], 1e-3)
    assert st.assert_within_support(s, p).details[
        "detectable_zero_mass"
    ] == st.min_discrepancy_within_support(3000)
    small = rng.choice(3, size=12, p=[0.5, 0.3, 0.2])
    r = st.assert_multinomial_exact(small, [0.5, 0.3, 0.2], 1e-2)
    assert r.detectable_tv == st.min_discrepancy_multinomial_exact(12, 3, 1e-2)
    a, b = rng.choice(5, size=2000, p=p), rng.choice(5, size=1500, p=p)
    r = st.assert_two_sample_chisquare(a, b, 1e-3)
    assert r.detectable_tv == st.min_discrepancy_two_sample_chisquare(
        2000, 1500, r.details["n_bins"], 1e-3
    )
    r = st.assert_permutation_homogeneity(a.tolist(), b.tolist(), 1e-2)
    assert r.detectable_tv == st.min_discrepancy_permutation_homogeneity(
        2000, 1500, r.details["n_bins"], 1e-2
    )
    u = rng.random(500)
    assert st.assert_pit_uniform(u, 1e-3).details[
        "detectable_kolmogorov"
    ] == st.min_discrepancy_pit_uniform(500, 1e-3)
    r = st.assert_pit_uniform(u, 1e-3, method="chisquare", bins=10)
    assert r.detectable_tv == st.min_discrepancy_pit_uniform(500, 1e-3, method="chisquare", bins=10)
    law = np.array([0.4, 0.3, 0.2, 0.1])
    N = rng.choice(4, size=800, p=law) + 1
    r = st.assert_tokens_per_round(N, law, 1e-3)
    assert r.detectable_tv == st.min_discrepancy_tokens_per_round(800, law, 1e-3)
    for method, support in (("z", None), ("bernstein", (1, 4))):
        r = st.assert_mean_tokens(N, 2.0, 1.0, 1e-3, method=method, support=support)
        assert r.details["detectable_mean_shift"] == st.min_discrepancy_mean_tokens(
            800, 2.0, 1.0, 1e-3, method=method, support=support
        )
    r = st.assert_rare_events(1, 5000, 3e-4, 1e-4)
    assert r.details["detectable_rate"] == st.min_discrepancy_rare_events(5000, 3e-4, 1e-4)
    r = st.assert_coupled_within(0, 300, 0.05, 1e-3)
    assert r.detectable_tv == st.min_discrepancy_coupled_within(300, 1e-3)
    assert r.details["seeds_needed"] == st.min_num_samples_coupled_within(0.05, 1e-3)
