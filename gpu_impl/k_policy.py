"""How many tokens to draft next round: fixed, grow/shrink, or the oracle's walltime model on measured costs.

Any rule that looks only at the past (earlier outcomes, timings) keeps the output law exact: each round
emits tokens distributed as the target's whatever k it was given.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, deque
from dataclasses import dataclass

from .stats import examined_and_accepted
from ..reference.speedup import expected_tokens_per_position

POLICIES = ("fixed", "grow-shrink", "cost")
#: Floor on the relative standard error of a measured ratio: no timing is trusted to better than 1 %.
MIN_LOG_NOISE = 0.01
#: Least standard error granted to a calibration once the run has its own evidence (it may be stale).
STALE_NOISE = 0.05


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
        if not self.v or self.v.get(1) != 1.0 or any(not (x > 0 and math.isfinite(x)) for x in self.v.values()):
            raise ValueError(f"v must map widths to positive ratios with v[1] = 1, got {self.v!r}")
        if not (self.c >= 0 and math.isfinite(self.c)):
            raise ValueError(f"c must be a finite ratio >= 0, got {self.c!r}")
        noise = self.v_noise or {}
        self.v_noise = {n: max(float(noise.get(n, noise.get(str(n), MIN_LOG_NOISE))), MIN_LOG_NOISE) for n in self.v}
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
    """Each round, a k in 0..k_max by the walltime model E[N] / (c k + v(k+1)) (k = 0: a plain step, value 1).

    E[N] = 1 + sum_j prod_{i<=j} a_i from per-position acceptance rates (a prompt-lookup draft's first
    token is often rejected while the rest of a matching copy is accepted, which one pooled rate hides);
    a_i counts decay by `decay` per round and are shrunk towards `prior_acceptance_rate` (weight
    `prior_weight`).  v(n) and c start from the calibration (`cost_calibration`) and follow the run's own
    timers robustly: each drafted round's target time over the median of the last few plain rounds, as a
    shift of log v from the calibration; the median shift of the last `window` rounds (with its standard
    error) is mixed with the calibration by inverse variance, so one slow round moves nothing.

    The rule accounts for uncertainty: it drafts only a k whose factor stays above 1 with the acceptance
    rates `z` standard errors lower and the costs `z` standard errors higher, else takes a plain step.
    After `explore_after` plain rounds in a row (at first 1) it drafts once anyway if the optimistic factor
    exceeds 1, and then waits twice as long: a wrong early decision is revisited at a cost that grows only
    with the logarithm of the number of rounds.
    """

    def __init__(self, costs: Costs, k_max: int, prior_acceptance_rate: float = 0.5, prior_weight: float = 1.0,
                 decay: float = 0.9, window: int = 24, z: float = 1.0, explore_after: int = 1):
        missing = [n for n in range(1, k_max + 2) if n not in costs.v]
        if missing:
            raise ValueError(f"costs must give v(n) for n = 1..k_max + 1 = {k_max + 1}; missing {missing}")
        self.prior, self.k_max, self.z = costs, k_max, z
        self.prior_acceptance_rate, self.prior_weight, self.decay = prior_acceptance_rate, prior_weight, decay
        self.accepted = [0.0] * k_max  # decayed counts per draft position
        self.examined = [0.0] * k_max
        self.plain_seconds: deque[float] = deque(maxlen=5)
        self.shifts: deque[float] = deque(maxlen=window)  # log(measured v(n) / calibrated v(n)), any n
        self.draft_ratios: deque[float] = deque(maxlen=window)
        self.explore_after, self.plain_streak, self.explorations = explore_after, 0, 0
        self.chosen: Counter[int] = Counter()
        self._memo: dict = {}  # what `factor` computed since the last update

    @property
    def acceptance_rates(self) -> list[float]:
        """Per draft position: decayed accepted / examined counts, shrunk towards the prior."""
        w, a0 = self.prior_weight, self.prior_acceptance_rate
        return [(a + a0 * w) / (e + w) for a, e in zip(self.accepted, self.examined)]

    def acceptance_bounds(self, sign: int) -> list[float]:
        """The rates moved `sign` x z standard errors (binomial, on the decayed count plus the prior)."""
        return [min(1.0, max(0.0, m + sign * self.z * math.sqrt(m * (1 - m) / (e + self.prior_weight + 1))))
                for m, e in zip(self.acceptance_rates, self.examined)]

    def v(self, n: int) -> tuple[float, float]:
        """(log v(n), its standard error): the calibration, shifted by the run's own rounds once there are three.

        The calibration may come from another time (the cache) and load, so its error counts as at least
        STALE_NOISE against the run's evidence."""
        prior = (math.log(self.prior.v[n]), self.prior.v_noise[n])
        if len(self.shifts) < 3:
            return prior
        shift, noise = robust_centre(list(self.shifts))
        return _combine((prior[0], max(prior[1], STALE_NOISE)), (prior[0] + shift, math.hypot(noise, prior[1])))

    def c(self) -> float:
        """Draft cost per token over a plain step: the median of recent rounds once there are three, else the calibration."""
        return statistics.median(self.draft_ratios) if len(self.draft_ratios) >= 3 else self.prior.c

    def factor(self, k: int, sign: int = 0) -> float:
        """Predicted speedup of drafting k tokens over a plain step (1 for k = 0); sign -1 / +1: the pessimistic / optimistic bound."""
        if k == 0:
            return 1.0
        rates = self._once(("rates", sign), lambda: self.acceptance_rates if sign == 0 else self.acceptance_bounds(sign))
        log_v, noise = self._once(("v", k + 1), lambda: self.v(k + 1))
        cost = self._once("c", self.c) * k * math.exp(-sign * self.z * self.prior.c_noise) + math.exp(log_v - sign * self.z * noise)
        return expected_tokens_per_position(rates[:k]) / cost

    def _once(self, key, compute):
        """`compute()` once per round: `factor` asks for the same rates and v(n) ~3 k_max times a round."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def choose(self) -> int:
        """The best k whose pessimistic factor exceeds 1; else 0, or an exploration round after a plain streak."""
        ks = range(1, self.k_max + 1)
        safe = [k for k in ks if self.factor(k, -1) > 1]
        if safe:
            k, self.plain_streak = max(safe, key=lambda k: (self.factor(k), -k)), 0
        elif self.plain_streak + 1 >= self.explore_after and max(self.factor(k, +1) for k in ks) > 1:
            k = max(ks, key=lambda k: (self.factor(k), -k))
            self.plain_streak, self.explore_after, self.explorations = 0, 2 * self.explore_after, self.explorations + 1
        else:
            k, self.plain_streak = 0, self.plain_streak + 1
        self.chosen[k] += 1
        return k

    def update(self, proposed: int, n_accepted: list[int], target_s: float, draft_s: float) -> None:
        """One round: `proposed` drafts per row, row b accepted n_accepted[b]; the round's target and draft seconds."""
        self._memo.clear()
        examined, accepted = examined_and_accepted(proposed, n_accepted)
        examined += [0] * (self.k_max - proposed)
        accepted += [0] * (self.k_max - proposed)
        self.accepted = [a * self.decay + new for a, new in zip(self.accepted, accepted)]
        self.examined = [e * self.decay + new for e, new in zip(self.examined, examined)]
        if target_s <= 0:
            return
        if proposed == 0:
            self.plain_seconds.append(target_s)
            return
        if self.plain_seconds and proposed <= self.k_max:
            plain = statistics.median(self.plain_seconds)
            self.shifts.append(math.log(target_s / plain / self.prior.v[proposed + 1]))
            self.draft_ratios.append(draft_s / proposed / plain)

    def costs(self) -> Costs:
        """What the run learned, as the next call's starting point."""
        estimates = {n: self.v(n) for n in range(2, self.k_max + 2)}
        return Costs({1: 1.0, **{n: math.exp(lv) for n, (lv, _) in estimates.items()}}, self.c(),
                     {n: s for n, (_, s) in estimates.items()}, self.prior.c_noise, self.prior.t1_s)

    def summary(self) -> dict:
        """The decision and the figures behind it: rounds per chosen k, explorations, v, c, acceptance, best factor."""
        best = max(range(self.k_max + 1), key=lambda k: (self.factor(k), -k))
        return {
            "rounds_per_k": dict(sorted(self.chosen.items())), "explorations": self.explorations,
            "v": {n: round(math.exp(self.v(n)[0]), 3) for n in range(2, self.k_max + 2)},
            "v_noise": {n: round(self.v(n)[1], 3) for n in range(2, self.k_max + 2)},
            "c": round(self.c(), 4), "acceptance_rates": [round(a, 3) for a in self.acceptance_rates],
            "best_k": best, "best_factor": round(self.factor(best), 3),
            "best_factor_bounds": [round(self.factor(best, -1), 3), round(self.factor(best, +1), 3)],
        }

    def note(self) -> str:
        """One line for the closing stats: how much it drafted and why (the measured v, c, acceptance)."""
        s = self.summary()
        rounds, plain = sum(self.chosen.values()), self.chosen.get(0, 0)
        best, (low, high) = s["best_k"], s["best_factor_bounds"]
        k_shown = best or 1
        figures = (f"v({k_shown + 1}) = {s['v'][k_shown + 1]:.2f} ± {100 * s['v_noise'][k_shown + 1]:.0f} %, "
                   f"c = {s['c']:.3f}, alpha per position {s['acceptance_rates'][:k_shown]}")
        if rounds and plain * 2 >= rounds:
            why = (f"drafting k = {k_shown} predicted ×{self.factor(k_shown):.2f} (pessimistic ×{self.factor(k_shown, -1):.2f}), "
                   f"not surely above plain decoding")
            return (f"cost policy drafted little: plain steps in {plain} of {rounds} rounds ({s['explorations']} "
                    f"exploration rounds), because {why}; measured {figures}")
        mean_k = sum(k * n for k, n in self.chosen.items()) / max(1, rounds)
        return (f"cost policy drafted in {rounds - plain} of {rounds} rounds (mean k {mean_k:.1f}); predicted "
                f"×{s['best_factor']:.2f} at k = {best} (×{low:.2f}–×{high:.2f}); measured {figures}")
