"""Where the sequence level's cases run: in this process on one adapter instance, or in worker processes
(`conformance.parallel.run_cases`: `concurrent.futures` with the spawn start method), each case then on a
fresh adapter built from its spec (a builtin name or "MODULE:NAME") or from a pickled copy of the object.

Every case's samples depend only on the case's seeds, so a run gives the same records whichever way it runs
(workers change the time, never the verdict). An adapter that cannot be copied runs serially (said in the notes).
"""

from __future__ import annotations

import pickle
import sys
from dataclasses import dataclass
from typing import Any, Callable

from .. import parallel


@dataclass(frozen=True)
class AdapterSource(parallel.ImplSource):
    """How a worker builds its own instance of a generation-level adapter."""

    @staticmethod
    def load(spec: str) -> Any:
        from .adapters import load_adapter

        return load_adapter(spec)


def adapter_source(impl: Any, adapter: Any) -> AdapterSource:
    """The source of fresh instances: the spec when `impl` is a string, else a pickled copy of `adapter`."""
    if isinstance(impl, str):
        return AdapterSource(spec=impl)
    try:
        return AdapterSource(blob=pickle.dumps(adapter))
    except Exception:  # noqa: BLE001 -- lambdas, open handles, C objects: share it, serially
        return AdapterSource(shared=adapter)


def _case_in_worker(source: AdapterSource, case_name: str, profile: str, rate: float, impl: str,
                    real_model: bool) -> tuple[list, dict]:
    """One case on a fresh adapter (module level: it runs in a worker process); progress to stderr."""
    from .suite import run_case, select_cases

    case = next(c for c in select_cases(profile, real_model) if c.name == case_name)
    records, entry = run_case(source.make(), case, profile, rate, impl)
    print(f"  case {case.name}: {entry['status']} passed={entry['passed']} n={entry.get('n')} ({entry['seconds']} s)",
          file=sys.stderr, flush=True)
    return records, entry


def run_cases(adapter: Any, source: AdapterSource, cases: list, profile: Any, rate: float, impl: str,
              real_model: bool, workers: int, progress: Callable[[str], None] | None,
              stop: Callable[[dict], bool]) -> list[tuple[list, dict]]:
    """(records, entry) of every case, in case order: serially on `adapter` when workers <= 1 or the adapter
    cannot be copied (then `stop(entry)` may end the run early), else in `workers` processes."""
    from .suite import run_case

    if workers > 1 and source.copyable and len(cases) > 1:
        tasks = [(c.name, profile.name, rate, impl, real_model) for c in cases]
        if progress:
            progress(f"  {len(cases)} cases in {min(workers, len(cases))} worker processes ...")
        return parallel.run_cases(_case_in_worker, source, tasks, workers)
    out = []
    for case in cases:
        if progress:
            progress(f"  case {case.name} ({case.level}) ...")
        out.append(run_case(adapter, case, profile, rate, impl, progress))
        entry = out[-1][1]
        if progress:
            progress(f"  case {case.name}: {entry['status']} passed={entry['passed']} n={entry.get('n')} "
                     f"({entry['seconds']} s)")
        if stop(entry):
            break
    return out
