"""Adding a level = a module declaring its `Level` + one line in `core.levels.LEVEL_MODULES`, nothing else.

A toy level, "coin", is declared entirely in this file (adapters offer ``flip(p, rng) -> 0 | 1``; one statistical
check: the heads rate is p, an exact two-sided binomial test; one mutant: a coin biased by 0.15) and registered by
monkeypatching `LEVEL_MODULES`. With no other edit it loads (the loader asks it whether it `offers` an object), its
exact coin certifies through `exactspec.conformance.certify`, its kill table rejects the mutant, its settings are
in every profile, and the alpha table states its check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pytest
from scipy import stats

from exactspec.conformance import alpha_table, certify
from exactspec.conformance.core import levels
from exactspec.conformance.core.level import Level, named_cases
from exactspec.conformance.core.mutants import mutant, valid_variant
from exactspec.conformance.core.profiles import PROFILE_NAMES, get_profile
from exactspec.conformance.core.records import CheckRecord, case_seed
from exactspec.conformance.core.registry import CheckPlan, one_test
from exactspec.conformance.core.settings import Settings
from exactspec.conformance.kill_table import kill_table
from exactspec.conformance.loader import call_implementation, load_adapter
from exactspec.stat_tests import TestResult


class Coin:
    """Exact: heads with probability p."""

    def flip(self, p: float, rng: np.random.Generator) -> int:
        return int(rng.random() < p)


class BiasedCoin:
    """A mutant: heads with probability p + 0.15."""

    def flip(self, p: float, rng: np.random.Generator) -> int:
        return int(rng.random() < min(1.0, p + 0.15))


@dataclass(frozen=True)
class CoinCase:
    name: str
    p: float

    def summary(self) -> dict:
        return {"p": self.p}


@dataclass(frozen=True)
class Flipper:
    impl: Any
    name: str


CASES = (CoinCase("fair", 0.5), CoinCase("loaded", 0.2))


def flip_rate(sample: tuple, rate: float, profile: Any) -> CheckRecord:
    name, case, flips = sample
    heads, n = int(flips.sum()), int(flips.size)
    p_value = float(stats.binomtest(heads, n, case.p).pvalue)
    passed = p_value >= rate
    result = TestResult(
        "flip_rate",
        heads / n,
        p_value,
        n,
        rate,
        profile.false_pass_rate,
        float("nan"),
        passed,
        f"flip_rate: {'PASS' if passed else 'FAIL'}: {heads} heads in {n} flips at p = {case.p}",
        {},
    )
    return CheckRecord(name, case.name, "flip_rate", "exactness", result)


class CoinLevel(Level):
    name = "coin"
    checks = (
        one_test(
            "flip_rate",
            "exactness",
            lambda case: True,
            flip_rate,
            lambda case, profile: CheckPlan("flip_rate", "binomial"),
            "heads ~ Bernoulli(p)",
        ),
    )
    profile_settings = {
        name: Settings(total_false_fail=1e-4, target_tv=0.1) for name in PROFILE_NAMES
    }
    adapter_signature = "flip(p, rng)"
    reference_spec = f"{__name__}:Coin"
    default_impls = (reference_spec,)

    def offers(self, obj: Any) -> bool:
        return callable(getattr(obj, "flip", None))

    def select_cases(
        self, profile: Any, impl: Any = None, names: Sequence[str] | None = None
    ) -> list:
        return named_cases(CASES, names, self.name)

    def fixed_n(self, case: CoinCase, profile: Any) -> int:
        return 3000

    def harness(self, impl: Any, name: str) -> Flipper:
        return Flipper(impl, name)

    def sample(
        self, subject: Flipper, case: CoinCase, profile: Any, plan: dict
    ) -> tuple[Any, list]:
        rng = np.random.default_rng(case_seed(case.name, "coin"))
        flips = np.array(
            [call_implementation(subject.impl.flip, case.p, rng) for _ in range(plan["n"])]
        )
        return (subject.name, case, flips), []

    def mutants(self, profile: str = "quick") -> list:
        return [
            mutant("BiasedCoin", BiasedCoin.__doc__, BiasedCoin),
            valid_variant("Coin", Coin.__doc__, Coin),
        ]


LEVEL = CoinLevel()


@pytest.fixture
def coin_level(monkeypatch):
    """The one line that adds the level."""
    monkeypatch.setitem(levels.LEVEL_MODULES, "coin", __name__)
    return levels.get_level("coin")


def test_a_level_declared_in_one_module_is_every_tool_s_level(coin_level):
    assert "coin" in levels.level_names() and coin_level is LEVEL
    assert load_adapter(f"{__name__}:Coin").level == "coin"  # the loader asks the level
    assert (
        get_profile("quick").coin.target_tv == 0.1
        and "coin level total false-fail <= 0.0001" in get_profile("quick").describe()
    )

    cert = certify(f"{__name__}:Coin", profile="quick")
    assert cert.level == "coin" and cert.verdict == "CERTIFIED", cert.result.records
    assert [r.check for r in cert.result.records] == ["flip_rate", "flip_rate"]
    assert cert.false_fail_rate == 1e-4

    table = kill_table("coin", "quick")
    rows = {row["name"]: row for row in table["rows"]}
    assert rows["BiasedCoin"]["verdict"] == "NOT_EXACT" and rows["Coin"]["verdict"] == "CERTIFIED"
    assert table["summary"]["passed"]

    doc = alpha_table.table(["coin"], ["quick"])
    entry = doc["coin"]["quick"]
    assert [(r["case"], r["check"]) for r in entry["rows"]] == [
        ("fair", "flip_rate"),
        ("loaded", "flip_rate"),
    ]
    assert entry["within"] and entry["total_stated"] == 1e-4 and "confirm" not in entry
    assert "| coin | quick | 2 |" in alpha_table.to_markdown(doc)


def test_without_its_line_the_level_does_not_exist():
    assert "coin" not in levels.level_names()
    with pytest.raises(ValueError, match="level must be one of"):
        levels.check_level("coin")
