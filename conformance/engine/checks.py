"""The engine level's checks on one prompt of two sample files (reference: speculation off; candidate:
speculation on): the hard checks of `hard`, and the statistical checks the registry (`registry.ENGINE_CHECKS`)
runs at the per-check false-fail rate: per-position marginals and the first-m-tokens tuple (`stat_tests.permutation`), the
reference's own tokens under its reports (a self-check) and the randomized PIT of the candidate's tokens at
the drafted positions 2..m under the reference's reports (`pit`, rounding within its stated tolerance). Which
files may be compared at all is `check_comparable`.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from ..core.profiles import Profile
from ..core.records import CheckRecord, case_seed
from . import hard, pit
from .cases import EngineCase
from .law_params import law_differences
from .registry import REFERENCE_PIT_CHECK
from .samples import Completion, PrefixProbs, SampleFile
from ...stat_tests import (TestResult, detectable_mean_token_tv, permutation_homogeneity, pit_uniformity_test,
                           rare_event_test)

IDENTITY_CHAIN = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "typical_p": 1.0,
                  "repeat_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0}


def check_comparable(reference: SampleFile, candidate: SampleFile) -> None:
    """ValueError unless the files are a reference and a candidate of one model, prompts and sampler chain."""
    ref, cand = reference.header, candidate.header
    for sample, role in ((reference, "reference"), (candidate, "candidate")):
        if sample.header.role != role:
            raise ValueError(f"{sample.path}: header role is {sample.header.role!r}, expected {role!r} "
                             "(arguments are REFERENCE.jsonl CANDIDATE.jsonl)")
    if (ref.model.get("name"), ref.model.get("sha256")) != (cand.model.get("name"), cand.model.get("sha256")):
        raise ValueError(f"the files sample different models: {ref.model} vs {cand.model}")
    shared = set(ref.prompts) & set(cand.prompts)
    differ = sorted(pid for pid in shared if ref.prompts[pid] != cand.prompts[pid])
    if differ:
        raise ValueError(f"prompts with the same prompt_id but different prompt_tokens: {differ[:5]}")
    law = law_differences(ref.request_defaults, cand.request_defaults)
    if law:
        raise ValueError(f"{candidate.path}: header field 'request_defaults': law-changing parameters differ from "
                         f"{reference.path}'s (reference, candidate): {law}")


def _unique_seeds(completions: Sequence[Completion], path: str, pid: str) -> None:
    seeds = [c.seed for c in completions]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{path}: prompt {pid!r}: a seed appears twice among the repeat-0 completions")


def _post_sampling_or_identity(kind: str | None, defaults: dict) -> bool:
    """Are reports of this kind the sampled law? post_sampling always; raw only under the identity chain."""
    identity = all(float(defaults.get(k, v) if defaults.get(k) is not None else v) == float(v)
                   for k, v in IDENTITY_CHAIN.items())
    return kind == "post_sampling" or (kind == "raw" and identity)


class PromptData:
    """One prompt's completions and the reference's reports, indexed for the checks."""

    def __init__(self, pid: str, reference: SampleFile, candidate: SampleFile):
        self.pid, self.impl = pid, engine_name(candidate)
        defaults = reference.header.request_defaults
        self.ref = reference.by_prompt()[pid]
        self.cand = candidate.by_prompt()[pid]
        self.ref_all = reference.by_prompt(None)[pid]
        self.cand_all = candidate.by_prompt(None)[pid]
        _unique_seeds(self.ref, reference.path, pid)
        _unique_seeds(self.cand, candidate.path, pid)
        self.reports: dict[tuple[int, ...], PrefixProbs] = {}
        self.unusable_reports = 0  # raw reports under a chain that warps: not the law sampled from
        for record in reference.prefix_probs:
            if record.prompt_id != pid:
                continue
            if _post_sampling_or_identity(record.probs_kind, defaults):
                self.reports.setdefault(record.prefix_tokens, record)
            else:
                self.unusable_reports += 1
        self.first_report = self._first_report(defaults)
        self.independent_ref, self.independent_cand = independent_samples(self.ref, self.cand)
        self.top_k = defaults.get("top_k")

    def _first_report(self, defaults: dict):
        """The reference's report for the empty prefix: a prefix_probs record, else a completion's first report
        (then also entered in `reports`, so the PIT and the support check see it)."""
        if () in self.reports:
            return self.reports[()].top_probs
        for c in self.ref:
            if c.top_probs and c.probs_kind and _post_sampling_or_identity(c.probs_kind, defaults):
                self.reports[()] = PrefixProbs(self.pid, (), c.top_probs[0], c.probs_kind)
                return c.top_probs[0]
        return None

    def case(self, settings_positions: int, defaults: dict) -> EngineCase:
        max_tokens = defaults.get("max_tokens")
        positions = min(settings_positions, int(max_tokens)) if isinstance(max_tokens, int) and max_tokens > 0 \
            else settings_positions
        temperature = defaults.get("temperature")
        return EngineCase(name=self.pid, greedy=temperature is not None and float(temperature) == 0.0,
                          positions=positions, pit=any(len(prefix) > 0 for prefix in self.reports),
                          reported=self.first_report is not None, data=self)


def independent_samples(reference: Sequence[Completion], candidate: Sequence[Completion]
                        ) -> tuple[list[Completion], list[Completion]]:
    """The two samples the two-sample tests compare, with no seed in both: an engine may couple its randomness
    to the seed (sampler-match drafting does, by design), and a coupled pair is not two independent samples.
    Seeds that both files hold are shared out in turn (the reference keeps the 1st, 3rd, ... in seed order,
    the candidate the 2nd, 4th, ...); seeds only one file holds stay in it."""
    shared = sorted({c.seed for c in reference} & {c.seed for c in candidate})
    to_candidate = set(shared[1::2])
    to_reference = set(shared) - to_candidate
    return ([c for c in reference if c.seed not in to_candidate],
            [c for c in candidate if c.seed not in to_reference])


def _position(tokens: Sequence[int], j: int):
    """Category of position j (1-based): the token, or None (END) after the completion ended."""
    return tokens[j - 1] if len(tokens) >= j else None


def _record(data: PromptData, name: str, result: TestResult, category: str = "exactness") -> CheckRecord:
    return CheckRecord(data.impl, data.pid, name, category, result)


def permutation_checks(case: Any, level: float, profile: Profile, tuple_check: bool) -> list[CheckRecord]:
    """Per-position marginals (or the first-m-tokens tuple) of the two samples: permutation homogeneity tests."""
    data, settings = case.data, profile.engine
    ref = [c.tokens for c in data.independent_ref]
    cand = [c.tokens for c in data.independent_cand]
    names: list[tuple[str, Callable[[Sequence[int]], Hashable]]]
    if tuple_check:
        m = case.positions
        names = [(f"prefix_{m}_permutation", lambda seq: tuple(_position(seq, j) for j in range(1, m + 1)))]
    else:
        names = [(f"position_{j}_permutation", functools.partial(_position, j=j)) for j in range(1, case.positions + 1)]
    out = []
    for name, category_of in names:
        result = permutation_homogeneity([category_of(s) for s in ref], [category_of(s) for s in cand], level,
                                         false_pass_rate=profile.false_pass_rate, min_expected=settings.min_expected,
                                         max_bins=settings.max_bins, rng=case_seed(data.pid, name), name=name)
        result.details["independent_samples"] = {"reference": len(ref), "candidate": len(cand),
                                                 "seeds_in_both_files_shared_out": len(data.ref) + len(data.cand)
                                                 - len(ref) - len(cand)}
        out.append(_record(data, name, result))
    return out


def _pit_positions(completions: Sequence[Completion], reports: dict, horizon: int, first: int = 0
                   ) -> tuple[list[int], list, list[tuple[int, int]], int]:
    """(tokens, reports, (seed, position)) of every position first..horizon-1 of `completions` whose prefix the
    reference reported, and how many of those positions have none (ended, or not reported)."""
    tokens, rows, where, missing = [], [], [], 0
    for c in sorted(completions, key=lambda c: c.seed):
        for t in range(first, horizon):
            report = reports.get(c.tokens[:t]) if t < len(c.tokens) else None
            if report is None:
                missing += 1
                continue
            tokens.append(c.tokens[t])
            rows.append(report.top_probs)
            where.append((c.seed, t))
    return tokens, rows, where, missing


def _pit_record(data: PromptData, name: str, completions: Sequence[Completion], horizon: int, first: int,
                level: float, profile: Profile) -> CheckRecord:
    """Exact KS on the randomized PIT of `completions`' tokens at positions first..horizon-1 under the reference's
    reports: the PIT where the prefix was reported, a fresh U(0, 1) draw where the completion had ended or no report
    exists. Each value is then U(0, 1) given the earlier ones (which positions are reported depends on earlier tokens
    only), so their number is fixed and the finite-n KS law holds; pooling only the reported positions would let an
    END decide how many there are. The critical value is widened by the reports' rounding slack (`pit`); the
    details state the mean per-token TV the test detects (`stat_tests.pit_power`)."""
    fpr = profile.false_pass_rate
    tokens, rows, where, missing = _pit_positions(completions, data.reports, horizon, first)
    rng = np.random.default_rng(case_seed(data.pid, name))
    uniforms = np.concatenate([pit.pit_uniforms(tokens, rows, rng), rng.random(missing)])
    if uniforms.size < 2:
        raise ValueError(f"prompt {data.pid!r}: {name}: {uniforms.size} PIT values; the KS test needs >= 2")
    slack = max((pit.report_slack(row) for row in rows), default=0.0)
    result = pit_uniformity_test(uniforms, level, false_pass_rate=fpr, method="ks", slack=slack, name=name)
    units = len(completions)
    result.details.update(pit_values=len(tokens), padded_values=missing, completions=units,
                          positions=[first + 1, horizon], values_per_completion=horizon - first,
                          detectable_mean_token_tv=detectable_mean_token_tv(int(uniforms.size), max(1, units), level,
                                                                            fpr, slack) if units else None)
    if not tokens:  # only fresh draws: the check tested nothing the files hold
        result = TestResult(name, result.statistic, result.p_value, 0, result.false_fail_rate, fpr,
                            result.detectable_tv, result.passed, f"{name}: no position of these completions was "
                            "reported: nothing to test", dict(result.details))
    return _record(data, name, result)


#: The first drafted position (0-based): an engine samples position 1 from the prompt's forward pass, before any
#: draft round, so the candidate's PIT pools positions 2..m only (undiluted by a position no draft touches).
FIRST_DRAFTED = 1


def near_zero_check(case: Any, level: float, profile: Profile) -> list[CheckRecord]:
    """How often the candidate's tokens at positions 1..m fall where the reference's report leaves (almost) no
    mass (`pit.near_zero`): an engine that now and then emits a token its target all but excludes. Under
    exactness each such event has conditional probability <= `pit.near_zero_rate_bound`, so the count is
    tested against that rate (`stat_tests.rare_event_test`, a proven bound)."""
    data, name = case.data, "near_zero_tokens"
    tokens, rows, where, _ = _pit_positions(data.cand, data.reports, case.positions)
    hits = [(seed, t + 1, token) for token, row, (seed, t) in zip(tokens, rows, where) if pit.near_zero(token, row)]
    bound = max((pit.near_zero_rate_bound(row) for row in rows), default=pit.NEAR_ZERO_MASS)
    result = rare_event_test(len(hits), len(tokens), bound, level, profile.false_pass_rate, name=name)
    result.details.update(examples=[{"seed": s, "position": p, "token": x} for s, p, x in hits[:5]],
                          near_zero_mass=pit.NEAR_ZERO_MASS)
    return [_record(data, name, result)]


def pit_check(case: Any, level: float, profile: Profile) -> list[CheckRecord]:
    """The candidate's tokens at the drafted positions 2..m under the reference's reports (`_pit_record`)."""
    data = case.data
    _, _, matched, _ = _pit_positions(data.cand, data.reports, case.positions, FIRST_DRAFTED)
    if len(matched) < 2:
        raise ValueError(f"prompt {data.pid!r}: the reference's prefix_probs match {len(matched)} candidate "
                         "positions beyond the first; the PIT needs >= 2 (were they collected for these candidate "
                         "samples?)")
    return [_pit_record(data, "pit_ks", data.cand, case.positions, FIRST_DRAFTED, level, profile)]


def reference_pit_check(case: Any, level: float, profile: Profile) -> list[CheckRecord]:
    """The reference's own tokens at positions 1..m under its own reports: a self-check at every depth the PIT
    uses, so reports wrong at any prefix void the PIT instead of being blamed on the candidate."""
    data = case.data
    return [_pit_record(data, REFERENCE_PIT_CHECK, data.ref, case.positions, 0, level, profile)]


def hard_checks(case: Any, coupled: bool, notes: list[str]) -> list[CheckRecord]:
    """Greedy equality (temperature 0), seed coupling (where expected and seeds are deterministic), support."""
    data, out = case.data, []
    if case.greedy:
        out.append(_record(data, "greedy_equality", hard.greedy_equality(data.ref, data.cand), "invariant"))
    if coupled:
        deterministic = [hard.determinism(x)["seed_deterministic"] for x in (data.ref_all, data.cand_all)]
        if False in deterministic:
            notes.append(f"{data.pid}: not seed-deterministic (a repeated seed gave a different completion): "
                         "the seed-coupling check is disabled")
        else:
            out.append(_record(data, "seed_coupling", hard.seed_coupling(data.ref, data.cand), "invariant"))
    support = hard.support_check(data.cand, data.reports, data.top_k)
    if support is not None:
        out.append(_record(data, "reported_support", support, "invariant"))
    return out


def prompts(reference: SampleFile, candidate: SampleFile, notes: list[str]) -> list[PromptData]:
    """The prompts with completions in both files (others noted as skipped); ValueError when there are none."""
    out = []
    for pid in reference.header.prompts:
        if pid not in candidate.header.prompts:
            continue
        data = PromptData(pid, reference, candidate)
        if data.ref and data.cand:
            out.append(data)
        else:
            notes.append(f"{pid}: skipped ({len(data.ref)} reference, {len(data.cand)} candidate completions)")
    if not out:
        raise ValueError("no prompt has completions in both files")
    return out


def engine_name(sample: SampleFile) -> str:
    engine = sample.header.engine
    return f"{engine.get('name')} {engine.get('version') or ''}".strip() + f" ({sample.header.model.get('name')})"


def case_summary(data: PromptData, case: Any) -> dict:
    return {"name": case.name, "greedy": case.greedy, "positions": case.positions, "n_reference": len(data.ref),
            "n_candidate": len(data.cand), "prefix_reports": len(data.reports), "pit": case.pit,
            "reported_first_token": case.reported}


def _entropy(top_probs) -> float:
    """Entropy (nats) of a reported top-N with the unlisted tail as one outcome."""
    listed = [p for _, p in top_probs]
    probs = np.array(listed + [max(0.0, 1.0 - sum(listed))])
    probs = probs[probs > 0]
    return float(-(probs * np.log(probs)).sum())


def report_entropy(data: PromptData) -> float | None:
    """Mean entropy (nats) of the reference's reports along its own completions (each generated position whose
    prefix it reported): how open the prompt is. The unlisted tail counts as one outcome, so this is a lower
    bound; None when no such report exists."""
    cache: dict[tuple[int, ...], float] = {}
    values = []
    for c in data.ref:
        for j in range(len(c.tokens)):
            prefix = tuple(c.tokens[:j])
            if prefix in data.reports:
                if prefix not in cache:
                    cache[prefix] = _entropy(data.reports[prefix].top_probs)
                values.append(cache[prefix])
    return float(np.mean(values)) if values else None


def engine_summary(reference: SampleFile, candidate: SampleFile, evidence: dict, prompts: list[PromptData]) -> dict:
    determinism = {}
    for role, attr in (("reference", "ref_all"), ("candidate", "cand_all")):
        per_prompt = {data.pid: hard.determinism(getattr(data, attr)) for data in prompts}
        known = [d["seed_deterministic"] for d in per_prompt.values() if d["seed_deterministic"] is not None]
        determinism[role] = {"seed_deterministic": all(known) if known else None,
                             "repeats": sum(d["repeats"] for d in per_prompt.values()),
                             "differing": {pid: d["differing_seeds"] for pid, d in per_prompt.items()
                                           if d["differing_seeds"]}}
    return {"reference_file": reference.path, "candidate_file": candidate.path,
            "reference_engine": reference.header.engine, "candidate_engine": candidate.header.engine,
            "model": reference.header.model, "request_defaults": reference.header.request_defaults,
            "speculation_evidence": evidence, "determinism": determinism,
            "prompt_entropy_nats": {data.pid: report_entropy(data) for data in prompts}}
