"""The diagnosis of a NOT_EXACT engine certificate: where the candidate's tokens deviate and which named mechanism
fits them best, from the samples the certificate already holds (`diagnose`), rendered for the certificate
(`render.diagnosis_lines`) and re-run offline on a committed certificate's files (`explain`).

The mechanism fit reads the candidate's tokens at the positions that carry evidence (`localise`: a late bug is fitted
where it lives), else at positions 2..m (the first position is sampled before any draft in every engine this project
knows), against the families of `families` (with a draft file, also those that read the draft's law:
`draft_families`), and weighs the dependence between a completion's tokens (`dependence`: a reused random stream);
the breakdowns are `localise`'s. A failed hard check that names its mechanism by itself (`HARD_MECHANISMS`) is named
first, with the best family fitted on the listed tokens stated beside it; tokens outside the reference's support are
traced to the neighbouring row that lists them (`neighbours`). A diagnosis is descriptive: the verdict and every rate
come from the checks alone, and a CERTIFIED carries none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .dependence import dependence
from .families import Fit, family_named, fit, fit_all
from .localise import EVIDENCE_NATS, evidence_threshold, localise, prefix_scores
from .neighbours import neighbours
from .tokens import TokenTable, draft_reports, token_tables

#: Candidate tokens at probability 0 name "outside-support" at this multiple of the reference's rate (from one token
#: when the reference's own show none, as the `reported_support` check fails on one; else from this count).
OUTSIDE_MIN, OUTSIDE_RATIO = 3, 4.0
#: When the best family's gain is below this share of the excess at the recurring prefixes, none of them fits.
EXPLAINED_SHARE = 0.25


def _temperature_text(best: Fit, temperature: float | None) -> str:
    if temperature:
        effective = [temperature / v for v in (best.value, best.high, best.low)]
        return (
            f"the candidate samples as at T ~ {effective[0]:.3g} (interval {effective[1]:.3g}-{effective[2]:.3g}), "
            f"T {temperature:g} asked"
        )
    return f"the candidate's law behaves as p^theta, theta ~ {best.value:.3g} ({best.low:.3g}-{best.high:.3g})"


def fit_text(best: Fit, temperature: float | None) -> str:
    """One fitted family in words."""
    if best.family == "temperature":
        return _temperature_text(best, temperature)
    if best.family == "top-k" and best.high == 1:
        return (
            "the candidate keeps only the top 1 token (interval 1-1): the most probable token every time, as "
            "greedy decoding gives, or greedy drafts accepted by the ratio p / q as if they were sampled from q"
        )
    if best.family == "top-k":
        return f"the candidate keeps only the top {best.value:g} tokens (interval {best.low:g}-{best.high:g})"
    what = family_named(best.family).meaning
    return f"{what}: {best.parameter} ~ {best.value:.3g} (interval {best.low:.3g}-{best.high:.3g})"


def _outside_text(outside: tuple[int, int, int, int], examples: Sequence[dict]) -> str:
    """Tokens outside the reported support, in words (`outside`: the candidate's at probability 0 and its tokens read,
    the reference's own likewise)."""
    share = outside[0] / max(1, outside[1])
    reference_own = (
        "none of the reference's own" if not outside[2] else f"{outside[2]} of the reference's own"
    )
    where = "; ".join(
        f"position {e['position']} of {e['prompt']}: token {e['token']} outside the reference's "
        f"{e['listed']} listed (the smallest at {e['smallest_listed']:.3g})"
        for e in examples[:3]
    )
    return (
        f"outside-support: {outside[0]} of the candidate's {outside[1]} tokens ({share:.2%}) fall where the "
        f"reference reports probability 0 ({reference_own}): a truncation (top-k, top-p, min-p), a mask or a "
        f"rank boundary applied otherwise on the candidate's side ({where})"
    )


def _is_outside(outside: tuple[int, int, int, int]) -> bool:
    """Tokens where the reference reports probability 0, far more often than among the reference's own (a report's
    rounding can zero a tail)."""
    share = outside[0] / max(1, outside[1])
    return (
        bool(outside[0])
        and share >= OUTSIDE_RATIO * outside[2] / max(1, outside[3])
        and (outside[0] >= OUTSIDE_MIN or not outside[2])
    )


def _dependence_text(dep: dict) -> str:
    worst = dep["worst"]
    return (
        f"reused-uniform: the tokens of one completion are dependent as the reference's are not (randomized-PIT "
        f"correlation under the {dep['law']}'s reports at lag {dep['lag']}: {worst['candidate']['correlation']:.3g} "
        f"on {worst['candidate']['pairs']} pairs, the reference's own {worst['reference']['correlation']:.3g}; "
        f"likelihood ratio e^{dep['nats']:.3g}): a random stream reused (a generator re-seeded at every round, a "
        "uniform shared by two draws)"
    )


def _mechanism(
    fits: list[Fit],
    control: dict[str, Fit],
    recurring: tuple[float, float],
    dep: dict,
    temperature: float | None,
) -> dict:
    """The best of the fits and the dependence, or none of them, in words (`recurring`: `_recurring`)."""
    excess, explained = recurring
    best = fits[0] if fits else None
    threshold = evidence_threshold(len(fits) + dep["lags"])
    if dep["nats"] >= threshold and (best is None or dep["nats"] > best.gain):
        return {"family": "reused-uniform", "text": _dependence_text(dep)}
    if best is None or best.gain < threshold:
        gain = best.gain if best else 0.0
        return {
            "family": None,
            "text": f"none of the named families fits better than exact (best gain {gain:.3g} "
            f"nats < {threshold:.3g}): the deviation is shown as it is below",
        }
    if excess > 2 * threshold and explained < EXPLAINED_SHARE * excess:
        return {
            "family": None,
            "text": f"none of the named families explains the deviation: at the recurring "
            f"prefixes the best gains {explained:.3g} nats of the {excess:.3g} their "
            f"empirical laws show (best overall: {best.family}, "
            f"{fit_text(best, temperature)}); it is shown as it is below",
        }
    ref = control.get(best.family)
    ref_text = (
        ""
        if ref is None or not ref.tokens
        else (
            f"; the reference's own tokens: {best.parameter} {ref.value:.3g} ({ref.low:.3g}-{ref.high:.3g})"
            + (
                ", so the reports themselves are off"
                if not ref.low <= ref.exact <= ref.high
                else ""
            )
        )
    )
    return {
        "family": best.family,
        "text": f"{best.family}: {fit_text(best, temperature)}; likelihood ratio against "
        f"exact e^{best.gain:.3g} on {best.tokens} tokens{ref_text}",
    }


def _with_also(mechanism: dict, fitted: dict) -> dict:
    """A hard check's mechanism with the best fit on the listed tokens beside it when one carries evidence (`fitted`:
    `_mechanism`'s): a run may show two bugs, one by a hard check and one in the law."""
    out = dict(mechanism)
    if fitted.get("family"):
        out["also"] = fitted
        out["text"] += f". At the listed tokens: {fitted['text']}"
    return out


def _with_support(mechanism: dict, neighbour: dict | None, fitted: dict) -> dict:
    """An outside-support mechanism traced to the neighbouring row that explains it (that row's family named), with
    the best fit on the listed tokens beside it (`_with_also`)."""
    out = dict(mechanism)
    if neighbour is not None:
        out = {
            "family": neighbour["family"],
            "text": f"{neighbour['family']}: {neighbour['text']}; " + mechanism["text"],
        }
    return _with_also(out, fitted)


def _recurring(table: TokenTable) -> tuple[float, float]:
    """(excess of the empirical laws at the recurring prefixes over the reports, the best family's gain on the same
    tokens), in nats: how much of the deviation visible there the families explain."""
    scored = prefix_scores(table)
    if not scored:
        return 0.0, 0.0
    keep = np.zeros(table.size, dtype=bool)
    keep[[i for s in scored for i in s[2]]] = True
    return sum(max(0.0, s[0]) for s in scored), fit_all(table.subset(keep))[0].gain


def _fitted_positions(cand: TokenTable, carrying: list[int]) -> list[int]:
    """Where the mechanism is fitted: the positions that carry evidence (`localise`), else every drafted position
    (2..m: the first token is sampled before any draft), else position 1."""
    if carrying:
        return sorted(carrying)
    seen = sorted(set(cand.position.tolist()))
    return [p for p in seen if p >= 2] or seen


#: Hard checks whose failure names the mechanism by itself: check -> (family, what it means).
HARD_MECHANISMS = {
    "reported_support": (
        "outside-support",
        (
            "a token the reference gives probability 0 under the sampler chain: a "
            "truncation (top-k, top-p, min-p), a mask or a rank boundary applied "
            "otherwise on the candidate's side"
        ),
    ),
    "tokens_past_end": (
        "tokens-past-end",
        (
            "tokens after one the reference stops on: EOS or a stop string checked "
            "only at a round's end"
        ),
    ),
    "greedy_equality": (
        "greedy-divergence",
        (
            "at temperature 0 the candidate's output leaves the reference's: "
            "verification that computes the target otherwise than plain decoding "
            "(kernels that are not batch-invariant), or a draft accepted that the "
            "target's argmax rejects"
        ),
    ),
    "greedy_spread": (
        "greedy-divergence",
        (
            "at temperature 0 the candidate leaves the reference's modal output more "
            "often than the reference does"
        ),
    ),
}


def _hard_mechanism(failed_checks: Sequence[dict]) -> dict | None:
    """The mechanism a failed hard check names (`HARD_MECHANISMS`), with its message, or None."""
    for check in failed_checks:
        if check.get("check") in HARD_MECHANISMS:
            family, meaning = HARD_MECHANISMS[check["check"]]
            return {
                "family": family,
                "text": f"{family}: {meaning} ({check.get('case')}: {check.get('message')})",
            }
    return None


def diagnose(
    parts: Sequence[Any],
    positions: int,
    temperature: float | None,
    failed_checks: Sequence[dict] = (),
    draft: Any = None,
) -> dict:
    """The diagnosis of the candidate in `parts` (`checks.PromptData`) at positions 1..`positions`
    (`failed_checks`: the run's failed records as {"case", "check", "message"}: a hard check names its mechanism;
    `draft`: the draft file, `samples.SampleFile` of role "draft", when one was given)."""
    sampled = parts if temperature != 0 else []  # T = 0: the hard checks say it all
    # (n, width) rows of each end's tokens
    cand, ref = token_tables(sampled, positions, draft_reports(draft))
    if not cand.size:
        return {
            "tokens": 0,
            "mechanism": _hard_mechanism(failed_checks)
            or {
                "family": None,
                "text": "no candidate token has a teacher-forced report: nothing to fit",
            },
        }
    where = localise(cand, ref)
    fitted = _fitted_positions(cand, where["where"]["carrying"])
    rows, ref_rows = np.isin(cand.position, fitted), np.isin(ref.position, fitted)
    fits = fit_all(cand.subset(rows))
    control = {f.family: fit(family_named(f.family), ref.subset(ref_rows)) for f in fits}
    drafts = draft_reports(draft)
    dep = dependence(
        sampled, positions, {pid: kinds.get("post_sampling", {}) for pid, kinds in drafts.items()}
    )
    best = _mechanism(fits, control, _recurring(cand.subset(rows)), dep, temperature)
    outside = (
        cand.outside_tokens,
        cand.size + cand.tail_tokens,
        ref.outside_tokens,
        ref.size + ref.tail_tokens,
    )
    hard = _hard_mechanism(failed_checks)
    if hard is None and _is_outside(outside):
        hard = {"family": "outside-support", "text": _outside_text(outside, cand.outside_examples)}
    if hard is not None and hard["family"] == "outside-support":
        mechanism = _with_support(hard, neighbours(cand.outside_keys, sampled), best)
    else:
        mechanism = best if hard is None else _with_also(hard, best)
    return {
        "tokens": cand.size,
        "tail_tokens": cand.tail_tokens,
        "positions": [1, positions],
        "fitted_positions": fitted,
        "outside_tokens": cand.outside_tokens,
        "outside_examples": list(cand.outside_examples),
        "draft_reports": bool(cand.has_draft.any()),
        "tail_share": {
            "candidate": round(cand.tail_tokens / max(1, cand.size + cand.tail_tokens), 4),
            "reference": round(ref.tail_tokens / max(1, ref.size + ref.tail_tokens), 4),
        },
        "mechanism": mechanism,
        "dependence": dep,
        "fits": [f.to_dict() | {"reference": control[f.family].to_dict()} for f in fits],
        **where,
    }


__all__ = ["EVIDENCE_NATS", "TokenTable", "diagnose", "fit_text", "token_tables"]
