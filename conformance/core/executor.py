"""Where cases run: one `concurrent.futures.Executor` seam for every level.

* serially in this process (`workers` <= 1, no scheduler): the default of the library call;
* in local worker processes (`workers` = N: a `ProcessPoolExecutor` with the spawn start method);
* on a Dask cluster (`scheduler` = "tcp://host:8786": `distributed.Client(scheduler).get_executor()`), each
  worker an installed copy of the same exactspec (the driver refuses results from a different version); an
  adapter in a module file of its own is sent to the workers, an installed one must be installed there too.

Every case runs on a fresh implementation instance, built from the adapter spec ("MODULE:NAME", loaded
again where the case runs) or from a pickled copy of the object the caller passed; an object that cannot be
pickled is shared by every case and the run is serial (said in the notes). Each case's randomness comes from
its own seeds, so a certificate is the same, bit for bit apart from timings and provenance, wherever its
cases ran.
"""

from __future__ import annotations

import os
import pickle
import random
import sys
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TypeVar

from .levels import get_level

T = TypeVar("T")
#: Seconds to reach a Dask scheduler before the run gives up (a usage error of `--scheduler`).
CONNECT_TIMEOUT_S = 10


@dataclass(frozen=True)
class ImplSource:
    """How to build a fresh implementation instance of a level: from a spec string or a pickled object."""

    level: str
    spec: str | None = None
    blob: bytes | None = None
    shared: Any = None  # the caller's object, when it cannot be copied

    def make(self) -> Any:
        if self.spec is not None:
            return get_level(self.level).load(self.spec)
        if self.blob is not None:
            return pickle.loads(self.blob)
        return self.shared

    @property
    def copyable(self) -> bool:
        return self.spec is not None or self.blob is not None

    def __getstate__(self) -> dict:  # a shared object never travels to a worker
        return {"level": self.level, "spec": self.spec, "blob": self.blob, "shared": None}

    def __setstate__(self, state: dict) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)


def impl_source(level: str, impl: Any, spec: str | None = None) -> ImplSource:
    """The source of fresh instances of `impl` at `level` (`spec` wins when given)."""
    if spec is not None:
        return ImplSource(level, spec=spec)
    try:
        return ImplSource(level, blob=pickle.dumps(impl))
    except Exception:  # noqa: BLE001 -- lambdas, open handles, C objects: fall back to sharing it
        return ImplSource(level, shared=impl)


def shuffled(cases: Sequence[T], salt: str) -> list[T]:
    """`cases` in a fixed pseudo-random order (seeded by `salt`): no case relies on following another."""
    order = list(cases)
    random.Random(f"case-order|{salt}").shuffle(order)
    return order


def limit_threads(threads: int | None) -> None:
    """Give a worker its share of the cores (torch would otherwise start one thread per core in each)."""
    if not threads:
        return
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def threads_per_worker(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def _init_worker(threads: int) -> None:
    limit_threads(threads)


def module_file(spec: str | None) -> Path | None:
    """The source file of the adapter module "MODULE:NAME" names, when it is a single file outside any installed
    package (a Dask worker cannot import it unless it is sent there); None otherwise."""
    if not spec or ":" not in spec or "." in spec.partition(":")[0]:
        return None  # a builtin name, or a module inside a package: that package must be installed on the workers
    module = sys.modules.get(spec.partition(":")[0])
    path = Path(getattr(module, "__file__", None) or "")
    if not path.is_file() or path.name == "__init__.py" or "site-packages" in path.parts:
        return None
    return path


@contextmanager
def case_executor(
    workers: int = 1, scheduler: str | None = None, upload: Sequence[Path] = ()
) -> Iterator[Executor | None]:
    """The executor cases run on (None: serially in this process); see the module docstring. On a Dask cluster
    the files in `upload` (an adapter's own module) are sent to every worker first (`Client.upload_file`)."""
    if scheduler:
        try:
            from distributed import Client
        except ImportError as error:
            raise ValueError(
                f"--scheduler needs Dask's `distributed` package (pip install 'exactspec[dask]'): "
                f"{error}"
            ) from error
        client = Client(scheduler, set_as_default=False, timeout=CONNECT_TIMEOUT_S)
        try:
            for path in upload:
                client.upload_file(str(path))
            yield client.get_executor(pure=False)
        finally:
            client.close()
    elif workers > 1:
        threads = threads_per_worker(workers)
        with ProcessPoolExecutor(
            max_workers=workers,
            mp_context=get_context("spawn"),
            initializer=_init_worker,
            initargs=(threads,),
        ) as pool:
            yield pool
    else:
        yield None


def run_tasks(
    fn: Callable[[Any], T],
    tasks: Sequence[Any],
    executor: Executor | None = None,
    stop: Callable[[T], bool] | None = None,
) -> list[T]:
    """fn(task) for each task, results in task order: on `executor`, or serially here, where `stop(result)`
    may end the run early (an executor runs every task)."""
    if executor is None:
        out: list[T] = []
        for task in tasks:
            out.append(fn(task))
            if stop is not None and stop(out[-1]):
                break
        return out
    futures = [executor.submit(fn, task) for task in tasks]
    return [future.result() for future in futures]
