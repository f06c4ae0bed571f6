"""Every bad input to the GoF tests raises a ValueError naming the argument."""

import numpy as np
import pytest

from exactspec import stat_tests as st

P = np.full(4, 0.25)
S = np.arange(400) % 4


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(samples=S, p=[0.3, 0.3, 0.3, 0.3], false_fail_rate=0.01), "p"),
        (dict(samples=S, p=[np.nan, 0.5, 0.25, 0.25], false_fail_rate=0.01), "p"),
        (dict(samples=S, p=[-0.25, 0.5, 0.5, 0.25], false_fail_rate=0.01), "p"),
        (dict(samples=S, p=np.full((2, 2), 0.25), false_fail_rate=0.01), "p"),
        (dict(samples=S, p=None, false_fail_rate=0.01), "p"),
        (dict(samples=np.array([0, 4]), p=P, false_fail_rate=0.01), "samples"),
        (dict(samples=np.array([-1, 0]), p=P, false_fail_rate=0.01), "samples"),
        (dict(samples=np.array([0.5, 1.0]), p=P, false_fail_rate=0.01), "samples"),
        (dict(samples=S.reshape(2, -1), p=P, false_fail_rate=0.01), "samples"),
        (dict(samples=np.array(["a"]), p=P, false_fail_rate=0.01), "samples"),
        (dict(samples=np.arange(8) % 4, p=P, false_fail_rate=0.01), "samples"),  # n too small
        (dict(samples=np.array([], dtype=int), p=P, false_fail_rate=0.01), "samples"),
        (dict(samples=S, p=P, false_fail_rate=0.0), "false_fail_rate"),
        (dict(samples=S, p=P, false_fail_rate=1.0), "false_fail_rate"),
        (dict(samples=S, p=P, false_fail_rate=None), "false_fail_rate"),
        (dict(samples=S, p=P, false_fail_rate=0.01, false_pass_rate=0.0), "false_pass_rate"),
        (dict(samples=S, p=P, false_fail_rate=0.01, method="kl"), "method"),
        (dict(samples=S, p=P, false_fail_rate=0.01, min_expected=-1), "min_expected"),
        (dict(samples=S, p=P, false_fail_rate=0.01, counts=np.ones(4, int)), "samples"),
        (dict(p=P, false_fail_rate=0.01, counts=np.ones(3, int)), "counts"),
        (dict(p=P, false_fail_rate=0.01, counts=np.array([1, -1, 1, 1])), "counts"),
    ],
)
def test_chisquare_gof_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        st.assert_chisquare_gof(**kwargs)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(samples=np.array([5]), p=P), "samples"),
        (dict(samples=np.array([], dtype=int), p=P), "samples"),
        (dict(samples=np.array([0]), p=[0.5, 0.6]), "p"),
        (dict(samples=np.array([0]), p=P, false_pass_rate=2.0), "false_pass_rate"),
    ],
)
def test_zero_check_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        st.assert_within_support(**kwargs)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(counts=[1, 2, 3, 4], p=P, false_fail_rate=0.01, statistic="g"), "statistic"),
        (dict(counts=[1, 2, 3, 4], p=P, false_fail_rate=2.0), "false_fail_rate"),
        (dict(counts=[1, 2, 3, 4], p=P, false_fail_rate=0.01, max_enumerate=0, n_sim=0), "n_sim"),
        (dict(counts=[1, 2, 3, 4], p=P, false_fail_rate=1e-12, max_enumerate=0), "false_fail_rate"),
        (dict(counts=[0, 0, 0, 0], p=P, false_fail_rate=0.01), "samples"),
        (dict(counts=[1, 2, 3], p=P, false_fail_rate=0.01), "counts"),
    ],
)
def test_exact_test_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        st.assert_multinomial_exact(**kwargs)


def test_one_validation_module_serves_oracle_and_stat_tests():
    from exactspec.reference import validation

    assert st.gof.as_prob_vector is validation.as_prob_vector
    assert validation.as_prob_vector([0.5, 0.5 + 1e-7]).sum() == pytest.approx(1.0, abs=1e-15)
    with pytest.raises(ValueError, match="false_fail_rate is required"):
        validation.check_error_rates(None, 0.1)
    with pytest.raises(ValueError, match="false_fail_rate \\+ false_pass_rate"):
        validation.check_error_rates(0.6, 0.5)
    with pytest.raises(ValueError, match="min_expected must be a positive number"):
        validation.check_positive_number(0, "min_expected")
