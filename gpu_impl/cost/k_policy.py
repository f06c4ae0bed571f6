"""How many tokens to draft next round: fixed, grow/shrink, or the oracle's walltime model on measured costs.

Any rule that looks only at the past (earlier outcomes, timings) keeps the output law exact: each round
emits tokens distributed as the target's whatever k it was given.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter, deque
from dataclasses import dataclass

from scipy.special import betaincinv

from ...reference.speedup import expected_tokens_every_k_unchecked
from ..loop.stats import examined_and_accepted

POLICIES = ("fixed", "grow-shrink", "cost")
#: Floor on the relative standard error of a measured ratio: no timing is trusted to better than 1 %.
MIN_LOG_NOISE = 0.01
#: Least standard error granted to a calibration once the run has its own evidence (it may be stale).
STALE_NOISE = 0.05
#: Relative error granted to the plain-step reference of the run's cost ratios, a median of the run's own
#: plain rounds, when deciding whether the run contradicts the calibration.
REFERENCE_NOISE = 0.05
#: ... and to the calibration's t1_s, the unit until the run has three plain rounds (benchmarks/README.md#k-policy-constants).
UNIT_DRIFT_NOISE = 0.10
#: Acceptance draws use the posterior's counts times this, a tempered posterior (benchmarks/README.md#k-policy-constants).
DRAW_SHARPNESS = 4.0
#: Prior mean of a later draft position's acceptance, the first's being 0.6 (benchmarks/README.md#k-policy-constants).
LATER_PRIOR_ACCEPTANCE = 0.7


@dataclass
class Costs:
    """The cost model's inputs, as ratios to one plain target step (seconds `t1_s` when measured).

    `v[n]`: a target forward scoring n tokens (v[1] = 1); `c`: one drafted token; `v_noise[n]`, `c_noise`:
    standard errors of log v[n] and log c (relative errors) of the estimates.
    """

    v: dict[int, float]
    c: float = 0.0
    v_noise: dict[int, float] | None = None
    c_noise: float = MIN_LOG_NOISE
    t1_s: float = 0.0

    def __post_init__(self):
        self.v = {int(n): float(x) for n, x in self.v.items()}
        if (
            not self.v
            or self.v.get(1) != 1.0
            or any(not (x > 0 and math.isfinite(x)) for x in self.v.values())
        ):
            raise ValueError(f"v must map widths to positive ratios with v[1] = 1, got {self.v!r}")
        if not (self.c >= 0 and math.isfinite(self.c)):
            raise ValueError(f"c must be a finite ratio >= 0, got {self.c!r}")
        noise = self.v_noise or {}
        self.v_noise = {
            n: max(float(noise.get(n, noise.get(str(n), MIN_LOG_NOISE))), MIN_LOG_NOISE)
            for n in self.v
        }
        self.v_noise[1] = 0.0


def robust_centre(logs: list[float]) -> tuple[float, float]:
    """(median of log ratios, standard error of that median): 1.25 x 1.4826 MAD / sqrt(n), floored at 1 %."""
    centre = statistics.median(logs)
    mad = statistics.median(abs(x - centre) for x in logs)
    return centre, max(1.25 * 1.4826 * mad / math.sqrt(len(logs)), MIN_LOG_NOISE)


def next_k(k: int, n_accepted: list[int], k_max: int) -> int:
    """Grow by one when every row accepted all drafts, shrink by one when none accepted more than half."""
    if all(n >= k for n in n_accepted):
        return min(k + 1, k_max)
    if all(2 * n < k for n in n_accepted):
        return max(k - 1, 1)
    return k


def _combine(prior: tuple[float, float], online: tuple[float, float] | None) -> tuple[float, float]:
    """Inverse-variance mean of two (estimate, standard error) pairs; the prior alone when online is None."""
    if online is None:
        return prior
    (a, sa), (b, sb) = prior, online
    wa, wb = 1 / max(sa, MIN_LOG_NOISE) ** 2, 1 / max(sb, MIN_LOG_NOISE) ** 2
    return (wa * a + wb * b) / (wa + wb), math.sqrt(1 / (wa + wb))


class CostModelK:
    """Each round, a k in 0..k_max by Thompson sampling on the walltime model E[N] / (c k + v(k+1)) (k = 0: a
    plain step, value 1).

    E[N] = 1 + sum_j prod_{i<=j} a_i from per-position acceptance rates (a prompt-lookup draft's first
    token is often rejected while the rest of a matching copy is accepted, which one pooled rate hides).
    Each a_i has a Beta posterior on decayed counts (`decay` per round that examined position i: forgetting
    counts evidence, not time, so draft-free rounds and rounds that stopped earlier keep what is known; see
    `update`) around `prior_acceptance_rate`
    (the first) or `later_prior_acceptance_rate` (weight `prior_weight`); log v(n) starts from the
    calibration (`cost_calibration`) and follows the run's own timers robustly (each drafted round's target
    time over the median of the last few plain rounds, as a shift of log v; the median shift of the last
    `window` rounds, so one slow round moves nothing).

    Why sampling, not a pessimistic bound: the goal is the best k, not only a safe one.  Each round draws
    the rates and the cost shift from their posteriors and takes the k that maximises the drawn factor, so
    a k is tried about as often as it may be the best; the exploration this buys shrinks as the counts
    grow, and its cost is bounded by the posterior's width (a k that is surely worse is almost never drawn).
    The first drafted round, with no evidence to draw from, is optimistic instead (`choose`).
    The unit of every cost ratio is the plain step: the calibration's t1_s until the run has three plain
    rounds of its own (`plain_reference`); every drafted round is re-read against the current unit (`shifts`).
    The draws come from the chooser's own generator (`seed`), never the sampling streams, and k depends
    only on the past, so the output law stays exact and runs are reproducible.

    A calibration the run's recent timers contradict (the median shift beyond `stale_z` standard errors of
    both) is set aside while they do (`calibration_disagrees`), and when they still do once the run is done
    the generator measures it again.
    """

    def __init__(
        self,
        costs: Costs,
        k_max: int,
        prior_acceptance_rate: float = 0.6,
        prior_weight: float = 1.0,
        decay: float = 0.95,
        window: int = 24,
        z: float = 1.0,
        seed: int = 0,
        stale_z: float = 3.0,
        later_prior_acceptance_rate: float = LATER_PRIOR_ACCEPTANCE,
    ):
        missing = [n for n in range(1, k_max + 2) if n not in costs.v]
        if missing:
            raise ValueError(
                f"costs must give v(n) for n = 1..k_max + 1 = {k_max + 1}; missing {missing}"
            )
        self.prior, self.k_max, self.z, self.stale_z = costs, k_max, z, stale_z
        self.prior_acceptance_rate, self.prior_weight, self.decay = (
            prior_acceptance_rate,
            prior_weight,
            decay,
        )
        self.later_prior_acceptance_rate = later_prior_acceptance_rate
        self.accepted = [0.0] * k_max  # decayed counts per draft position
        self.examined = [0.0] * k_max
        self.plain_seconds: deque[float] = deque(maxlen=5)
        #: The last `window` drafted rounds as (n scored, target seconds, draft seconds per token): raw seconds,
        #: put over the plain reference only when asked (`shifts`), since the reference changes during a run.
        self.drafted: deque[tuple[int, float, float]] = deque(maxlen=window)
        self.random = random.Random(seed)
        self.explorations, self.calibration_disagrees = 0, False
        self.chosen: Counter[int] = Counter()
        self._memo: dict = {}  # what `factor` computed since the last update

    def prior_means(self) -> list[float]:
        """Each position's prior mean: `prior_acceptance_rate` for the first draft; for later ones the pooled
        rate of every later position (shrunk to `later_prior_acceptance_rate`), since once a draft is accepted
        the next ones tend to behave alike (a copy continues, a weak draft stays weak): one reached position
        informs all."""
        w, a0 = self.prior_weight, self.prior_acceptance_rate
        pooled = (sum(self.accepted[1:]) + self.later_prior_acceptance_rate * w) / (
            sum(self.examined[1:]) + w
        )
        return [a0] + [pooled] * (self.k_max - 1)

    @property
    def acceptance_rates(self) -> list[float]:
        """Per draft position: the posterior mean, decayed accepted / examined counts shrunk towards the prior."""
        w = self.prior_weight
        return [
            (a + m * w) / (e + w)
            for a, e, m in zip(self.accepted, self.examined, self.prior_means())
        ]

    def acceptance_draws(self) -> list[float]:
        """One draw per draft position from its Beta posterior (sharpened by DRAW_SHARPNESS): the first
        position alone, the later ones at one shared quantile.

        Why shared: the later positions share their prior (`prior_means`), since a copy continues or a weak
        draft stays weak.  Independent draws would average out in the product E[N] multiplies, so a long k
        would look surely mediocre and be tried late; drawn together they are optimistic or pessimistic
        together, and a long copy is tried as often as it may be the best (figures:
        benchmarks/README.md#k-policy-constants)."""
        w, first, later = self.prior_weight, self.random.random(), self.random.random()
        draws, drawn = [], {}
        for i, (a, e, m) in enumerate(zip(self.accepted, self.examined, self.prior_means())):
            key = (a, e, m, first if i == 0 else later)
            # positions never reached share their posterior: one draw serves them all
            if key not in drawn:
                drawn[key] = float(
                    betaincinv(
                        DRAW_SHARPNESS * (a + m * w),
                        DRAW_SHARPNESS * (max(e - a, 0.0) + (1 - m) * w),
                        key[3],
                    )
                )
            draws.append(drawn[key])
        return draws

    def acceptance_bounds(self, sign: int) -> list[float]:
        """The rates moved `sign` x z standard errors (binomial, on the decayed count plus the prior)."""
        return [
            min(
                1.0,
                max(0.0, m + sign * self.z * math.sqrt(m * (1 - m) / (e + self.prior_weight + 1))),
            )
            for m, e in zip(self.acceptance_rates, self.examined)
        ]

    def v(self, n: int) -> tuple[float, float]:
        """(log v(n), its standard error) for 1 <= n <= k_max + 1, as this round's table holds it (`_v_table`)."""
        return self._v_table()[n]

    def _shifted(self, n: int) -> tuple[float, float]:
        """(log v(n), its standard error): the calibration, shifted by the run's own rounds once there are three.

        The calibration may come from another time (the cache) and load, so its error counts as at least
        STALE_NOISE against the run's evidence; while the run contradicts it, the run's evidence alone."""
        prior = (math.log(self.prior.v[n]), self.prior.v_noise[n])
        shifts = self.shifts()
        if len(shifts) < 3:
            return prior
        shift, noise = self._pooled_shift()  # shared by every n
        online = (prior[0] + shift, math.hypot(noise, prior[1]))
        log_v, error = (
            online
            if self.calibration_disagrees
            else _combine((prior[0], max(prior[1], STALE_NOISE)), online)
        )
        return log_v, error

    def c(self) -> float:
        """Draft cost per token over a plain step: the median of recent rounds once there are three, else the calibration."""
        plain = self.plain_reference()
        if len(self.drafted) < 3 or plain is None:
            return self.prior.c
        return statistics.median(per_token for _, _, per_token in self.drafted) / plain

    def factor(self, k: int, sign: int = 0) -> float:
        """Predicted speedup of drafting k tokens over a plain step (1 for k = 0); sign -1 / +1: the pessimistic / optimistic bound."""
        if k == 0:
            return 1.0
        tokens = self._once(
            ("tokens", sign),
            lambda: expected_tokens_every_k_unchecked(
                self.acceptance_rates if sign == 0 else self.acceptance_bounds(sign)
            ),
        )
        log_v, noise = self._v_table()[k + 1]
        cost = self._once("c", self.c) * k * math.exp(
            -sign * self.z * self.prior.c_noise
        ) + math.exp(log_v - sign * self.z * noise)
        return tokens[k] / cost

    def drawn_factors(self) -> list[float]:
        """The factor of every k in 0..k_max under one posterior draw: the rates, and one normal deviate
        shared by every log v(n) (a load change moves them together)."""
        tokens, deviate, c = (
            expected_tokens_every_k_unchecked(self.acceptance_draws()),
            self.random.gauss(0.0, 1.0),
            self._once("c", self.c),
        )
        table = self._v_table()
        return [1.0] + [
            tokens[k] / (c * k + math.exp(max(table[k + 1][0] + deviate * table[k + 1][1], 0.0)))
            for k in range(1, self.k_max + 1)
        ]

    def _once(self, key, compute):
        """`compute()` once per round: `factor` asks for the same rates and v(n) ~3 k_max times a round."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def _v_table(self) -> list[tuple[float, float]]:
        """(log v(n), its standard error) for n = 0..k_max + 1 (index n; n = 0 unused; v(1) = 1), once per round.

        Scoring n tokens never costs less than scoring one.  When the shifted v(2) says it does, the unit is
        what is stale (the calibration's t1_s, with no plain round of the run's own: the machine got faster),
        so every width is lifted together and their ratios, which rank the k, are kept.  Clamping each width
        at 1 instead made widths 2-5 all free at once and drafted too long
        (figures: benchmarks/README.md#k-policy-constants)."""

        def table() -> list[tuple[float, float]]:
            shifted = [self._shifted(n) for n in range(2, self.k_max + 2)]
            lift = max(0.0, -min(log_v for log_v, _ in shifted))
            return [(0.0, 0.0), (0.0, 0.0)] + [(log_v + lift, error) for log_v, error in shifted]

        return self._once("v", table)

    def best_k(self) -> int:
        """The k in 0..k_max with the best factor at the posterior means (ties: the smaller k)."""
        return max(range(self.k_max + 1), key=lambda k: (self.factor(k), -k))

    def choose(self) -> int:
        """The k that maximises one posterior draw's factor (an exploration when it is not the best at the
        posterior means); a plain step first when there is no plain reference yet (no calibrated t1_s).

        The first drafted round, before any position was examined, takes the k best at the optimistic bound
        (`factor(k, +1)`: optimism in the face of uncertainty).  Why: on a copy, a round drafted short (k = 5
        where k = 8 was best) costs a whole round of the ~8 a 64-token answer takes, and the first round,
        drawn with no evidence at all, was often short.  Where drafts fail, the bound's k costs one round at
        v(k + 1) among the many such an answer runs, and it examines every position at once (figures:
        benchmarks/README.md#k-policy-constants)."""
        if self.plain_reference() is None:
            k = 0
        else:
            examined = any(self.examined)
            factors = (
                self.drawn_factors()
                if examined
                else [self.factor(k, +1) for k in range(self.k_max + 1)]
            )
            k = max(range(self.k_max + 1), key=lambda k: (factors[k], -k))
            self.explorations += k != self.best_k()
        self.chosen[k] += 1
        return k

    def update(self, proposed: int, n_accepted: list[int], target_s: float, draft_s: float) -> None:
        """One round: `proposed` drafts per row, row b accepted n_accepted[b]; the round's target and draft seconds.

        Each position's counts decay by `decay` only in the rounds that examined it.  Why not every round:
        in chat a prompt-lookup draft finds a match in ~a third of the rounds, and a position past the first
        is reached only after an acceptance; decayed every round, their counts never grew past a few, the
        posterior stayed at the prior, and long drafts kept being tried where they cost more than they emit
        (figures: benchmarks/README.md#k-policy-constants)."""
        self._memo.clear()
        examined, accepted = examined_and_accepted(min(proposed, self.k_max), n_accepted)
        for i, (seen, kept) in enumerate(zip(examined, accepted)):
            if seen:  # only what this round observed ages: a draft-free round says nothing about acceptance
                self.accepted[i] = self.accepted[i] * self.decay + kept
                self.examined[i] = self.examined[i] * self.decay + seen
        if target_s <= 0:
            return
        if proposed == 0:
            self.plain_seconds.append(target_s)
        elif proposed <= self.k_max:
            self.drafted.append((proposed + 1, target_s, draft_s / proposed))
        self.calibration_disagrees = self._contradicted()

    def shifts(self) -> list[float]:
        """log(measured v(n) / calibrated v(n)) of each recent drafted round, any n, over today's plain reference.

        Why kept as seconds and divided now: until the run has three plain rounds its unit is the calibration's
        t1_s, taken at another time, and a machine's speed can drift by a third within minutes.  Ratios frozen
        against a stale t1_s once made every v(n) look too dear: the policy went plain, and its own plain
        rounds could never correct ratios already taken (figures: benchmarks/README.md#k-policy-constants)."""
        plain = self.plain_reference()
        if plain is None:
            return []
        return self._once(
            "shifts", lambda: [math.log(t / plain / self.prior.v[n]) for n, t, _ in self.drafted]
        )

    def plain_reference(self) -> float | None:
        """Seconds of one plain step, the unit of every cost ratio: the median of this run's plain rounds once
        there are three (a draft-free round is one), else the calibration's own (same machine and busy cores;
        one early round alone is a poor reference: the first after the prompt runs slow), else what there is."""
        if self._own_unit():
            return statistics.median(self.plain_seconds)
        return self.prior.t1_s if self.prior.t1_s > 0 else None

    def _own_unit(self) -> bool:
        """Is the plain reference the run's own plain rounds (three, or any when the calibration has no t1_s)?"""
        return len(self.plain_seconds) >= 3 or bool(self.plain_seconds and self.prior.t1_s <= 0)

    def shift(self) -> float:
        """The run's median log shift of v(n) from the calibration (0 before three drafted rounds)."""
        return self._pooled_shift()[0] if len(self.shifts()) >= 3 else 0.0

    def _pooled_shift(self) -> tuple[float, float]:
        """`robust_centre` of `shifts`, once per round (`_contradicted` in `update`, then every v(n), read it)."""
        return self._once("shift", lambda: robust_centre(self.shifts()))

    def _contradicted(self) -> bool:
        """Do the run's timers (five drafted rounds at least) put v(n) beyond `stale_z` standard errors of
        their own, the calibration's and the plain reference's (REFERENCE_NOISE for the run's own plain
        rounds, UNIT_DRIFT_NOISE for the calibration's t1_s) combined?"""
        if len(self.shifts()) < 5:
            return False
        shift, noise = self._pooled_shift()
        calibration_noise = max(self.prior.v_noise.values())
        reference_noise = REFERENCE_NOISE if self._own_unit() else UNIT_DRIFT_NOISE
        return abs(shift) > self.stale_z * math.sqrt(
            noise**2 + calibration_noise**2 + reference_noise**2
        )

    def costs(self) -> Costs:
        """What the run learned, as the next call's starting point."""
        estimates = {n: self.v(n) for n in range(2, self.k_max + 2)}
        return Costs(
            {1: 1.0, **{n: math.exp(lv) for n, (lv, _) in estimates.items()}},
            self.c(),
            {n: s for n, (_, s) in estimates.items()},
            self.prior.c_noise,
            self.prior.t1_s,
        )

    def summary(self) -> dict:
        """The decision and the figures behind it: rounds per chosen k, explorations, v, c, acceptance, best factor."""
        best = self.best_k()
        return {
            "rounds_per_k": dict(sorted(self.chosen.items())),
            "explorations": self.explorations,
            "v": {n: round(math.exp(self.v(n)[0]), 3) for n in range(2, self.k_max + 2)},
            "v_noise": {n: round(self.v(n)[1], 3) for n in range(2, self.k_max + 2)},
            "c": round(self.c(), 4),
            "acceptance_rates": [round(a, 3) for a in self.acceptance_rates],
            "best_k": best,
            "best_factor": round(self.factor(best), 3),
            "best_factor_bounds": [
                round(self.factor(best, -1), 3),
                round(self.factor(best, +1), 3),
            ],
            "calibration_disagrees": self.calibration_disagrees,
        }

    def note(self) -> str:
        """One line for the closing stats: what it chose and why (the measured v, c, acceptance)."""
        s = self.summary()
        best = s["best_k"]
        k_shown = best or 1
        figures = (
            f"v({k_shown + 1}) = {s['v'][k_shown + 1]:.2f} ± {100 * s['v_noise'][k_shown + 1]:.0f} %, "
            f"c = {s['c']:.3f}, alpha per position {s['acceptance_rates'][:k_shown]}"
        )
        stale = (
            f"; the run's timers contradicted the calibration (v(n) x{math.exp(self.shift()):.2f} of it), so the "
            f"run used its own"
            if self.calibration_disagrees
            else ""
        )
        chosen = ", ".join(f"k = {k}: {n}" for k, n in sorted(self.chosen.items()))
        head = (
            f"cost policy (Thompson sampling on the walltime model): rounds per k {{{chosen}}}, "
            f"{s['explorations']} exploring"
        )
        if best == 0:
            why = (
                f"plain steps are best: drafting k = 1 predicts ×{self.factor(1):.2f}, "
                f"the best draft k = {max(range(1, self.k_max + 1), key=self.factor)} "
                f"×{max(self.factor(k) for k in range(1, self.k_max + 1)):.2f}"
            )
        else:
            low, high = s["best_factor_bounds"]
            why = f"best k = {best}, predicted ×{s['best_factor']:.2f} (×{low:.2f}–×{high:.2f})"
        return f"{head}; {why}; measured {figures}{stale}"
