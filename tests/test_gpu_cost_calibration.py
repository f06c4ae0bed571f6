"""Cost calibration: robust to slow outliers, interleaved, cached per key, announced while it runs."""

from __future__ import annotations

import math

import pytest
import torch

from exactspec.gpu_impl import cost_calibration as cc
from exactspec.gpu_impl.k_policy import MIN_LOG_NOISE, Costs
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
    assert len(lines) == 8 and "cached" in lines[0] and lines[-1].startswith("calibrating the cost policy: 7/7")


def test_noise_reflects_the_spread_and_the_budget_stops_early():
    import random

    rng = random.Random(0)
    costs = cc.measure_costs(lambda n: 0.01 * n * math.exp(rng.gauss(0, 0.3)), [1, 2, 4], reps=9, budget_s=0.0)
    assert 0.05 < costs.v_noise[2] < 0.6  # three repetitions (the minimum) of 30 % noise
    quiet = cc.measure_costs(lambda n: 0.01 * n, [1, 2, 4], reps=3)
    assert quiet.v_noise[2] == MIN_LOG_NOISE and quiet.v[4] == pytest.approx(4.0)
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
    assert source == "cache" and calls["n"] == spent and again.v == first.v and again.v_noise == first.v_noise
    path = cc.calibration_file(cc.calibration_key(model, 1, {1: "mm"}, [1, 2, 3]))
    assert path.parent == tmp_path / "calibration" and path.is_file()
    keys = {cc.calibration_file(cc.calibration_key(model, *variant, [1, 2, 3]))
            for variant in [(1, {1: "mm"}), (2, {1: "mm"}), (1, None)]}
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
    assert costs.v == {1: 1.0, 2: 1.0, 3: pytest.approx(math.sqrt(1.4 * 1.2)), 4: pytest.approx(math.sqrt(1.4 * 1.2))}


def test_non_decreasing_pools_adjacent_violators_by_weight():
    assert cc.non_decreasing([0.0, 0.2, 0.1, 0.3], [1, 1, 1, 1]) == pytest.approx([0.0, 0.15, 0.15, 0.3])
    assert cc.non_decreasing([0.0, 0.4, 0.1], [1, 3, 1]) == pytest.approx([0.0, 0.325, 0.325])


def test_a_flat_but_noisy_machine_is_not_ratcheted_upward():
    """v(n) = 1.2 for every n >= 2 under 20 % timing noise: the fitted v(9) stays near 1.2 over 20 seeds (a
    running maximum of nine noisy medians put it well above)."""
    import random
    import statistics

    fitted = []
    for seed in range(20):
        rng = random.Random(seed)
        costs = cc.measure_costs(lambda n: 0.01 * (1.0 if n == 1 else 1.2) * math.exp(rng.gauss(0, 0.2)),
                                 list(range(1, 10)), reps=7)
        fitted.append(costs.v[9])
    assert statistics.median(fitted) < 1.3, fitted


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
    assert source == f"measured again: the cached calibration was taken with 2 of {cc.os.cpu_count()} cores busy, now 0"
    assert cc.cached_costs(model, 1, None, [1, 2], time_one)[1] == "cache"
    key = cc.calibration_key(model, 1, None, [1, 2])
    record = cc.json.loads(cc.calibration_file(key).read_text())
    assert record["busy_cores"] == 0
    del record["busy_cores"]  # a record from before busy cores were kept: measured again
    cc.calibration_file(key).write_text(cc.json.dumps(record))
    assert cc.load_costs(key) == (None, "the cached calibration does not say how busy the machine was")


def test_measure_and_store_replaces_the_cached_record(tmp_path, monkeypatch):
    monkeypatch.setenv("EXACTSPEC_CACHE", str(tmp_path))
    monkeypatch.setattr(cc, "busy_cores_now", lambda: 0)
    model = scaled_llama(0, layers=1, scale=20)
    cc.cached_costs(model, 1, None, [1, 2, 3], fake_clock({1: 1.0, 2: 1.1, 3: 1.2}, spikes=set())[0])
    fresh = cc.measure_and_store(model, 1, None, [1, 2, 3], fake_clock({1: 1.0, 2: 2.0, 3: 3.0}, spikes=set())[0])
    costs, why = cc.load_costs(cc.calibration_key(model, 1, None, [1, 2, 3]))
    assert why == "" and costs.v == fresh.v and costs.v[3] == pytest.approx(3.0)
