"""Shared fixtures of the project's own tests."""

from __future__ import annotations

import pytest


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
    (`gpu_impl.cpu_threads`, tested on its own) would otherwise set them for every later test."""
    from exactspec.gpu_impl import cli
    from exactspec.gpu_impl.cpu_threads import ThreadPlan

    monkeypatch.setattr(cli, "plan_for_this_machine", lambda threads=None: ThreadPlan(threads))


_DESIGN_FOLDERS = ("reference", "stat_tests", "conformance", "proofs", "gpu_impl")


def pytest_sessionfinish(session, exitstatus):
    """One import root: a bare `reference`, `conformance`, ... module imported during the run fails it."""
    import sys

    bare = sorted(name for name in sys.modules if name.split(".")[0] in _DESIGN_FOLDERS)
    if bare:
        print(f"\nbare modules imported during the run (import them as exactspec.*): {', '.join(bare[:20])}")
        session.exitstatus = 1
