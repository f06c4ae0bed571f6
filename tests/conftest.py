"""Shared fixtures of the project's own tests."""

from __future__ import annotations

import os

import pytest

from exactspec.cache import cache_root


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models gain nothing from intra-op threads and suffer badly when the CPU is shared."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def cli_threads_as_given(monkeypatch):
    """In-process CLI runs keep this process's torch threads: the CLI's plan for a busy machine
    (`gpu_impl.cost.cpu_threads`, tested on its own) would otherwise set them for every later test."""
    from exactspec.gpu_impl.cli import cli
    from exactspec.gpu_impl.cost.cpu_threads import ThreadPlan

    monkeypatch.setattr(cli, "plan_for_this_machine", lambda threads=None: ThreadPlan(threads))


@pytest.fixture(scope="session", autouse=True)
def calibrations_kept_out_of_the_users_cache(tmp_path_factory):
    """Cost calibrations the tests take in this process (tiny random models, fake clocks, a busy machine) go to
    a temporary folder, not the user's cache, where they would pile up (52 records after one CI rehearsal).

    Only calibrations: converted models and engine builds stay shared (tens of seconds and minutes to make
    again).  A test that sets $EXACTSPEC_CACHE itself keeps the cache it chose."""
    try:
        from exactspec.gpu_impl.cost import cost_calibration
    except ImportError:  # no torch: nothing calibrates
        yield
        return
    folder = tmp_path_factory.mktemp("calibration")
    chosen = os.environ.get("EXACTSPEC_CACHE")
    in_cache = cost_calibration.calibration_file

    def in_folder(key: dict):
        path = in_cache(key)
        return path if os.environ.get("EXACTSPEC_CACHE") != chosen else folder / path.name

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cost_calibration, "calibration_file", in_folder)
        yield folder


_PREBUILD: dict = {}


def pytest_collection_finish(session):
    """Start the engines' builds in the background at nice 19 when the session selected their tests
    (`tests/engine_prebuild.py`, log in the cache folder); they use the core the first tests leave idle.
    Under pytest-xdist only the first worker starts them (every worker collects the same items).
    Off with EXACTSPEC_NO_PREBUILD=1."""
    import subprocess
    import sys
    from pathlib import Path

    files = sorted(
        {
            item.path.name
            for item in session.items
            if item.path.name.startswith("test_engine_") and item.get_closest_marker("slow")
        }
    )
    if not files or os.environ.get("EXACTSPEC_NO_PREBUILD") or session.config.option.collectonly:
        return
    if os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        return
    log = cache_root() / "engine_prebuild.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        _PREBUILD["process"] = subprocess.Popen(
            [sys.executable, "-m", "tests.engine_prebuild", *files],
            cwd=Path(__file__).parent.parent,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _PREBUILD["log"] = log


def _stop_prebuild() -> None:
    """Stop the background builds by their process group's PID (a build cut short is made again next time)."""
    import signal
    import subprocess

    process = _PREBUILD.pop("process", None)
    if process is not None and process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


_DESIGN_FOLDERS = ("reference", "stat_tests", "conformance", "proofs", "gpu_impl")


def pytest_sessionfinish(session, exitstatus):
    """One import root: a bare `reference`, `conformance`, ... module imported during the run fails it."""
    import sys

    _stop_prebuild()
    bare = sorted(name for name in sys.modules if name.split(".")[0] in _DESIGN_FOLDERS)
    if bare:
        print(
            f"\nbare modules imported during the run (import them as exactspec.*): {', '.join(bare[:20])}"
        )
        session.exitstatus = 1
