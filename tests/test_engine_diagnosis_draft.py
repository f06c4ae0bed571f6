"""The diagnosis's mechanisms beyond the per-prefix families of p: the families that read the draft's law q (with a
draft file, `diagnosis.draft_families`), the dependence a reused random stream leaves (`diagnosis.dependence`), and
the neighbouring row that lists a token outside the support (`diagnosis.neighbours`). Small exact examples of each law,
then candidates built with each mechanism on the toy files of `test_engine_offline` (V = 6, top-4 reports, T = 1,
5 tokens), named by their mechanism; an exact candidate named by none."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from exactspec.conformance.engine.checks import prompts
from exactspec.conformance.engine.diagnosis import diagnose
from exactspec.conformance.engine.diagnosis.draft_families import (
    draft_law_mismatched,
    resampled_from_p,
    shared_uniform,
)
from exactspec.conformance.engine.diagnosis.tokens import TokenTable
from exactspec.conformance.engine.sample_folder import checked_draft
from exactspec.conformance.engine.samples import (
    Completion,
    PrefixProbs,
    read_samples,
    write_samples,
)

from tests.test_engine_offline import (
    EOS,
    MAX_TOKENS,
    PROMPTS,
    V,
    base_law,
    cached,
    header,
    make_files,
    prefix_records,
    truncated,
)


def _table(p: list[float], q: list[float]) -> TokenTable:
    """A one-row table over ids 0..len(p)-1 listed in that order, with the draft's q."""
    width = len(p)
    one = np.ones((1, width), dtype=bool)
    return TokenTable(
        np.array([p]),
        np.arange(width)[None, :],
        one,
        np.zeros((1, width)),
        np.array([False]),
        np.array([0]),
        np.array([2]),
        np.array([0]),
        np.array(["p0"], dtype=object),
        np.array([""], dtype=object),
        [("p0", (1,))],
        np.array([0]),
        0,
        np.array([q]),
        np.array([True]),
        np.zeros((1, width)),
    )


def test_resampling_from_p_at_a_rejection_gives_min_p_q_plus_beta_p():
    law = resampled_from_p(_table([0.5, 0.5], [1.0, 0.0]), 1.0)
    assert law[0] == pytest.approx([0.75, 0.25])  # min(p, q) = (.5, 0), beta = .5, + .5 p
    assert resampled_from_p(_table([0.5, 0.5], [1.0, 0.0]), 0.0)[0] == pytest.approx([0.5, 0.5])


def test_drafts_from_the_ratios_own_q_are_exact_and_hotter_drafts_are_not():
    table = _table([0.2, 0.3, 0.5], [0.6, 0.2, 0.2])
    assert draft_law_mismatched(table, 1.0)[0] == pytest.approx([0.2, 0.3, 0.5])
    # drafts from q^0 = uniform, accepted with min(1, p/q) = (1/3, 1, 1): kept (1/9, 1/3, 1/3); the residual
    # (p - q)^+ = (0, .1, .3) normalised takes the remaining 2/9
    assert draft_law_mismatched(table, 0.0)[0] == pytest.approx(
        [1 / 9, 1 / 3 + 2 / 9 * 0.25, 1 / 3 + 2 / 9 * 0.75]
    )


def test_a_reused_acceptance_uniform_puts_the_correction_in_the_residuals_upper_quantiles():
    # only draft 0 can be rejected (u in [1/3, 1)); the residual (0, .25, .75) in id order puts u >= 1/3 on id 2
    law = shared_uniform(_table([0.2, 0.3, 0.5], [0.6, 0.2, 0.2]), 1.0)
    # min(p, q) = .2 each, + .6 x 2/3 on id 2; exact: (.2, .3, .5)
    assert law[0] == pytest.approx([0.2, 0.2, 0.6])
    assert shared_uniform(_table([0.2, 0.3, 0.5], [0.6, 0.2, 0.2]), 0.0)[0] == pytest.approx(
        [0.2, 0.3, 0.5]
    )


# ----------------------------------------------------------------------------------------- candidates built so


def draft_law(pid: str, prefix: tuple[int, ...]) -> np.ndarray:
    """A draft that disagrees with `base_law`: its law shifted by two ids (the mechanisms move the candidate by a TV of
    0.07-0.2 at each prefix)."""
    return np.roll(base_law(pid, prefix), 2)


def with_draft(mechanism):
    """The candidate law a draft rule with `mechanism` gives at every drafted position (all but position 1)."""

    def law(pid, prefix):
        p = base_law(pid, prefix)
        return p if not prefix else mechanism(p, draft_law(pid, prefix))

    return law


def resample(p, q):
    overlap = np.minimum(p, q)
    return overlap + (1.0 - overlap.sum()) * p


def reused(p, q):
    """The shared-uniform rule's law over all V ids (inverse CDF of the residual in id order)."""
    residual = np.clip(p - q, 0, None)
    residual = residual / residual.sum()
    high = np.cumsum(residual)
    low = high - residual
    out = np.minimum(p, q)
    for x in range(V):
        if q[x] > 0:
            a = min(1.0, p[x] / q[x])
            out += q[x] * np.clip(np.minimum(high, 1.0) - np.maximum(low, a), 0, None)
    return out


def write_draft(path, candidate_path):
    """The draft's reports (its whole law: a draft is asked for its top 20) of every prefix of the candidate's
    completions, as a draft file."""
    candidate = read_samples(candidate_path)
    law = cached(draft_law)
    records = [
        PrefixProbs(
            r.prompt_id,
            r.prefix_tokens,
            tuple((i, float(q)) for i, q in enumerate(law(r.prompt_id, r.prefix_tokens))),
            "post_sampling",
        )
        for r in prefix_records(law, list(candidate.completions))
    ]
    write_samples(
        path, replace(header("reference", candidate.header.request_defaults), role="draft"), records
    )
    return checked_draft(read_samples(path), candidate)


def _diagnosis(tmp_path, law, n=1500, draft=True, **kwargs):
    ref, cand = make_files(tmp_path, law, n=n, **kwargs)
    parts = prompts(read_samples(ref), read_samples(cand))
    draft_file = write_draft(tmp_path / "draft.jsonl", cand) if draft else None
    return diagnose(parts, MAX_TOKENS, 1.0, (), draft_file)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, mechanism", [("resample-from-p", resample), ("shared-uniform", reused)]
)
def test_a_draft_rule_bug_is_named_with_the_drafts_reports_and_not_without(
    tmp_path, name, mechanism
):
    named = _diagnosis(tmp_path, with_draft(mechanism))
    assert named["draft_reports"] and named["mechanism"]["family"] == name, named["mechanism"]
    # most tokens are at drafted positions
    assert named["fits"][0]["interval"][0] > 0.5, named["fits"][0]
    blind = _diagnosis(tmp_path, with_draft(mechanism), draft=False)
    assert not blind["draft_reports"] and blind["mechanism"]["family"] not in (
        "resample-from-p",
        "shared-uniform",
    )


def test_an_exact_candidate_with_the_drafts_reports_is_named_by_no_family(tmp_path):
    diagnosis = _diagnosis(tmp_path, base_law, n=800)
    assert diagnosis["draft_reports"] and diagnosis["mechanism"]["family"] is None, diagnosis[
        "mechanism"
    ]


def test_a_draft_file_of_other_prompts_is_refused(tmp_path):
    ref, cand = make_files(tmp_path, base_law, n=20)
    draft = write_draft(tmp_path / "draft.jsonl", cand)
    candidate = read_samples(cand)
    other = replace(candidate, header=replace(candidate.header, prompts={"p9": (1,)}))
    with pytest.raises(ValueError, match="its prompts are not the candidate's"):
        checked_draft(draft, other)


def _reused_stream_completions(n: int) -> list[Completion]:
    """Completions drawn by inverse CDF in id order from a stream re-seeded every two tokens (rounds of two reusing
    the same two uniforms: a generator re-seeded at every round)."""
    law = cached(base_law)
    out = []
    for pid in PROMPTS:
        for seed in range(n, 2 * n):
            uniforms, tokens = np.random.default_rng([seed, 7]).random(2), []
            while len(tokens) < MAX_TOKENS and (not tokens or tokens[-1] != EOS):
                u = uniforms[len(tokens) % 2]
                tokens.append(
                    min(
                        V - 1,
                        int(np.searchsorted(np.cumsum(law(pid, tuple(tokens))), u, side="right")),
                    )
                )
            out.append(
                Completion(
                    prompt_id=pid,
                    seed=seed,
                    tokens=tuple(tokens),
                    probs_kind="post_sampling",
                    timings={"draft_n": 7, "draft_n_accepted": 3},
                )
            )
    return out


def test_a_stream_reused_at_every_round_is_named_reused_uniform(tmp_path):
    diagnosis = _diagnosis(
        tmp_path, base_law, n=600, draft=False, mutate=lambda cand: _reused_stream_completions(600)
    )
    assert diagnosis["mechanism"]["family"] == "reused-uniform", (
        diagnosis["mechanism"],
        diagnosis["fits"][:2],
    )
    assert diagnosis["dependence"]["lag"] == 2 and diagnosis["dependence"]["worst"]["statistic"] > 0


def test_tokens_outside_the_support_drawn_from_the_previous_row_are_named_stale_row(tmp_path):
    """top-k 2: a candidate that draws, at a quarter of its steps, from the previous position's top-2 law puts
    tokens outside the current row's support that the previous row lists."""
    top2 = truncated(base_law, 2)

    def stale(pid, prefix):
        row = top2(pid, prefix)
        return row if not prefix else 0.75 * row + 0.25 * top2(pid, prefix[:-1])

    diagnosis = _diagnosis(tmp_path, stale, n=400, draft=False, top_k=2)
    assert diagnosis["mechanism"]["family"] == "stale-row", diagnosis["mechanism"]
    assert "outside-support" in diagnosis["mechanism"]["text"]
