"""One record type, one hard-check helper, one seed formula and one verdict set for every level.

Categories of a check (worst first):

- ``contract``       hard: output type/shape/length/range, exceptions, determinism (false-fail rate 0);
- ``invariant``      hard: properties every exact generator has on every output (no token of target
                     probability 0, emitted prefix == drafts, greedy equality) (false-fail rate 0);
- ``exactness``      statistical, true of every exact implementation (per-position laws, completed stream;
                     the rule level's confirmatory position tests are exactness records marked
                     ``details["confirmatory"]``);
- ``standard_rule``  statistical, true of the standard (Leviathan-Chen) rule only: the whole tuple's law and
                     the law of N. A rule failing only these may or may not be exact (a non-exact rule also
                     moves its tuple law), so their failure alone never supports an exactness claim.

Verdicts (worst first), the same at every level:

- CONTRACT_VIOLATION  a contract check failed;
- NOT_EXACT           an invariant or an exactness check failed;
- INCONCLUSIVE        no check counted against the implementation failed, but the level states reasons the
                      run cannot certify (engine level only: speculation not observed, or the reference's
                      reported probabilities disagree with its own samples; rule/sequence never give it);
- QUALIFIED           no check failed and the run reached its target, but only for a named class of deviations
                      (engine level only: deviations monotone in the reference's order), not for every shape;
                      the bare word CERTIFIED needs the any-shape bound;
- EXACT_NOT_STANDARD  only standard-rule checks failed, and on every case where one failed a confirmatory
                      exactness test sized for the observed deviation ran and passed (rule level only);
                      without that confirmation the verdict is INCONCLUSIVE;
- CERTIFIED           every check passed.

INCONCLUSIVE sits above EXACT_NOT_STANDARD because the latter claims exactness, which an inconclusive
run cannot support; QUALIFIED sits between them: it claims a bound for a class of deviations, not exactness.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from typing import Iterable

from ...outcomes import Verdict
from ...stat_tests import TestResult

CATEGORIES = ("contract", "invariant", "exactness", "standard_rule")
STATISTICAL_CATEGORIES = ("exactness", "standard_rule")
VERDICTS = tuple(Verdict)  # worst first (`exactspec.outcomes.Verdict`)

VERDICT_TEXT: dict[str, str] = {
    Verdict.CERTIFIED: (
        "exact, and every check passed (rule level: achieves the standard rule's acceptance; engine level: "
        "speculation was observed, no deviation of the candidate from the reference was detected, and "
        "deviations of any shape are ruled out at the target over the coverage the certificate states)"
    ),
    Verdict.EXACT_NOT_STANDARD: (
        "exact (no deviation from the target distribution detected), but NOT the standard rule: "
        "its emitted tuples / tokens per round differ from Leviathan-Chen's"
    ),
    Verdict.INCONCLUSIVE: "nothing failed, but the run cannot certify (see the reasons)",
    Verdict.QUALIFIED: (
        "nothing failed, and deviations of the class the certificate names are ruled out at the target; "
        "deviations of any shape are not (see the reasons: what would reach the any-shape bound)"
    ),
    Verdict.NOT_EXACT: "NOT exact: its output distribution differs from the target's (or it emits impossible tokens)",
    Verdict.CONTRACT_VIOLATION: "does not obey the interface contract (bad output, exception, or not reproducible)",
}


@dataclass
class CheckRecord:
    """One check of one implementation on one case: a `stat_tests.TestResult` with its category."""

    impl: str
    case: str
    check: str
    category: str
    result: TestResult
    plot: dict = field(default_factory=dict)  # observed/expected per bin, for the report's plots

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"category must be one of {CATEGORIES}, got {self.category!r}")

    @property
    def passed(self) -> bool:
        return bool(self.result.passed)

    @property
    def statistical(self) -> bool:
        return self.category in STATISTICAL_CATEGORIES

    def to_dict(self) -> dict:
        d = self.result.to_dict()
        d.update(
            {"impl": self.impl, "case": self.case, "check": self.check, "category": self.category}
        )
        return d


def hard_result(
    name: str, passed: bool, n: int, message: str, details: dict | None = None
) -> TestResult:
    """A hard (zero false-fail) check's result; `message` gets the "name: PASS|FAIL: " prefix if missing."""
    prefix = f"{name}: {'PASS' if passed else 'FAIL'}: "
    text = message if message.startswith(f"{name}: ") else prefix + message
    return TestResult(
        name,
        0.0 if passed else 1.0,
        1.0 if passed else 0.0,
        int(n),
        0.0,
        0.0,
        float("nan"),
        bool(passed),
        text,
        details or {},
    )


def hard_failure(
    impl: str, case: str, check: str, category: str, message: str, details: dict | None = None
) -> CheckRecord:
    """A failed hard record (the implementation raised or broke the contract before the check could run);
    `details` carries e.g. the implementation's exception type and traceback."""
    return CheckRecord(impl, case, check, category, hard_result(check, False, 0, message, details))


#: Environment variable holding the run-wide salt mixed into every case seed (`--exactspec-seed`, `exactspec
#: calibrate`); unset or "" = the default seeds. An environment variable, so spawned worker processes inherit it.
SEED_SALT_ENV = "EXACTSPEC_SEED_SALT"


def set_seed_salt(salt: str) -> str:
    """Mix `salt` into every later `case_seed` of this process and of workers it starts ("" restores the default
    seeds); returns the old salt."""
    if not isinstance(salt, str):
        raise ValueError(f"salt must be a str, got {salt!r}")
    old = os.environ.get(SEED_SALT_ENV, "")
    if salt:
        os.environ[SEED_SALT_ENV] = salt
    else:
        os.environ.pop(SEED_SALT_ENV, None)
    return old


def case_seed(name: str, salt: str = "") -> int:
    """Fixed seed of a case (CRC32 of "name|salt", plus "|run salt" when one is set, < 2**32): every run of the
    suite with the same run salt is deterministic."""
    if not isinstance(name, str):
        raise ValueError(f"name must be a case name (str), got {name!r}")
    run_salt = os.environ.get(SEED_SALT_ENV, "")
    key = f"{name}|{salt}" + (f"|{run_salt}" if run_salt else "")
    return zlib.crc32(key.encode())


def verdict_of(
    records: Iterable[CheckRecord], inconclusive: Iterable[str] = (), qualified: Iterable[str] = ()
) -> str:
    """The worst verdict the failed records imply (CERTIFIED when none failed); `inconclusive` are the
    level's reasons the run cannot certify (non-empty: INCONCLUSIVE unless a failure implies worse); `qualified`
    the reasons its claim covers only a class of deviations (non-empty: QUALIFIED unless worse). The verdict's name,
    a plain str (as certificates store it; pytest-xdist's execnet refuses str subclasses such as `Verdict`)."""
    if isinstance(inconclusive, str) or isinstance(qualified, str):
        raise ValueError(
            f"inconclusive and qualified must be lists of reasons, not one string: {inconclusive!r}, "
            f"{qualified!r}"
        )
    records = list(records)
    failed = {r.category for r in records if not r.passed}
    if "contract" in failed:
        return Verdict.CONTRACT_VIOLATION.value
    if "invariant" in failed or "exactness" in failed:
        return Verdict.NOT_EXACT.value
    if list(inconclusive) or unconfirmed_cases(records):
        return Verdict.INCONCLUSIVE.value
    if list(qualified):
        return Verdict.QUALIFIED.value
    if "standard_rule" in failed:
        return Verdict.EXACT_NOT_STANDARD.value
    return Verdict.CERTIFIED.value


def is_confirmatory(record: CheckRecord) -> bool:
    """A confirmatory exactness record (run because a standard-rule check failed on its case)."""
    return record.category == "exactness" and bool(record.result.details.get("confirmatory"))


def unconfirmed_cases(records: Iterable[CheckRecord]) -> list[str]:
    """Cases with a failed standard-rule check but no confirmatory exactness record: exactness there is
    not established at the power the deviation calls for, so EXACT_NOT_STANDARD cannot be claimed."""
    records = list(records)
    deviating = {r.case for r in records if r.category == "standard_rule" and not r.passed}
    confirmed = {r.case for r in records if is_confirmatory(r)}
    return sorted(deviating - confirmed)
