"""`gpu_impl.cost.cpu_threads`: the CLI's threads and OpenMP wait policy for how busy the machine is (torch-free)."""

import pytest

from exactspec.gpu_impl.cost import cpu_threads
from exactspec.gpu_impl.cost.cpu_threads import ThreadPlan, busy_cores, plan_threads


@pytest.mark.parametrize(
    "busy,cores,threads,policy,expected",
    [
        (0, 2, None, None, ThreadPlan(None, None)),  # idle: torch's defaults
        (1, 2, None, None, ThreadPlan(1, None)),  # one core taken: one thread per free core
        (3, 16, None, None, ThreadPlan(13, None)),
        (2, 2, None, None, ThreadPlan(1, "PASSIVE")),  # every core taken: one thread, passive waits
        (16, 16, None, None, ThreadPlan(1, "PASSIVE")),
        (5, 2, 2, None, ThreadPlan(2, "PASSIVE")),  # the user's threads kept
        (1, 2, 2, None, ThreadPlan(2, None)),  # the user's threads win
        (1, 2, None, "ACTIVE", ThreadPlan(None, None)),  # so does the user's wait policy
        (2, 2, None, "ACTIVE", ThreadPlan(None, None)),
    ],
)
def test_plan(busy, cores, threads, policy, expected):
    plan = plan_threads(busy, cores, threads, policy)
    assert (plan.threads, plan.wait_policy) == (expected.threads, expected.wait_policy)
    assert bool(plan.reason) == (plan != ThreadPlan(threads, None))


def _fake_stat(monkeypatch, samples):
    """/proc/stat's cpu line read twice: user nice system idle iowait irq softirq steal."""
    it = iter(samples)
    monkeypatch.setattr(cpu_threads, "_cpu_times", lambda: next(it))


@pytest.mark.parametrize(
    "busy_share,cores,expected", [(0.0, 2, 0), (0.5, 2, 1), (0.97, 2, 2), (0.2, 16, 3), (1.0, 4, 4)]
)
def test_busy_cores_from_proc_stat(monkeypatch, busy_share, cores, expected):
    total = 10_000
    busy = int(busy_share * total)
    _fake_stat(
        monkeypatch,
        [
            [0] * 8,
            [
                busy // 2,
                0,
                busy - busy // 2,
                (total - busy) // 2,
                total - busy - (total - busy) // 2,
                0,
                0,
                0,
            ],
        ],
    )
    assert busy_cores(cores, window_s=0) == expected


def test_busy_cores_without_proc_stat_reads_the_load_average(monkeypatch):
    _fake_stat(monkeypatch, [None])
    monkeypatch.setattr(cpu_threads.os, "getloadavg", lambda: (1.7, 0.0, 0.0))
    assert busy_cores(2, window_s=0) == 1


def test_real_machine_reading_is_in_range():
    assert 0 <= busy_cores(4, window_s=0.01) <= 4


def test_the_cli_applies_the_plan_before_torch_loads(monkeypatch, capsys):
    from argparse import Namespace

    from exactspec.gpu_impl.cli import cli

    monkeypatch.setenv("OMP_WAIT_POLICY", "unset by the test")
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setattr(
        cli, "plan_for_this_machine", lambda threads=None: plan_threads(2, 2, threads, None)
    )
    args = Namespace(threads=None)
    cli._threading_before_torch(args)
    assert cpu_threads.os.environ["OMP_WAIT_POLICY"] == "PASSIVE" and args.threads == 1
    assert "1 thread(s), waiting passively (OMP_WAIT_POLICY=PASSIVE)" in capsys.readouterr().err
    args = Namespace(threads=None)
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setattr(
        cli, "plan_for_this_machine", lambda threads=None: plan_threads(1, 2, threads, None)
    )
    cli._threading_before_torch(args)
    assert args.threads == 1 and "OMP_WAIT_POLICY" not in cpu_threads.os.environ
    assert "1 thread(s), one per free core" in capsys.readouterr().err
