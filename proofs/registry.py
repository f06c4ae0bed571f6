"""The registry of machine checks: each check's name, the claims of `ARGUMENT.md` it exercises, its function.

A check is a function returning a `CheckResult`, registered with `@check("C1", ...)`. It stops at the
first failing case (`expect`), and a crash inside it is a failure, never a pass (`run_guarded`).
`all_checks()` imports every check module and returns the checks in the order of the argument.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from typing import Callable, Sequence

# The check modules, in the order of the claims they check (this is the order of every listing).
CHECK_MODULES = (
    "checks_position",
    "checks_loop",
    "checks_acceptance",
    "checks_rules",
    "float32",
    "checks_tree",
    "checks_engine",
    "checks_sequential",
    "checks_any_shape",
    "checks_paired",
    "traceability",
)


@dataclass
class CheckResult:
    name: str
    passed: bool
    detail: str
    cases: int = 0
    skipped: bool = False
    seconds: float = 0.0


@dataclass
class Check:
    name: str
    claims: tuple[str, ...]
    func: Callable[..., CheckResult]
    doc: str = ""


CHECKS: dict[str, Check] = {}


def check(*claims: str):
    """Register a check function under its name for the listed claims."""

    def register(func):
        name = func.__name__
        CHECKS[name] = Check(name, claims, func, (func.__doc__ or "").strip().splitlines()[0])
        return func

    return register


def all_checks() -> dict[str, Check]:
    """Every registered check (importing the check modules first), in the order of `CHECK_MODULES`."""
    modules = [importlib.import_module(f"{__package__}.{name}") for name in CHECK_MODULES]
    rank = {module.__name__: index for index, module in enumerate(modules)}

    def order(chk: Check) -> tuple[int, int]:
        code = getattr(chk.func, "__code__", None)
        return rank.get(
            getattr(chk.func, "__module__", ""), len(rank)
        ), code.co_firstlineno if code else 0

    return {chk.name: chk for chk in sorted(CHECKS.values(), key=order)}


class CheckFailure(Exception):
    """Raised inside a check to stop at the first failing case with a precise message."""


def expect(condition: object, message: str) -> None:
    """Stop the running check with `message` unless `condition` holds."""
    if not condition:
        raise CheckFailure(message)


def run_guarded(name: str, body: Callable[[], tuple[int, str]]) -> CheckResult:
    """Run a check body returning (cases, detail); a failed expectation or any crash is a failure."""
    try:
        cases, detail = body()
        return CheckResult(name, True, detail, cases)
    except CheckFailure as failure:
        return CheckResult(name, False, str(failure))
    except Exception as error:  # a crash is a failure of the check, never a pass
        return CheckResult(name, False, f"{type(error).__name__}: {error}")


def run_checks(names: Sequence[str] | None = None) -> list[CheckResult]:
    """Run the named checks (default: all) with their default arguments, timing each."""
    checks = all_checks()
    unknown = sorted(set(names or ()) - set(checks))
    if unknown:
        raise ValueError(f"names: unknown checks {unknown}; known: {sorted(checks)}")
    results = []
    for name in names or list(checks):
        start = time.perf_counter()
        result = checks[name].func()
        result.seconds = time.perf_counter() - start
        results.append(result)
    return results


def claim_table(results: Sequence[CheckResult]) -> str:
    """The claim -> PASS/FAIL table: a claim passes when every check of it that ran passed."""
    checks = all_checks()
    by_name = {r.name: r for r in results}
    claims = sorted({c for chk in checks.values() for c in chk.claims}, key=lambda c: int(c[1:]))
    lines = ["claim  result  checks"]
    for claim in claims:
        names = [n for n, chk in checks.items() if claim in chk.claims and n in by_name]
        if not names:
            continue
        ok = all(by_name[n].passed for n in names)
        marks = ", ".join(f"{n}={'ok' if by_name[n].passed else 'FAIL'}" for n in names)
        lines.append(f"{claim:<6} {'PASS' if ok else 'FAIL':<7} {marks}")
    return "\n".join(lines)
