"""Power planning and the suite-level error budget."""

import numpy as np
import pytest
from statsmodels.stats.power import GofChisquarePower

from exactspec import stat_tests as st


@pytest.mark.parametrize("eps", [0.005, 0.01, 0.02, 0.05, 0.2])
@pytest.mark.parametrize("bins", [2, 10, 1000, 20000])
@pytest.mark.parametrize("false_fail_rate,false_pass_rate", [(0.01, 0.1), (1e-8, 1e-3)])
def test_planning_round_trip(eps, bins, false_fail_rate, false_pass_rate):
    n = st.min_num_samples_chisquare_gof(eps, bins, false_fail_rate, false_pass_rate)
    assert st.min_discrepancy_chisquare_gof(n, bins, false_fail_rate, false_pass_rate) <= eps
    if n > 1:
        # n is the smallest
        assert st.min_discrepancy_chisquare_gof(n - 1, bins, false_fail_rate, false_pass_rate) > eps
    assert st.chisquare_power(n, 2 * eps, bins, false_fail_rate) >= 1 - false_pass_rate - 1e-6


def test_matches_statsmodels_solve_power():
    n = st.min_num_samples_chisquare_gof(0.02, 20, 0.001, 0.05)
    ref = GofChisquarePower().solve_power(
        effect_size=0.04, nobs=None, alpha=0.001, power=0.95, n_bins=20
    )
    assert n == int(np.ceil(ref)) or abs(n - ref) < 1.0


def test_monotonicity():
    assert st.min_num_samples_chisquare_gof(
        0.01, 10, 1e-6, 1e-3
    ) > st.min_num_samples_chisquare_gof(0.01, 10, 1e-2, 1e-3)
    assert st.min_num_samples_chisquare_gof(
        0.01, 100, 1e-3, 1e-3
    ) > st.min_num_samples_chisquare_gof(0.01, 10, 1e-3, 1e-3)
    assert st.min_discrepancy_chisquare_gof(1e6, 10, 1e-3, 1e-3) < st.min_discrepancy_chisquare_gof(
        1e4, 10, 1e-3, 1e-3
    )


def test_plan_gof_fixed_point():
    p = 1 / np.arange(1, 1001)
    p /= p.sum()
    n, bins = st.plan_gof(p, 0.02, 1e-3, 0.1)
    from exactspec.stat_tests.binning import pool_bins

    assert pool_bins(p, n, 20)[1].size == bins
    assert st.min_discrepancy_chisquare_gof(n, bins, 1e-3, 0.1) <= 0.02


@pytest.mark.parametrize(
    "fn,args,match",
    [
        (st.min_num_samples_chisquare_gof, (0.0, 10, 0.01, 0.1), "epsilon_tv"),
        (st.min_num_samples_chisquare_gof, (1.5, 10, 0.01, 0.1), "epsilon_tv"),
        (st.min_num_samples_chisquare_gof, (0.1, 1, 0.01, 0.1), "n_bins"),
        (st.min_num_samples_chisquare_gof, (0.1, 2.5, 0.01, 0.1), "n_bins"),
        (st.min_num_samples_chisquare_gof, (0.1, 10, 0.0, 0.1), "false_fail_rate"),
        (st.min_num_samples_chisquare_gof, (0.1, 10, 0.01, 1.0), "false_pass_rate"),
        (
            st.min_num_samples_chisquare_gof,
            (0.1, 10, 0.6, 0.5),
            "false_fail_rate \\+ false_pass_rate",
        ),
        (st.min_discrepancy_chisquare_gof, (0, 10, 0.01, 0.1), "n"),
        (st.min_discrepancy_chisquare_gof, (100, 10, np.nan, 0.1), "false_fail_rate"),
    ],
)
def test_planning_errors(fn, args, match):
    with pytest.raises(ValueError, match=match):
        fn(*args)


def test_error_budget_bonferroni_and_holm():
    b = st.ErrorBudget(1e-6, n_checks=4, false_pass_rate=1e-3)
    assert b.per_check_false_fail_rate == pytest.approx(2.5e-7)
    assert st.ErrorBudget(
        1e-6, n_checks=4, tail_safety=2
    ).per_check_false_fail_rate == pytest.approx(1.25e-7)
    assert b.false_fail_rates([1, 1, 2, 4]).sum() == pytest.approx(1e-6)
    assert b.bonferroni([1e-7, 0.5])["reject"] == [True, False]
    h = b.holm([3e-7, 1e-7, 0.9])
    # Holm with 4 checks: sorted 1e-7 < 1e-6/4 reject; 3e-7 < 1e-6/3 reject; 0.9 no
    assert h["reject"] == [True, True, False] and not h["passed"]
    assert b.bonferroni([3e-7, 1e-7, 0.9])["reject"] == [False, True, False]
    assert b.holm([0.5, 0.2])["passed"]
    assert b.min_num_samples_chisquare_gof(0.01, 10) == st.min_num_samples_chisquare_gof(
        0.01, 10, 2.5e-7, 1e-3
    )
    assert b.min_discrepancy_chisquare_gof(1e6, 10) == st.min_discrepancy_chisquare_gof(
        1e6, 10, 2.5e-7, 1e-3
    )


def test_error_budget_summarize():
    b = st.ErrorBudget(1e-6, n_checks=2)
    p = np.full(10, 0.1)
    rs = [
        st.assert_chisquare_gof(np.arange(1000) % 10, p, b.per_check_false_fail_rate),
        st.assert_tokens_per_round(
            np.arange(1000) % 5 + 1, np.full(5, 0.2), b.per_check_false_fail_rate
        ),
    ]
    s = b.summarize(rs)
    assert (
        s["passed"]
        and s["within_budget"]
        and s["worst_detectable_tv"] == max(r.detectable_tv for r in rs)
    )
    assert not b.summarize(rs + rs)["within_budget"]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(total_false_fail=0.0), "total_false_fail"),
        (dict(total_false_fail=2.0), "total_false_fail"),
        (dict(n_checks=0), "n_checks"),
        (dict(n_checks=1.5), "n_checks"),
        (dict(false_pass_rate=1.0), "false_pass_rate"),
        (dict(tail_safety=0.5), "tail_safety"),
    ],
)
def test_error_budget_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        st.ErrorBudget(**kwargs)


def test_error_budget_method_errors():
    b = st.ErrorBudget(1e-6, n_checks=2)
    with pytest.raises(ValueError, match="p_values"):
        b.holm([0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="p_values"):
        b.holm([1.5])
    with pytest.raises(ValueError, match="weights"):
        b.false_fail_rates([1, -1])
