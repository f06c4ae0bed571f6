"""Where the rule level's cases run: each case on a fresh implementation instance, in a seeded shuffled
order, serially or in worker processes (`concurrent.futures.ProcessPoolExecutor`, spawn start method).

A fresh instance per case means state an implementation carries from one call to the next can only show
inside a case (the varying-row cases are built for that), never because of which case ran before. The
instance comes from the adapter spec ("MODULE:NAME", loaded again) or from a pickled copy of the object
the caller passed; an object that cannot be pickled is shared by every case (and said so in the notes).
"""

from __future__ import annotations

import os
import pickle
import random
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any, Callable


@dataclass(frozen=True)
class ImplSource:
    """How to build a fresh implementation instance: from a spec string or a pickled object."""

    spec: str | None = None
    blob: bytes | None = None
    shared: Any = None  # the caller's object, when it cannot be copied

    def make(self) -> Any:
        if self.spec is not None:
            return self.load(self.spec)
        if self.blob is not None:
            return pickle.loads(self.blob)
        return self.shared

    @staticmethod
    def load(spec: str) -> Any:
        """A fresh instance from a spec (rule level: `harness.load_impl`; other levels override this)."""
        from .harness import load_impl

        return load_impl(spec)

    @property
    def copyable(self) -> bool:
        return self.spec is not None or self.blob is not None

    def __getstate__(self):  # a shared object never travels to a worker
        return {"spec": self.spec, "blob": self.blob, "shared": None}

    def __setstate__(self, state):
        for key, value in state.items():
            object.__setattr__(self, key, value)


def impl_source(impl: Any, spec: str | None = None) -> ImplSource:
    """The source of fresh instances of `impl` (`spec` wins when given)."""
    if spec is not None:
        return ImplSource(spec=spec)
    try:
        return ImplSource(blob=pickle.dumps(impl))
    except Exception:  # noqa: BLE001 -- lambdas, open handles, C objects: fall back to sharing it
        return ImplSource(shared=impl)


def shuffled(cases: list, salt: str) -> list:
    """`cases` in a fixed pseudo-random order (seeded by `salt`): no case relies on following another."""
    order = list(cases)
    random.Random(f"case-order|{salt}").shuffle(order)
    return order


def _limit_threads(workers: int) -> None:
    """Give each worker its share of the cores (torch would otherwise start one thread per core in each)."""
    share = max(1, (os.cpu_count() or 1) // max(1, workers))
    os.environ.setdefault("OMP_NUM_THREADS", str(share))
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(share)


def _worker_init(workers: int) -> None:
    _limit_threads(workers)


def _task(work: Callable, source: ImplSource, args: tuple, workers: int):
    _limit_threads(workers)
    return work(source, *args)


def run_cases(work: Callable, source: ImplSource, tasks: list[tuple], workers: int = 1,
              stop: Callable[[Any], bool] | None = None) -> list:
    """`work(source, *args)` for each args in `tasks`, in order; `workers` > 1 runs them in that many
    processes (needs a copyable source; `stop` is then ignored). Serially, `stop(result)` ends the run early."""
    if workers <= 1 or not source.copyable or len(tasks) <= 1:
        out = []
        for args in tasks:
            out.append(work(source, *args))
            if stop is not None and stop(out[-1]):
                break
        return out
    with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=get_context("spawn"),
                             initializer=_worker_init, initargs=(workers,)) as pool:
        futures = [pool.submit(_task, work, source, args, workers) for args in tasks]
        return [f.result() for f in futures]
