"""Cost calibration: robust to slow outliers, interleaved, cached per key, announced while it runs."""

from __future__ import annotations

import math

import pytest
import torch

from exactspec.gpu_impl.cost import cost_calibration as cc
from exactspec.gpu_impl.cost.k_policy import MIN_LOG_NOISE, Costs
from tests.tiny_models import scaled_llama

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def fake_clock(true_v: dict[int, float], spikes: set[int]):
    """time_one(n) = 0.01 s x v(n), the calls numbered in `spikes` 20x slower (a busy machine)."""
    calls = {"n": 0, "order": []}

    def time_one(n: int) -> float:
        calls["n"] += 1
        calls["order"].append(n)
        return 0.01 * true_v[n] * (20.0 if calls["n"] in spikes else 1.0)

    return time_one, calls


def test_measurement_is_interleaved_and_a_slow_outlier_moves_nothing():
    true_v = {1: 1.0, 2: 1.1, 3: 1.3, 5: 1.6}
    time_one, calls = fake_clock(true_v, spikes={9, 17, 30})
    lines: list[str] = []
    costs = cc.measure_costs(time_one, [1, 2, 3, 5], reps=7, progress=lines.append)
    for n, v in true_v.items():
        assert costs.v[n] == pytest.approx(v, rel=1e-9)
    assert costs.t1_s == pytest.approx(0.01)
    order = calls["order"][4:]  # after the warm-up pass: 1, rotated widths, 1 per repetition
    assert order[:5] == [1, 2, 3, 5, 1] and order[5:10] == [1, 3, 5, 2, 1]
    assert (
        len(lines) == 8
        and "cached" in lines[0]
        and lines[-1].startswith("calibrating the cost policy: repetition 7 done")
    )


def test_noise_reflects_the_spread_and_the_budget_stops_early():
    """The standard error follows the undisturbed forwards' jitter (not the delays); a spent budget stops at
    the minimum of three repetitions, and a quiet machine stops at `reps`."""
    import random

    rng = random.Random(0)
    jittery = cc.measure_costs(lambda n: 0.01 * n * (1 + abs(rng.gauss(0, 0.1))), [1, 2, 4], reps=7)
    assert 2 * MIN_LOG_NOISE < jittery.v_noise[2] < 0.2  # 10 % jitter
    steady = cc.measure_costs(
        time_sliced_clock({1: 1.0, 2: 2.0, 4: 4.0}, 0, 0.5), [1, 2, 4], reps=7
    )
    assert steady.v_noise[2] < jittery.v_noise[2]  # 2 % jitter, half the forwards descheduled
    stopped: list[str] = []
    cc.measure_costs(
        time_sliced_clock({1: 1.0, 2: 2.0, 4: 4.0}, 0, 0.8),
        [1, 2, 4],
        reps=9,
        budget_s=0.0,
        progress=stopped.append,
    )
    assert len(stopped) == 1 + 3  # the announcement, then three repetitions
    counted: list[str] = []
    quiet = cc.measure_costs(lambda n: 0.01 * n, [1, 2, 4], reps=3, progress=counted.append)
    assert (
        quiet.v_noise[2] == pytest.approx(math.hypot(MIN_LOG_NOISE, MIN_LOG_NOISE))
        and quiet.v[4] == pytest.approx(4.0)
        and len(counted) == 4
    )
    with pytest.raises(ValueError, match="widths must include 1"):
        cc.measure_costs(lambda n: 0.01, [2, 3])


def test_cache_round_trip_and_key(tmp_path, monkeypatch):
    monkeypatch.setenv("EXACTSPEC_CACHE", str(tmp_path))
    model = scaled_llama(0, layers=1, scale=20)
    time_one, calls = fake_clock({1: 1.0, 2: 1.2, 3: 1.5}, spikes=set())
    first, source = cc.cached_costs(model, 1, {1: "mm"}, [1, 2, 3], time_one)
    assert source == "measured" and calls["n"] > 0
    spent = calls["n"]
    again, source = cc.cached_costs(model, 1, {1: "mm"}, [1, 2, 3], time_one)
    assert (
        source == "cache"
        and calls["n"] == spent
        and again.v == first.v
        and again.v_noise == first.v_noise
    )
    path = cc.calibration_file(cc.calibration_key(model, 1, {1: "mm"}, [1, 2, 3]))
    assert path.parent == tmp_path / "calibration" and path.is_file()
    keys = {
        cc.calibration_file(cc.calibration_key(model, *variant, [1, 2, 3]))
        for variant in [(1, {1: "mm"}), (2, {1: "mm"}), (1, None)]
    }
    assert len(keys) == 3  # batch size and kernel plan are part of the key
    other = scaled_llama(1, layers=1, scale=20)
    assert cc.model_fingerprint(other) != cc.model_fingerprint(model)
    before = torch.get_num_threads()
    torch.set_num_threads(before + 1)
    try:
        assert cc.calibration_key(model, 1, None, [1])["threads"] == before + 1
    finally:
        torch.set_num_threads(before)
    path.write_text("{not json")
    assert cc.load_costs(cc.calibration_key(model, 1, {1: "mm"}, [1, 2, 3]))[0] is None


def test_costs_read_back_from_json_keys():
    costs = Costs({"1": 1.0, "2": 1.5}, 0.2, {"2": 0.04})
    assert costs.v == {1: 1.0, 2: 1.5} and costs.v_noise == {1: 0.0, 2: 0.04}


def test_wider_forward_is_never_cheaper():
    """A monotone least-squares fit: v(2) < 1 is raised to 1; v(3) > v(4) are pooled (equal errors: their
    geometric mean), not both raised to the larger as a running maximum did."""
    time_one, _ = fake_clock({1: 1.0, 2: 0.9, 3: 1.4, 4: 1.2}, spikes=set())
    costs = cc.measure_costs(time_one, [1, 2, 3, 4], reps=3)
    assert costs.v == {
        1: 1.0,
        2: 1.0,
        3: pytest.approx(math.sqrt(1.4 * 1.2)),
        4: pytest.approx(math.sqrt(1.4 * 1.2)),
    }


def test_non_decreasing_pools_adjacent_violators_by_weight():
    assert cc.non_decreasing([0.0, 0.2, 0.1, 0.3], [1, 1, 1, 1]) == pytest.approx(
        [0.0, 0.15, 0.15, 0.3]
    )
    assert cc.non_decreasing([0.0, 0.4, 0.1], [1, 3, 1]) == pytest.approx([0.0, 0.325, 0.325])


def time_sliced_clock(true_v: dict[int, float], seed: int, disturbed: float):
    """time_one(n) = 0.01 s x v(n) x (1 + 2 % jitter), and in a share `disturbed` of the calls descheduled for
    60-140 % as long again: what a forward meets on a CPU whose cores other processes keep busy."""
    import random

    rng = random.Random(seed)

    def time_one(n: int) -> float:
        delay = rng.uniform(0.6, 1.4) if rng.random() < disturbed else 0.0
        return 0.01 * true_v[n] * (1 + abs(rng.gauss(0, 0.02))) * (1 + delay)

    return time_one


def test_a_flat_but_noisy_machine_is_not_ratcheted_upward():
    """v(n) = 1.2 for every n >= 2, half the forwards descheduled: the fitted v(9) stays near 1.2 over 20
    seeds (median 1.20; the median of per-repetition ratios that this replaced gave 1.34)."""
    import statistics

    flat = {n: 1.0 if n == 1 else 1.2 for n in range(1, 10)}
    fitted = [
        cc.measure_costs(time_sliced_clock(flat, seed, 0.5), list(range(1, 10)), reps=7).v[9]
        for seed in range(20)
    ]
    assert statistics.median(fitted) < 1.25, fitted


@pytest.mark.parametrize("disturbed", [0.0, 0.5, 0.8])
def test_a_time_sliced_machine_is_measured_at_its_undisturbed_cost(disturbed):
    """Up to 80 % of forwards descheduled (both cores busy here): v(5) and v(9) within 6 % over 20 seeds
    (2.5 % at worst), with repetitions added while a width may not have run undisturbed.  The median of
    per-repetition ratios that this replaced was up to x1.37 off at 50 % and x1.49 at 80 % on this clock."""
    true_v = {n: 1.0 + 0.05 * (n - 1) for n in range(1, 10)}
    worst = 0.0
    for seed in range(20):
        costs = cc.measure_costs(
            time_sliced_clock(true_v, seed, disturbed), list(range(1, 10)), reps=7
        )
        worst = max(worst, *(abs(math.log(costs.v[n] / true_v[n])) for n in (5, 9)))
        assert costs.v_noise[9] < 0.1
    assert worst < 0.06


def test_a_calibration_taken_with_other_cores_busy_is_measured_again(tmp_path, monkeypatch):
    """Taken with 2 cores busy, used idle: measured again (and said why); the new record serves the idle runs."""
    monkeypatch.setenv("EXACTSPEC_CACHE", str(tmp_path))
    model = scaled_llama(0, layers=1, scale=20)
    time_one, calls = fake_clock({1: 1.0, 2: 1.2}, spikes=set())
    monkeypatch.setattr(cc, "busy_cores_now", lambda: 2)
    assert cc.cached_costs(model, 1, None, [1, 2], time_one)[1] == "measured"
    assert cc.cached_costs(model, 1, None, [1, 2], time_one)[1] == "cache"  # as busy: keep it
    monkeypatch.setattr(cc, "busy_cores_now", lambda: 0)
    costs, source = cc.cached_costs(model, 1, None, [1, 2], time_one)
    assert (
        source
        == f"measured again: the cached calibration was taken with 2 of {cc.os.cpu_count()} cores busy, now 0"
    )
    assert cc.cached_costs(model, 1, None, [1, 2], time_one)[1] == "cache"
    key = cc.calibration_key(model, 1, None, [1, 2])
    record = cc.json.loads(cc.calibration_file(key).read_text())
    assert record["busy_cores"] == 0
    del record["busy_cores"]  # a record from before busy cores were kept: measured again
    cc.calibration_file(key).write_text(cc.json.dumps(record))
    assert cc.load_costs(key) == (
        None,
        "the cached calibration does not say how busy the machine was",
    )


def test_measure_and_store_replaces_the_cached_record(tmp_path, monkeypatch):
    monkeypatch.setenv("EXACTSPEC_CACHE", str(tmp_path))
    monkeypatch.setattr(cc, "busy_cores_now", lambda: 0)
    model = scaled_llama(0, layers=1, scale=20)
    cc.cached_costs(
        model, 1, None, [1, 2, 3], fake_clock({1: 1.0, 2: 1.1, 3: 1.2}, spikes=set())[0]
    )
    fresh = cc.measure_and_store(
        model, 1, None, [1, 2, 3], fake_clock({1: 1.0, 2: 2.0, 3: 3.0}, spikes=set())[0]
    )
    costs, why = cc.load_costs(cc.calibration_key(model, 1, None, [1, 2, 3]))
    assert why == "" and costs.v == fresh.v and costs.v[3] == pytest.approx(3.0)


def test_the_suites_own_calibrations_stay_out_of_the_users_cache(
    calibrations_kept_out_of_the_users_cache,
):
    """Without a cache of its own, a test's calibration lands in the session's temporary folder (conftest)."""
    model = scaled_llama(2, layers=1, scale=20)
    time_one, _ = fake_clock({1: 1.0, 2: 1.2}, spikes=set())
    key = cc.calibration_key(model, 1, None, [1, 2])
    assert cc.cached_costs(model, 1, None, [1, 2], time_one)[1] in {"measured", "cache"}
    path = cc.calibration_file(key)
    assert path.parent == calibrations_kept_out_of_the_users_cache and path.is_file()
    assert not (cc.cache_root() / "calibration" / path.name).exists()
