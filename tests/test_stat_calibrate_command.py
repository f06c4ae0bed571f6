"""`exactspec calibrate`: salted replicates give different rounds, the rates and Clopper-Pearson intervals are
right, and a check that rejects too often is flagged (exit status 1)."""

from __future__ import annotations

import numpy as np
import pytest

from exactspec.conformance import calibrate
from exactspec.conformance.rule.cases import SUITE_CASES

REFERENCE = "exactspec.conformance.adapters.reference:Reference"


def test_clopper_pearson_interval():
    from exactspec.stat_tests import clopper_pearson

    lo, hi = clopper_pearson(0, 200, calibrate.CONFIDENCE)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.005 ** (1 / 200), rel=1e-6)
    lo, hi = clopper_pearson(2, 200, calibrate.CONFIDENCE)
    assert lo < 0.01 < hi
    with pytest.raises(ValueError, match="k and n"):
        clopper_pearson(3, 2)


def test_replicates_use_different_seeds_and_summarize():
    cases = [c for c in SUITE_CASES if c.name in ("demo_uniform_draft", "disjoint_supports")]
    assert len(cases) == 2
    raw = calibrate.replicate_pvalues(REFERENCE, "quick", 3, cases=cases)
    pv = raw["pvalues"][("disjoint_supports", "position_1")]  # 2 bins: exact tail, p-values vary
    assert len(pv) == 3 and len(set(pv)) == 3  # three salts, three different samples
    out = calibrate.summarize(raw)
    assert {c["case"] for c in out["checks"]} == {"demo_uniform_draft", "disjoint_supports"}
    row = next(c for c in out["checks"] if c["check"] == "completed_stream")
    assert (
        row["tail"] == "bound" and row["replicates"] == 3 and set(row["rates"]) == {"0.01", "0.001"}
    )
    assert out["checks_above_nominal"] == []


def test_a_check_rejecting_too_often_is_flagged():
    raw = {
        "pvalues": {
            ("c", "bad"): [0.001] * 30 + [0.5] * 170,
            ("c", "good"): list(np.linspace(0, 1, 200)),
        },
        "info": {("c", "bad"): (10, 3, "exact"), ("c", "good"): (10, 3, "exact")},
        "per_check_false_fail_rate": 1e-8,
        "rounds": {},
    }
    out = calibrate.summarize(raw)
    assert out["checks_above_nominal"] == ["c/bad at 0.01"]
    good = next(c for c in out["checks"] if c["check"] == "good")["rates"]["0.01"]
    assert good["rejections"] == 2 and good["nominal_in_ci"]


class _Options:
    """Just enough of pytest's parser and config for the plugin's two hooks."""

    def __init__(self, salt: str = ""):
        self.salt, self.names = salt, []

    def getgroup(self, *args):
        return self

    def addoption(self, name, **kwargs):
        self.names.append(name)

    def getoption(self, name, default=None):
        return self.salt if name == "--exactspec-seed" else default

    def addinivalue_line(self, *args):
        pass


def test_exactspec_seed_option_salts_every_case_seed():
    """`--exactspec-seed SALT` is an option of the plugin, and its configure hook mixes SALT into case_seed
    (through the environment, so spawned case workers see it too)."""
    import os
    import zlib

    from exactspec.conformance import plugin
    from exactspec.conformance.core.records import SEED_SALT_ENV, case_seed, set_seed_salt

    options = _Options("abc")
    plugin.pytest_addoption(options)
    assert "--exactspec-seed" in options.names
    old = set_seed_salt("")  # this very run may be salted: restore it afterwards
    try:
        assert case_seed("demo", "statistical") == zlib.crc32(b"demo|statistical")
        plugin.pytest_configure(options)
        assert os.environ[SEED_SALT_ENV] == "abc"
        assert case_seed("demo", "statistical") == zlib.crc32(b"demo|statistical|abc")
    finally:
        set_seed_salt(old)
