"""The engine level's hard checks (false-fail rate 0) and its non-statistical evidence.

- greedy equality: at temperature 0, when the reference gives one output whatever the seed, every candidate
  completion equals it (a reference that varies is judged statistically: `stat_checks.greedy_spread_check`);
- support: no candidate token outside the reported support when the support is fully reported;
- tokens past the end: no candidate token after a token the reference stops on (an end-of-generation token: the
  last token of its completions that stopped on it), the bug of an engine that checks for EOS only at a round's end;
- coupling (evidence, never a failure): at the seeds both files hold, how often the two outputs differ
  (`coupling_pairs`; a certification route, `routes`);
- determinism (evidence, not a verdict): the same seed asked twice gives the same completion;
- speculation evidence: the candidate's draft counters (llama.cpp ``timings.draft_n``, or ``counters`` records
  read around batches) are > 0.

Each check returns a `stat_tests.TestResult` built by the core's `hard_result`; a failure names the
first divergence (seed, position, tokens).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..core.records import hard_result
from .samples import Completion, Counters, PrefixProbs, TopProbs
from ...stat_tests import TestResult

DRAFT_COUNTERS = ("draft_n", "draft_n_accepted")  # llama.cpp's timings fields


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """First position where the token lists differ (a shorter list differs at its end), else None."""
    for j, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return j
    return None if len(a) == len(b) else min(len(a), len(b))


def _describe(j: int, ref: Sequence[int], cand: Sequence[int]) -> str:
    show = lambda seq: seq[j] if j < len(seq) else "<end>"  # noqa: E731
    return f"position {j + 1}: reference {show(ref)}, candidate {show(cand)}"


def greedy_equality(reference: Sequence[Completion], candidate: Sequence[Completion]) -> TestResult:
    """Temperature 0, the reference's output the same at every seed: every candidate completion equals it."""
    name = "greedy_equality"
    ref = reference_output(reference)
    if ref is None:
        raise ValueError(
            "greedy_equality: the reference varies with the seed; use the statistical greedy_spread"
        )
    for c in sorted(candidate, key=lambda c: c.seed):
        j = first_divergence(ref, c.tokens)
        if j is not None:
            return hard_result(
                name,
                False,
                len(candidate),
                f"seed {c.seed}: {_describe(j, ref, c.tokens)}",
                {"seed": c.seed, "position": j + 1},
            )
    return hard_result(
        name,
        True,
        len(candidate),
        f"all {len(candidate)} candidate completions equal the "
        f"reference's one output ({len(ref)} tokens, the same at its {len(reference)} seeds)",
    )


def reference_output(reference: Sequence[Completion]) -> tuple[int, ...] | None:
    """The reference's one output when every completion of it is the same, else None (it varies)."""
    outputs = {c.tokens for c in reference}
    return next(iter(outputs)) if len(outputs) == 1 else None


#: finish reasons that mean "stopped on an end-of-generation token" (llama.cpp's stop_type, OpenAI's finish_reason).
END_FINISHES = ("eos", "stop")


def end_tokens(reference: Sequence[Completion]) -> set[int]:
    """The tokens the reference stops on: the last token of each of its completions that stopped on one (a pinned
    chain has no stop strings, so a stop is an end-of-generation token)."""
    return {c.tokens[-1] for c in reference if c.tokens and c.finish_reason in END_FINISHES}


def tokens_past_end(
    reference: Sequence[Completion], candidate: Sequence[Completion]
) -> TestResult | None:
    """No candidate completion goes on after a token the reference stops on; None when the reference never stopped."""
    name, ends = "tokens_past_end", end_tokens(reference)
    if not ends:
        return None
    for c in sorted(candidate, key=lambda c: c.seed):
        j = next((t for t, token in enumerate(c.tokens[:-1]) if token in ends), None)
        if j is not None:
            return hard_result(
                name,
                False,
                len(candidate),
                f"seed {c.seed}: position {j + 1}: token {c.tokens[j]}, "
                f"which ends the reference's completions, is followed by {len(c.tokens) - j - 1} more",
                {
                    "seed": c.seed,
                    "position": j + 1,
                    "token": c.tokens[j],
                    "end_tokens": sorted(ends),
                },
            )
    return hard_result(
        name,
        True,
        len(candidate),
        f"no candidate completion goes on after an end token {sorted(ends)}",
        {"end_tokens": sorted(ends)},
    )


def coupling_pairs(
    reference: Sequence[Completion], candidate: Sequence[Completion]
) -> tuple[int, int, dict | None]:
    """(seeds both hold, seeds whose outputs differ, the first such difference) over the repeat-0 completions."""
    by_seed = {c.seed: c.tokens for c in reference}
    shared = [c for c in sorted(candidate, key=lambda c: c.seed) if c.seed in by_seed]
    mismatched = [c for c in shared if c.tokens != by_seed[c.seed]]
    first = None
    if mismatched:
        c = mismatched[0]
        j = first_divergence(by_seed[c.seed], c.tokens)
        first = {
            "seed": c.seed,
            "position": (j or 0) + 1,
            "what": _describe(j or 0, by_seed[c.seed], c.tokens),
        }
    return len(shared), len(mismatched), first


def determinism(completions: Sequence[Completion]) -> dict:
    """Evidence: do repeat records (same seed asked again) reproduce the first answer? No repeats: unknown."""
    first = {c.seed: c.tokens for c in completions if c.repeat == 0}
    repeats = [c for c in completions if c.repeat > 0 and c.seed in first]
    differing = [c.seed for c in repeats if c.tokens != first[c.seed]]
    return {
        "repeats": len(repeats),
        "seed_deterministic": None if not repeats else not differing,
        "differing_seeds": differing[:10],
    }


def support_of(report: TopProbs, probs_kind: str, top_k: int) -> set[int]:
    """The token ids that can be sampled, from a report listing at least the top_k most probable tokens."""
    if probs_kind == "post_sampling":
        return {i for i, p in report if p > 0}
    return {i for i, _ in sorted(report, key=lambda pair: (-pair[1], pair[0]))[:top_k]}


def fully_reported(top_k: int | None, report: TopProbs, probs_kind: str | None) -> bool:
    """Is every sampleable token listed? True when 0 < top_k <= the number of listed tokens."""
    return bool(probs_kind and top_k and 0 < int(top_k) <= len(report))


def support_check(
    candidate: Sequence[Completion],
    prefix_reports: dict[tuple[int, ...], PrefixProbs],
    top_k: int | None,
) -> TestResult | None:
    """Every candidate token inside the fully reported support (its own report and the reference's for the
    same prefix); None when no position has a fully reported support."""
    name, checked = "reported_support", 0
    for c in sorted(candidate, key=lambda c: c.seed):
        for t, token in enumerate(c.tokens):
            sources = []
            if c.top_probs is not None:
                sources.append(("candidate's own report", c.top_probs[t], c.probs_kind))
            ref = prefix_reports.get(c.tokens[:t])
            if ref is not None:
                sources.append(("reference's report", ref.top_probs, ref.probs_kind))
            for label, report, kind in sources:
                if top_k is None or kind is None or not fully_reported(top_k, report, kind):
                    continue
                checked += 1
                if token not in support_of(report, kind, int(top_k)):
                    return hard_result(
                        name,
                        False,
                        checked,
                        f"seed {c.seed}: position {t + 1}: token {token} is "
                        f"outside the {label} support (top_k={top_k}, {len(report)} listed)",
                        {"seed": c.seed, "position": t + 1, "token": token},
                    )
    if not checked:
        return None
    return hard_result(
        name, True, checked, f"{checked} (token, report) pairs inside the fully reported support"
    )


def speculation_declared(header: Any) -> bool:
    """Whether the candidate file's header says its speculation was declared by the user (no counters to read)."""
    return ((getattr(header, "engine", None) or {}).get("speculation") or {}).get(
        "evidence"
    ) == "declared"


def speculation_evidence(
    candidate: Sequence[Completion], counters: Sequence[Counters] = (), declared: bool = False
) -> dict:
    """The candidate's summed draft counters, per completion (`timings`) and per batch (`counters` records);
    speculation is observed iff drafted tokens > 0, or taken as `declared` by the user when nothing counts it."""
    totals = {key: 0 for key in DRAFT_COUNTERS}
    reporting = 0
    for c in candidate:
        timings = c.timings or {}
        if any(key in timings for key in DRAFT_COUNTERS):
            reporting += 1
        for key in DRAFT_COUNTERS:
            value = timings.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                totals[key] += int(value)
    for batch in counters:
        totals["draft_n"] += batch.draft_n
        totals["draft_n_accepted"] += batch.draft_n_accepted
        reporting += batch.completions
    drafted, accepted = totals["draft_n"], totals["draft_n_accepted"]
    return {
        **totals,
        "completions": len(candidate),
        "completions_reporting": reporting,
        "batches": len(counters),
        "observed": drafted > 0 or (declared and not reporting),
        "declared": declared and not reporting,
        "acceptance_rate": accepted / drafted if drafted else None,
    }
