"""One prompt of two sample files (reference: speculation off; candidate: speculation on), read for the checks:
which files may be compared at all (`check_comparable`), each prompt's completions in the design's order and the
reference's reports (`PromptData`), its hard checks (`hard_checks`) and the summaries the certificate states. The
statistical checks are `stat_checks`, declared in `registry`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..core.records import CheckRecord
from . import hard
from .cases import EngineCase
from .law_params import law_differences
from .law_stream import PremiseCheck, premise
from .load import load_paragraph, load_record
from .samples import Completion, PrefixProbs, SampleFile

IDENTITY_CHAIN = {
    "temperature": 1.0,
    "top_k": 0,
    "top_p": 1.0,
    "min_p": 0.0,
    "typical_p": 1.0,
    "repeat_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
}


def check_comparable(reference: SampleFile, candidate: SampleFile) -> None:
    """ValueError unless the files are a reference and a candidate of one model, prompts and sampler chain."""
    ref, cand = reference.header, candidate.header
    for sample, role in ((reference, "reference"), (candidate, "candidate")):
        if sample.header.role != role:
            raise ValueError(
                f"{sample.path}: header role is {sample.header.role!r}, expected {role!r} "
                "(arguments are REFERENCE.jsonl CANDIDATE.jsonl)"
            )
    if (ref.model.get("name"), ref.model.get("sha256")) != (
        cand.model.get("name"),
        cand.model.get("sha256"),
    ):
        raise ValueError(f"the files sample different models: {ref.model} vs {cand.model}")
    shared = set(ref.prompts) & set(cand.prompts)
    differ = sorted(pid for pid in shared if ref.prompts[pid] != cand.prompts[pid])
    if differ:
        raise ValueError(
            f"prompts with the same prompt_id but different prompt_tokens: {differ[:5]}"
        )
    law = law_differences(ref.request_defaults, cand.request_defaults)
    if law:
        raise ValueError(
            f"{candidate.path}: header field 'request_defaults': law-changing parameters differ from "
            f"{reference.path}'s (reference, candidate): {law}"
        )


def _unique_seeds(completions: Sequence[Completion], path: str, pid: str) -> None:
    seeds = [c.seed for c in completions]
    if len(set(seeds)) != len(seeds):
        raise ValueError(
            f"{path}: prompt {pid!r}: a seed appears twice among the repeat-0 completions"
        )


def usable_kind(kind: str | None, defaults: dict) -> bool:
    """Are reports of this kind the sampled law? post_sampling always; raw only under the identity chain."""
    identity = all(
        float(defaults.get(k, v) if defaults.get(k) is not None else v) == float(v)
        for k, v in IDENTITY_CHAIN.items()
    )
    return kind == "post_sampling" or (kind == "raw" and identity)


def design_order(completions: Sequence[Completion]) -> list[Completion]:
    """Completions in the order the law checks read them: by their index in the design's seed list when every one
    has it, else by seed."""
    if completions and all(c.index is not None for c in completions):
        return sorted(completions, key=lambda c: (c.index, c.seed))
    return sorted(completions, key=lambda c: c.seed)


def _random_space(reference: SampleFile, candidate: SampleFile) -> int | None:
    """The seed space both files' seeds were drawn from at random, with one key (so the same seeds), else None."""
    ref, cand = reference.header, candidate.header
    space = ref.random_seeds
    if space is None or cand.random_seeds != space:
        return None
    same_key = (ref.design or {}).get("seeds", {}).get("key") == (cand.design or {}).get(
        "seeds", {}
    ).get("key")
    return space if same_key else None


class PromptData:
    """One prompt's completions and the reference's reports, indexed for the checks.

    `reports`: the teacher-forced reports (prefix_probs records) of the usable kind, by prefix; `decode_reports`:
    the reports the reference gave while sampling its own completions (first one per prefix); `self_reports`: both,
    teacher-forced first: what the reference's own tokens are checked against."""

    def __init__(self, pid: str, reference: SampleFile, candidate: SampleFile):
        self.pid, self.impl = pid, engine_name(candidate)
        defaults = reference.header.request_defaults
        self.ref = design_order(reference.by_prompt()[pid])
        self.cand = design_order(candidate.by_prompt()[pid])
        self.ref_all = reference.by_prompt(None)[pid]
        self.cand_all = candidate.by_prompt(None)[pid]
        _unique_seeds(self.ref, reference.path, pid)
        _unique_seeds(self.cand, candidate.path, pid)
        self.reports: dict[tuple[int, ...], PrefixProbs] = {}
        self.unusable_reports = 0  # raw reports under a chain that warps: not the law sampled from
        for record in reference.prefix_probs:
            if record.prompt_id != pid:
                continue
            if usable_kind(record.probs_kind, defaults):
                self.reports.setdefault(record.prefix_tokens, record)
            else:
                self.unusable_reports += 1
        self.decode_reports: dict[tuple[int, ...], PrefixProbs] = {}
        for c in self.ref:
            if c.top_probs and usable_kind(c.probs_kind, defaults):
                for t, row in enumerate(c.top_probs):
                    self.decode_reports.setdefault(
                        c.tokens[:t], PrefixProbs(pid, c.tokens[:t], row, str(c.probs_kind))
                    )
        self.self_reports = {**self.decode_reports, **self.reports}
        self.top_k = defaults.get("top_k")
        self.seed_space = _random_space(reference, candidate)
        self.premise: PremiseCheck | None = None
        # the reference's tokens at positions 1..m with no teacher-forced report
        self.unreported_reference = 0
        self.forced_cats: dict = {}  # prefix -> law_stream.Categories of `reports`, shared by every check's reading
        self.self_cats: dict = {}  # the same of `self_reports`

    @property
    def parts(self) -> list["PromptData"]:
        """The prompts this data holds: itself (a pooled run's data holds several: `PooledData`)."""
        return [self]

    def case(self, defaults: dict) -> EngineCase:
        """This prompt as a case, read at positions 1..m: m the max_tokens the files asked (else the longest
        completion either holds)."""
        positions = coverage_positions(defaults, [*self.ref, *self.cand])
        temperature = defaults.get("temperature")
        greedy = temperature is not None and float(temperature) == 0.0
        self.premise = premise(self.ref, self.reports, positions)
        self.unreported_reference = sum(
            1
            for c in self.ref
            for t in range(min(positions, len(c.tokens)))
            if c.tokens[:t] not in self.reports
        )
        law = any(
            c.tokens[:t] in self.reports
            for c in self.cand
            for t in range(min(positions, len(c.tokens)))
        )
        return EngineCase(
            name=self.pid,
            greedy=greedy,
            positions=positions,
            law=law,
            load_labels=labelled(self.cand),
            reference_reported=bool(self.self_reports),
            reference_varies=greedy and hard.reference_output(self.ref) is None,
            data=self,
        )


class PooledData:
    """Several prompts' data read as one case (a pooled run: many prompts, few completions each): the statistical
    checks and the routes read every prompt's units and tokens together, each prefix keyed by its prompt; the hard
    checks stay per prompt. A pooled run certifies the mean per-token TV over the prompt set's tokens."""

    pid = "pooled"

    def __init__(self, parts: list[PromptData]) -> None:
        if not parts:
            raise ValueError("a pooled run needs at least one prompt with completions at both ends")
        self.parts, self.impl = list(parts), parts[0].impl
        self.ref = [c for part in parts for c in part.ref]
        self.cand = [c for part in parts for c in part.cand]
        spaces = {part.seed_space for part in parts}
        self.seed_space = spaces.pop() if len(spaces) == 1 else None
        self.unusable_reports = sum(part.unusable_reports for part in parts)
        # evidence only
        self.reports = {key: value for part in parts for key, value in part.reports.items()}
        self.premise: PremiseCheck | None = None
        self.unreported_reference = 0

    def case(self, defaults: dict, positions: int) -> EngineCase:
        """The pooled case (sampling only: a greedy run's equality is per prompt)."""
        self.unreported_reference = sum(part.unreported_reference for part in self.parts)
        failing = [
            part.premise
            for part in self.parts
            if part.premise is not None and not part.premise.holds
        ]
        self.premise = (
            failing[0] if failing else next((p.premise for p in self.parts if p.premise), None)
        )
        return EngineCase(
            name=f"pooled ({len(self.parts)} prompts)",
            greedy=False,
            positions=positions,
            load_labels=labelled(self.cand),
            law=any(case_law for case_law in (bool(part.reports) for part in self.parts)),
            reference_reported=any(part.self_reports for part in self.parts),
            data=self,
        )


def labelled(completions: Sequence[Completion]) -> bool:
    """Are the candidate's completions labelled both serial and loaded (the design sampled some alone)?"""
    labels = {getattr(c, "load", None) for c in completions}
    return {"serial", "loaded"} <= labels


def coverage_positions(defaults: dict, completions: Sequence[Completion]) -> int:
    """The positions a run covers: 1..max_tokens as the files asked, else up to the longest completion."""
    max_tokens = defaults.get("max_tokens", defaults.get("n_predict"))
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens > 0:
        return max_tokens
    return max((len(c.tokens) for c in completions), default=1) or 1


def _record(data: PromptData, name: str, result, category: str = "invariant") -> CheckRecord:
    return CheckRecord(data.impl, data.pid, name, category, result)


def hard_checks(case: EngineCase) -> list[CheckRecord]:
    """Greedy equality (temperature 0, a reference with one output), no token past an end token, the support (none
    for a pooled run's pooled case: its member prompts run them)."""
    data = case.data
    out: list[CheckRecord] = []
    if isinstance(data, PooledData):
        return out
    if case.greedy and not case.reference_varies and data.ref:
        out.append(_record(data, "greedy_equality", hard.greedy_equality(data.ref, data.cand)))
    past_end = hard.tokens_past_end(data.ref, data.cand)
    if past_end is not None:
        out.append(_record(data, "tokens_past_end", past_end))
    support = hard.support_check(data.cand, data.reports, data.top_k)
    if support is not None:
        out.append(_record(data, "reported_support", support))
    return out


def _paired(reference: SampleFile, candidate: SampleFile) -> list[tuple[str, int, int]]:
    """(prompt, reference completions, candidate completions) of the prompts both headers list."""
    ref, cand = reference.by_prompt(), candidate.by_prompt()
    return [
        (pid, len(ref[pid]), len(cand[pid]))
        for pid in reference.header.prompts
        if pid in candidate.header.prompts
    ]


def prompts(reference: SampleFile, candidate: SampleFile) -> list[PromptData]:
    """The prompts with completions in both files (`skipped_prompts`: the others); ValueError when there are none."""
    out = [
        PromptData(pid, reference, candidate)
        for pid, n_ref, n_cand in _paired(reference, candidate)
        if n_ref and n_cand
    ]
    if not out:
        raise ValueError("no prompt has completions in both files")
    return out


def skipped_prompts(reference: SampleFile, candidate: SampleFile) -> list[str]:
    """A note per prompt both files list that lacks completions in one of them (it is skipped)."""
    return [
        f"{pid}: skipped ({n_ref} reference, {n_cand} candidate completions)"
        for pid, n_ref, n_cand in _paired(reference, candidate)
        if not (n_ref and n_cand)
    ]


def engine_name(sample: SampleFile) -> str:
    engine = sample.header.engine
    return (
        f"{engine.get('name')} {engine.get('version') or ''}".strip()
        + f" ({sample.header.model.get('name')})"
    )


def case_summary(data: PromptData | PooledData, case: EngineCase) -> dict:
    premise_check = data.premise
    return {
        "name": case.name,
        "greedy": case.greedy,
        "positions": [1, case.positions],
        "n_reference": len(data.ref),
        "n_candidate": len(data.cand),
        "prefix_reports": sum(len(part.reports) for part in data.parts),
        "decode_time_reports": sum(len(part.decode_reports) for part in data.parts),
        "law_checks": case.law,
        "pooled": [part.pid for part in data.parts] if len(data.parts) > 1 else None,
        "member": case.member,
        "seed_space": data.seed_space,
        "report_premise": None
        if premise_check is None
        else {
            "pairs": premise_check.pairs,
            "largest_difference": premise_check.largest_difference,
            "holds": premise_check.holds,
            "where": premise_check.where,
        },
    }


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
            if prefix in data.self_reports:
                if prefix not in cache:
                    cache[prefix] = _entropy(data.self_reports[prefix].top_probs)
                values.append(cache[prefix])
    return float(np.mean(values)) if values else None


def engine_summary(
    reference: SampleFile, candidate: SampleFile, evidence: dict, prompts: list[PromptData]
) -> dict:
    determinism = {}
    for role, attr in (("reference", "ref_all"), ("candidate", "cand_all")):
        per_prompt = {data.pid: hard.determinism(getattr(data, attr)) for data in prompts}
        known = [
            d["seed_deterministic"]
            for d in per_prompt.values()
            if d["seed_deterministic"] is not None
        ]
        determinism[role] = {
            "seed_deterministic": all(known) if known else None,
            "repeats": sum(d["repeats"] for d in per_prompt.values()),
            "differing": {
                pid: d["differing_seeds"] for pid, d in per_prompt.items() if d["differing_seeds"]
            },
        }
    return {
        "reference_file": reference.path,
        "candidate_file": candidate.path,
        "reference_engine": reference.header.engine,
        "candidate_engine": candidate.header.engine,
        "model": reference.header.model,
        "request_defaults": reference.header.request_defaults,
        "design": {"reference": reference.header.design, "candidate": candidate.header.design},
        "speculation_evidence": evidence,
        "determinism": determinism,
        "prompt_entropy_nats": {data.pid: report_entropy(data) for data in prompts},
        "load": {**load_record(reference, candidate), "text": load_paragraph(reference, candidate)},
    }
