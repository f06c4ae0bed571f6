"""The one table of profiles (quick / standard / full) for every level of the suite.

A profile says how hard the suite looks. The levels share its name, description and per-check
false-pass rate ``false_pass_rate``; each level has its own keyword-only settings object, because the levels
make *different promises under the same profile name*:

- rule level: total false-fail rate 1e-6 at every profile; target binned TV 0.05 / 0.02 / 0.01 per case;
- sequence level: total false-fail rate 1e-3 / 1e-4 / 1e-5; target binned TV 0.15 / 0.06 / 0.03 on the
  whole-sequence law pooled to <= 16 / 24 / 40 bins (its checks are costlier: every sample is a whole
  generation on a model; standard and full draw them as rows of 32 / 64 per `generate_batch` call where the
  adapter offers one, quick one `generate` call per sample);
- every statistical check of the rule and sequence levels' exact laws is the likelihood-ratio test of
  `stat_tests.lr_tail` (exact tail for <= 3 bins, Agrawal's bound otherwise): its false-fail rate is proven
  at the per-check rate it runs at, so no ``tail_safety`` factor is needed (docs/alpha-table.md);
- engine level: total false-fail rate 1e-3 / 1e-4 / 1e-5 over positions 1..4 / 6 / 8, every check anytime-valid;
  target per-token TV 0.15 / 0.05 / 0.02, certified by coupling or by the law checks (`engine.routes`): n is what
  the sample files hold (`exactspec engine certify` grows it in rounds), and a run short of the target is
  INCONCLUSIVE, stating the completions needed;
- tree level: total false-fail rate 1e-4 / 1e-6 / 1e-6; target binned TV 0.08 / 0.05 / 0.02 per case.

``Profile.describe()`` states every promise in one line; ``get_profile(name)`` is the only lookup.
"""

from __future__ import annotations

from dataclasses import dataclass

from .levels import LEVELS


def _check_rate(value: float, name: str) -> None:
    if not (isinstance(value, (int, float)) and 0.0 < float(value) < 1.0):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")


def _check_positive_int(value: int, name: str) -> None:
    if not (isinstance(value, int) and value > 0):
        raise ValueError(f"{name} must be a positive int, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class RuleSettings:
    """Rule level (one verification round per call): sample sizes are planned from ``target_tv``."""

    total_false_fail: float  # P(any statistical check of the run fails | implementation exact) <= this
    target_tv: float  # per case: the primary check detects binned TV >= this w.p. >= 1 - false_pass_rate
    max_bins: int  # cap on bins (min_expected grows with n so bins stay <= max_bins)
    max_rounds: int  # safety cap on rounds per case (reported if it binds)
    invariant_rounds: int  # rounds per case with an ordinary Generator for the hard invariants
    adversarial_rounds: int  # rounds per case with the boundary-heavy Generator
    hypothesis_examples: int  # generated cases for the invariant property test
    hypothesis_rounds: int  # rounds per generated case

    def __post_init__(self) -> None:
        _check_rate(self.total_false_fail, "total_false_fail")
        _check_rate(self.target_tv, "target_tv")
        for name in ("max_bins", "max_rounds", "invariant_rounds", "adversarial_rounds",
                     "hypothesis_examples", "hypothesis_rounds"):
            _check_positive_int(getattr(self, name), name)

    def min_expected(self, n: int) -> float:
        """Smallest expected count per pooled bin for n samples (keeps the bin count <= max_bins)."""
        return max(20.0, n / self.max_bins)


@dataclass(frozen=True, kw_only=True)
class SequenceSettings:
    """Sequence level (whole generations on small models)."""

    total_false_fail: float  # family-wise false-fail rate of one whole run (Bonferroni over its checks)
    target_tv: float  # exact cases: n is planned to detect this binned TV on the whole-sequence law (never capped)
    max_bins: int  # exact cases: the sequence law is pooled to <= this many bins (min expected grows with n)
    pit_sequences: int  # PIT cases (tiny pair): sequences per case
    real_sequences: int  # PIT cases (real model): sequences per case
    greedy_prompts: int  # greedy cases: prompts used (cycled)
    rows_per_call: int = 1  # rows per generate_batch call where offered (1: one generate call per sample)
    pit_rows_per_call: int | None = None  # the same for the PIT cases (None: rows_per_call)

    def __post_init__(self) -> None:
        _check_rate(self.total_false_fail, "total_false_fail")
        _check_rate(self.target_tv, "target_tv")
        for name in ("max_bins", "pit_sequences", "real_sequences", "greedy_prompts", "rows_per_call"):
            _check_positive_int(getattr(self, name), name)
        if self.pit_rows_per_call is not None:
            _check_positive_int(self.pit_rows_per_call, "pit_rows_per_call")

    def rows_for(self, case_level: str) -> int:
        """Rows per generate_batch call for a case of `case_level` ("exact" or "pit")."""
        if case_level == "pit" and self.pit_rows_per_call is not None:
            return self.pit_rows_per_call
        return self.rows_per_call

    def min_expected(self, n: int) -> float:
        """Smallest expected count per pooled bin of the sequence law for n samples (keeps bins <= max_bins)."""
        return max(20.0, n / self.max_bins)


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    """Engine level (a serving engine's sample files): n is the files'; the profile fixes the error rate and
    what is compared."""

    total_false_fail: float  # P(any statistical check of the run ever fails | candidate exact) <= this
    positions: int  # the law checks read positions 1..positions (the drift 2..positions)
    target_tv: float  # a CERTIFIED rules out a per-token TV >= this (by coupling or by the law checks: engine.routes)

    def __post_init__(self) -> None:
        _check_rate(self.total_false_fail, "total_false_fail")
        _check_rate(self.target_tv, "target_tv")
        _check_positive_int(self.positions, "positions")


@dataclass(frozen=True, kw_only=True)
class TreeSettings:
    """Tree level (one tree-verification round per call, `conformance.tree`): n planned from ``target_tv``."""

    total_false_fail: float  # P(any statistical check of the run fails | implementation exact) <= this
    target_tv: float  # per case: the primary check detects binned TV >= this w.p. >= 1 - false_pass_rate
    max_bins: int  # cap on bins (min_expected grows with n so bins stay <= max_bins)
    max_rounds: int  # cap on rounds per case (reported if it binds)
    invariant_rounds: int  # rounds per case for the hard invariants and determinism

    def __post_init__(self) -> None:
        _check_rate(self.total_false_fail, "total_false_fail")
        _check_rate(self.target_tv, "target_tv")
        for name in ("max_bins", "max_rounds", "invariant_rounds"):
            _check_positive_int(getattr(self, name), name)

    def min_expected(self, n: int) -> float:
        """Smallest expected count per pooled bin for n samples (keeps the bin count <= max_bins)."""
        return max(20.0, n / self.max_bins)


_DEFAULT_TREE = TreeSettings(total_false_fail=1e-6, target_tv=0.05, max_bins=60, max_rounds=100_000,
                             invariant_rounds=300)


@dataclass(frozen=True, kw_only=True)
class Profile:
    """One named profile: shared fields, then the settings of each level (one field per name in LEVELS)."""

    name: str
    description: str
    false_pass_rate: float  # per-check false-pass rate at the stated detectable deviation (every level)
    rule: RuleSettings
    sequence: SequenceSettings
    engine: EngineSettings
    tree: TreeSettings = _DEFAULT_TREE

    def __post_init__(self) -> None:
        _check_rate(self.false_pass_rate, "false_pass_rate")
        for level, kind in (("rule", RuleSettings), ("sequence", SequenceSettings), ("engine", EngineSettings),
                            ("tree", TreeSettings)):
            if not isinstance(getattr(self, level), kind):
                raise ValueError(f"{level} must be a {kind.__name__}, got {getattr(self, level)!r}")

    def settings(self, level: str) -> RuleSettings | SequenceSettings | EngineSettings | TreeSettings:
        """The settings object of `level` (one of LEVELS)."""
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        return getattr(self, level)

    def total_false_fail(self, level: str) -> float:
        return self.settings(level).total_false_fail

    def describe(self) -> str:
        """One line stating what the profile promises at each level."""
        r, s, e, t = self.rule, self.sequence, self.engine, self.tree
        return (f"profile {self.name}: rule level total false-fail <= {r.total_false_fail:g}, detects binned TV "
                f">= {r.target_tv:g} per case; sequence level total false-fail <= {s.total_false_fail:g}, detects "
                f"binned TV >= {s.target_tv:g} on the sequence law; engine level total false-fail <= "
                f"{e.total_false_fail:g} (anytime-valid), positions 1..{e.positions}, certifies a per-token TV <= "
                f"{e.target_tv:g} (coupling: expected, any direction; law: realised, monotone per confidence stratum; "
                f"else INCONCLUSIVE); "
                f"tree level total false-fail <= {t.total_false_fail:g}, detects binned TV >= {t.target_tv:g} per case; "
                f"power >= {1 - self.false_pass_rate:g} per check. {self.description}")

    def to_dict(self, level: str) -> dict:
        """The shared fields and the settings of `level`, as plain JSON."""
        from dataclasses import asdict

        return {"name": self.name, "description": self.description, "false_pass_rate": self.false_pass_rate,
                "total_false_fail": self.total_false_fail(level),
                "target_tv": self.settings(level).target_tv,
                "settings": asdict(self.settings(level)), "promise": self.describe()}


PROFILES: dict[str, Profile] = {
    "quick": Profile(
        name="quick", false_pass_rate=1e-3,
        description="CI: certifies a NumPy-speed implementation in well under a minute on 2 cores.",
        rule=RuleSettings(total_false_fail=1e-6, target_tv=0.05, max_bins=40, max_rounds=60_000,
                          invariant_rounds=200, adversarial_rounds=200, hypothesis_examples=15,
                          hypothesis_rounds=40),
        # exact cases as rows of 32-row generate_batch calls (10x faster than one call per sample on the tiny
        # models); the PIT cases one generate call per sample, so the batch-1 path's law is certified too
        sequence=SequenceSettings(total_false_fail=1e-3, target_tv=0.15, max_bins=16, pit_sequences=150,
                                  real_sequences=20, greedy_prompts=2, rows_per_call=32, pit_rows_per_call=1),
        engine=EngineSettings(total_false_fail=1e-3, positions=4, target_tv=0.15),
        tree=TreeSettings(total_false_fail=1e-4, target_tv=0.08, max_bins=40, max_rounds=20_000,
                          invariant_rounds=100)),
    "standard": Profile(
        name="standard", false_pass_rate=1e-3, description="Default: minutes; detects 2% TV per case at the rule level.",
        rule=RuleSettings(total_false_fail=1e-6, target_tv=0.02, max_bins=80, max_rounds=400_000,
                          invariant_rounds=1000, adversarial_rounds=1000, hypothesis_examples=60,
                          hypothesis_rounds=60),
        sequence=SequenceSettings(total_false_fail=1e-4, target_tv=0.06, max_bins=24, pit_sequences=500,
                                  real_sequences=60, greedy_prompts=4, rows_per_call=32),
        engine=EngineSettings(total_false_fail=1e-4, positions=6, target_tv=0.05),
        tree=_DEFAULT_TREE),
    "full": Profile(
        name="full", false_pass_rate=1e-3,
        description="Certificate grade: detects 1% TV per case; tens of minutes for NumPy-speed code.",
        rule=RuleSettings(total_false_fail=1e-6, target_tv=0.01, max_bins=150, max_rounds=2_000_000,
                          invariant_rounds=5000, adversarial_rounds=5000, hypothesis_examples=300,
                          hypothesis_rounds=100),
        sequence=SequenceSettings(total_false_fail=1e-5, target_tv=0.03, max_bins=40, pit_sequences=3000,
                                  real_sequences=200, greedy_prompts=8, rows_per_call=64),
        engine=EngineSettings(total_false_fail=1e-5, positions=8, target_tv=0.02),
        tree=TreeSettings(total_false_fail=1e-6, target_tv=0.02, max_bins=120, max_rounds=600_000,
                          invariant_rounds=1000)),
}

PROFILE_NAMES = tuple(PROFILES)


def get_profile(name: str | Profile) -> Profile:
    """The profile called `name` (a Profile is returned as is)."""
    if isinstance(name, Profile):
        return name
    try:
        return PROFILES[name]
    except (KeyError, TypeError):
        raise ValueError(f"profile must be one of {sorted(PROFILES)}, got {name!r}") from None
