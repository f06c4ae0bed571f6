"""The engine level's checks of the candidate: permutation likelihood-ratio e-processes over the seed list, which
compare the candidate's completions with the reference's and are valid whatever the reports are (proofs C18).

A *unit* is the candidate's completion and the reference's completion of one seed (`paired_units`); a *block* is two
consecutive units, read as two cross pairs (candidate of one seed, reference of the other). Under exactness the two
completions of a cross pair are independent draws of one law, so for any log-likelihood ratio ell fixed before the
block is read, sigma(ell(C) - ell(R)) has mean 1/2 (sigma the logistic function): the block's factor
sigma(ell(C1) - ell(R2)) + sigma(ell(C2) - ell(R1)), in [0, 2], has mean 1, and the product over blocks is a test
martingale. An exact candidate is never NOT_EXACT because the reports are wrong, common-mode errors included; the
reports, and what the earlier units showed, only shape ell. Each check is one way to learn ell from the earlier
units (`scorers`), summed over positions 1..m (tokens at a prefix without a teacher-forced report count 0):

* `law_drift`: a tilt of the mid-PIT (`law_stream`) per confidence stratum, in the direction the candidate has drifted;
* `law_lr`: the report tempered per stratum (q proportional to p^theta), theta fitted to the candidate's earlier
  tokens against the one fitted to the reference's: the temperature and truncation family;
* `context_law`: per prefix, the candidate's earlier tokens there against the reference's (Dirichlet-smoothed
  towards the report): deviations in any direction where prefixes come back;
* `near_zero_tokens`: the rate at which each end emits tokens of reported mass near 0.

Units are split by the candidate completion's load label (`serial` / `loaded`) when it has one: each check also runs
its e-process on each label's units and rejects when one of them reaches len(subsets) / rate (a union bound over
subsets read in different orders), and its message gives each subset's evidence. `load_law` compares the
candidate's completions sampled alone with those sampled under load directly (pairs of one of each: exchangeable when
its law does not depend on the load), so a load-only bug is named as such.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from numpy.typing import ArrayLike

from ..core.records import CheckRecord
from .law_stream import categories, pit_value
from .samples import Completion
from .scorers import SCORERS, TokenView
from ...stat_tests import TestResult
from ...stat_tests.sequential import log_e_process_reject, mixture_log

LOADS = ("serial", "loaded")
#: The scales c of ell each check mixes over.
SCALES = 2.0 ** np.arange(-5, 2)


@dataclass(frozen=True)
class Unit:
    """The two completions of one seed (or of two seeds no other unit holds) of one prompt (`data`: its
    checks.PromptData), the unit's place in that prompt's design, and the candidate's load label."""

    candidate: Completion
    reference: Completion
    data: Any
    place: int
    load: str | None = None


def paired_units(data: Any) -> list[Unit]:
    """One prompt's units (`data`: checks.PromptData) in the design's order: a candidate completion with the
    reference's of the same seed; the candidate's other completions with the reference's whose seeds the candidate
    never asked, in the design's order. No seed is in two units, so the units are independent. A unit's place is its
    candidate's index in the seed list (its rank by seed in files that carry no index)."""
    reference = {c.seed: c for c in data.ref}
    asked = {c.seed for c in data.cand}
    rank = {c.seed: i for i, c in enumerate(sorted(data.cand, key=lambda c: c.seed))}

    def unit(c: Completion, r: Completion) -> Unit:
        return Unit(
            c, r, data, c.index if c.index is not None else rank[c.seed], getattr(c, "load", None)
        )

    units = [unit(c, reference[c.seed]) for c in data.cand if c.seed in reference]
    others = [c for c in data.cand if c.seed not in reference]
    spare = [c for c in data.ref if c.seed not in asked]
    return sorted(units + [unit(c, r) for c, r in zip(others, spare)], key=lambda u: u.place)


def token_views(data: Any, completion: Completion, positions: int) -> list[TokenView]:
    """The completion's tokens at positions 1..m whose prefix has a teacher-forced report, read against it (the
    categories cached on `data`, shared with the routes)."""
    out, cache = [], data.forced_cats
    for t in range(min(positions, len(completion.tokens))):
        prefix = completion.tokens[:t]
        report = data.reports.get(prefix)
        if report is None:
            continue
        if prefix not in cache:
            cache[prefix] = categories(report.top_probs)
        cats = cache[prefix]
        k, pit = pit_value(cats, completion.tokens[t])
        out.append(TokenView(t + 1, prefix, completion.tokens[t], cats, k, pit, data.pid))
    return out


def blocks(units: Sequence[Unit], label: str | None = None) -> list[tuple[Unit, Unit]]:
    """The blocks of `units` (of the load `label`'s units only, when given), in an order a later look only extends:
    per prompt, its units of that label two by two in the design's order, block j of every prompt (in the prompts'
    order) before block j + 1 of any; the sequence stops at the first block whose two units have not both been
    sampled in their place (a round still running), so the blocks read at one look are a prefix of those read at the
    next. A block's cross pairs are two draws of one prompt's law under exactness."""
    by_prompt: dict[str, list[Unit]] = {}
    for unit in units:
        by_prompt.setdefault(unit.data.pid, []).append(unit)
    for pid, group in by_prompt.items():
        places = {u.place for u in group}
        # places 0..sampled-1 all in
        sampled = next(place for place in range(len(group) + 1) if place not in places)
        by_prompt[pid] = [
            u for u in group if u.place < sampled and (label is None or u.load == label)
        ]
    out: list[tuple[Unit, Unit]] = []
    for j in range(max((len(group) for group in by_prompt.values()), default=0) // 2 + 1):
        for group in by_prompt.values():
            pair = group[2 * j : 2 * j + 2]
            if len(pair) < 2:
                return out
            out.append((pair[0], pair[1]))
    return out


def _sigmoid(x: ArrayLike) -> np.ndarray:
    """The logistic function, elementwise."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))


def block_log_e(
    name: str,
    chosen: Sequence[tuple[Unit, Unit]],
    views: dict[int, tuple[list, list]],
    by_prompt: bool = False,
) -> float:
    """log of the equal mixture over `SCALES` c of the product over `chosen` blocks of
    sigma(c (ell(C1) - ell(R2))) + sigma(c (ell(C2) - ell(R1))), ell learned from the earlier blocks (a learned ell
    overfits early: the small scales keep its noise cheap); `views`: id(unit) -> its two completions' token views."""
    scorer = SCORERS[name](by_prompt)
    log_w = np.zeros(SCALES.size)
    for first, second in chosen:
        (c1, r1), (c2, r2) = views[id(first)], views[id(second)]
        ell = [scorer.score(v) for v in (c1, r1, c2, r2)]
        cross_1, cross_2 = ell[0] - ell[3], ell[2] - ell[1]
        if cross_1 or cross_2:
            log_w += np.log(
                np.maximum(_sigmoid(SCALES * cross_1) + _sigmoid(SCALES * cross_2), 1e-300)
            )
        for v, role in ((c1, "candidate"), (r1, "reference"), (c2, "candidate"), (r2, "reference")):
            scorer.learn(v, role)
    return mixture_log(log_w)


def _subsets(units: Sequence[Unit]) -> dict[str, list[tuple[Unit, Unit]]]:
    """The blocks each check reads: of all units, and of each load label's units (when labels are present)."""
    out = {"all": blocks(units)}
    for load in LOADS:
        if any(u.load == load for u in units):
            out[load] = blocks(units, load)
    return out


def load_pairs(units: Sequence[Unit]) -> list[tuple[Unit, Unit]]:
    """(serial unit, loaded unit) pairs of one prompt each: the i-th serial and the i-th loaded unit of a prompt in
    the design's order, pair i of every prompt (in the prompts' order) before pair i + 1 of any, stopping at the first
    missing one (so a later look only extends the sequence). Their candidate completions are two independent draws
    of one law when the candidate's law does not depend on the load."""
    by_prompt: dict[str, dict[str, list[Unit]]] = {}
    for unit in units:
        by_prompt.setdefault(unit.data.pid, {"serial": [], "loaded": []})
        if unit.load in ("serial", "loaded"):
            by_prompt[unit.data.pid][unit.load].append(unit)
    out: list[tuple[Unit, Unit]] = []
    for i in range(max((len(g["serial"]) for g in by_prompt.values()), default=0)):
        for group in by_prompt.values():
            if i >= len(group["serial"]) or i >= len(group["loaded"]):
                return out
            out.append((group["serial"][i], group["loaded"][i]))
    return out


def load_log_e(pairs: Sequence[tuple[Unit, Unit]], views: dict[int, tuple[list, list]]) -> float:
    """log of the equal mixture over the scorers and `SCALES` c of the product over pairs of
    2 sigma(c (ell(loaded) - ell(serial))), ell learned from the earlier pairs (loaded as the "candidate"): a test
    martingale when the candidate's law does not depend on the load (each pair exchangeable)."""
    mixture = []
    for name in SCORERS:
        scorer, log_w = SCORERS[name](), np.zeros(SCALES.size)
        for serial, loaded in pairs:
            alone, busy = views[id(serial)][0], views[id(loaded)][0]
            difference = scorer.score(busy) - scorer.score(alone)
            if difference:
                log_w += np.log(np.maximum(2.0 * _sigmoid(SCALES * difference), 1e-300))
            scorer.learn(busy, "candidate")
            scorer.learn(alone, "reference")
        mixture.append(mixture_log(log_w))
    return mixture_log(mixture)


def load_check(case: Any, rate: float) -> list[CheckRecord]:
    """`load_law`: the candidate's completions sampled alone against those sampled in waves (a load-only bug);
    a failure names the load."""
    data = case.data
    units = [unit for part in data.parts for unit in paired_units(part)]
    pairs = load_pairs(units)
    views: dict[int, tuple[list, list]] = {
        id(u): (token_views(u.data, u.candidate, case.positions), [])
        for pair in pairs
        for u in pair
    }
    log_e = load_log_e(pairs, views) if pairs else 0.0
    passed = not log_e_process_reject(log_e, rate)
    e_text = f"{math.exp(log_e):.3g}" if log_e < 700 else f"e^{log_e:.0f}"
    message = (
        f"load_law: {'PASS' if passed else 'FAIL'}: {len(pairs)} pairs of the candidate's completions sampled "
        f"alone and under load{'' if passed else ': its law depends on the load'}; e-value {e_text} against "
        f"1/{rate:.3g} (anytime-valid, Ville; permutation likelihood ratio)"
    )
    outcome = TestResult(
        "load_law",
        log_e,
        float(min(1.0, math.exp(-log_e))) if log_e > 0 else 1.0,
        len(pairs),
        rate,
        float("nan"),
        float("nan"),
        passed,
        message,
        {
            "log_e_value": log_e,
            "pairs": len(pairs),
            "positions": [1, case.positions],
            "sequential": "anytime-valid permutation likelihood-ratio e-process",
        },
    )
    return [CheckRecord(data.impl, case.name, "load_law", "exactness", outcome)]


def paired_check(name: str, case: Any, rate: float) -> list[CheckRecord]:
    """Check `name` on a case's units (one prompt's, or a pooled run's): the mixture over load subsets of its
    permutation e-processes."""
    data = case.data
    units = [unit for part in data.parts for unit in paired_units(part)]
    views = {
        id(u): (
            token_views(u.data, u.candidate, case.positions),
            token_views(u.data, u.reference, case.positions),
        )
        for u in units
    }
    subsets = _subsets(units)
    # learn across the prompts, and per prompt: an equal mixture of the two
    pooled = len(data.parts) > 1
    logs = {
        label: mixture_log(
            [
                block_log_e(name, chosen, views, by_prompt)
                for by_prompt in ((False, True) if pooled else (False,))
            ]
        )
        for label, chosen in subsets.items()
    }
    counts = {label: len(chosen) for label, chosen in subsets.items()}
    # the subsets' e-processes run on different block sequences: one rejects at len(subsets) / rate (a union bound)
    log_e = max(logs.values()) - math.log(len(logs))
    passed = not log_e_process_reject(log_e, rate)
    strongest = max(logs, key=lambda label: logs[label])
    where = (
        (
            "; log e-values by load: "
            + ", ".join(f"{label} {logs[label]:.1f} ({counts[label]} blocks)" for label in logs)
        )
        if len(subsets) > 1
        else ""
    )
    e_text = f"{math.exp(log_e):.3g}" if log_e < 700 else f"e^{log_e:.0f}"
    message = (
        f"{name}: {'PASS' if passed else 'FAIL'}: {len(units)} seeds in {counts['all']} blocks against the "
        f"reference's completions{where}; e-value {e_text} against 1/{rate:.3g} (anytime-valid, Ville; "
        "permutation likelihood ratio, valid whatever the reports; the largest over the load subsets, Bonferroni)"
    )
    details = {
        "log_e_value": log_e,
        "log_e_by_load": logs,
        "blocks_by_load": counts,
        "units": len(units),
        "positions": [1, case.positions],
        "strongest_load": strongest if len(subsets) > 1 else None,
        "sequential": "anytime-valid permutation likelihood-ratio e-process",
    }
    outcome = TestResult(
        name,
        log_e,
        float(min(1.0, math.exp(-log_e))) if log_e > 0 else 1.0,
        len(units),
        rate,
        float("nan"),
        float("nan"),
        passed,
        message,
        details,
    )
    return [CheckRecord(data.impl, case.name, name, "exactness", outcome)]


__all__ = [
    "LOADS",
    "SCALES",
    "Unit",
    "block_log_e",
    "blocks",
    "load_check",
    "load_log_e",
    "load_pairs",
    "paired_check",
    "paired_units",
    "token_views",
]
