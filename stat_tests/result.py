"""`TestResult`: the one record every statistical test returns, JSON-ready."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np


def jsonable(x: Any) -> Any:
    """Plain JSON: numpy scalars/arrays to Python, NaN/inf to None (strict JSON), tuples to lists, keys to str."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return [jsonable(v) for v in x.tolist()]
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return x if math.isfinite(x) else None  # strict JSON has no NaN/inf
    return x


@dataclass(frozen=True)
class TestResult:
    """Outcome of one check, with its stated error rates.

    ``false_fail_rate`` is the false-fail probability when the implementation is exact;
    ``detectable_tv`` is the total-variation deviation detected with probability
    at least ``1 - false_pass_rate`` (NaN when the test gives no TV guarantee; then
    ``details`` names the metric it does guarantee).
    """

    __test__ = False  # not a pytest test class

    name: str
    statistic: float
    p_value: float
    n: int
    false_fail_rate: float
    false_pass_rate: float
    detectable_tv: float
    passed: bool
    message: str
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain-JSON dict (NaN/inf become None, numpy scalars become Python)."""
        return jsonable(
            {
                "name": self.name,
                "statistic": self.statistic,
                "p_value": self.p_value,
                "n": self.n,
                "false_fail_rate": self.false_fail_rate,
                "false_pass_rate": self.false_pass_rate,
                "detectable_tv": self.detectable_tv,
                "passed": self.passed,
                "message": self.message,
                "details": self.details,
            }
        )
