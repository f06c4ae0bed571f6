"""The synthetic engine certified as a user certifies an engine: its two prompts and the settings of one mode's
`exactspec engine certify` run (`run_mode`), shared by the tests and `benchmarks/synthetic_certificates.py`.

Each run serves the plain mode (the reference) and the mode (the candidate) in their own processes on 127.0.0.1
(`SyntheticServer`, stopped by PID) and certifies them by the one command's rounds (`collect.campaign.run_campaign`):
T = 0.7 with the truncation a truncation bug needs (`synthetic_deviation.PROBES`), max_tokens 16 (every position
read), 4 candidate requests in flight and a serial share of 0.25, the mode's speculation declared (seed-coupled for
the modes that are), one seed key (reproducible), at most `max_per_prompt` completions a prompt.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ....outcomes import Verdict
from ..collect.campaign import Certification, run_campaign
from ..collect.client import SamplerChain
from ..collect.design import SeedDesign
from ..collect.draft_reports import collect_draft_reports
from ..collect.plan import CollectionPlan, Forcing, Identity, Limits
from ..engine_level import certify_samples
from ..result import EngineResult
from ..samples import read_samples
from .synthetic_deviation import DEFAULT_PROMPT, PROBES
from .synthetic_engine import MODES
from .synthetic_server import SyntheticServer

PROMPTS = [
    {"prompt_id": "p59", "prompt_tokens": list(DEFAULT_PROMPT)},
    {"prompt_id": "p789", "prompt_tokens": [7, 8, 9]},
]
SEED_KEY = "5eed0000000000000000000000000050"
#: A NOT_EXACT's diagnosis reads the draft's reports of at most this many of the candidate's prefixes.
DRAFT_PREFIXES = 4000


def mode_plan(
    mode: str,
    declared_coupled: bool | None = None,
    max_per_prompt: int = 50_000,
    time_limit_s: float = 3600.0,
) -> CollectionPlan:
    """The plan of one mode's run (its truncation probe; its coupling declared as it is, or as `declared_coupled`
    says: a user may declare a coupling the engine does not have), without its URLs."""
    chain = SamplerChain(temperature=0.7, max_tokens=16, **PROBES.get(mode, {}))
    coupled = MODES[mode].seed_coupled if declared_coupled is None else declared_coupled
    speculation = {
        "type": "draft-model",
        "draft_sampling": "greedy" if coupled else "probabilistic",
        "expect_seed_coupled": coupled,
    }
    return CollectionPlan(
        law=chain,
        seeds=SeedDesign(key=SEED_KEY),
        limits=Limits(time_limit_s=time_limit_s, max_per_prompt=max_per_prompt),
        identity=Identity(engine_name="exactspec-synthetic", speculation=speculation),
        forcing=Forcing(teacher_n_probs=20, reference_n_probs=20),
    )


def run_mode(
    mode: str,
    profile: str = "lm-like",
    *,
    max_per_prompt: int = 50_000,
    certify_profile: str = "standard",
    out: str | Path | None = None,
    time_limit_s: float = 3600.0,
    declared_coupled: bool | None = None,
) -> EngineResult:
    """Serve `mode` on the `profile` model and certify it in rounds; the last look's result (`out`: keep the run's
    files there; by default a temporary folder, removed; `declared_coupled`: as `mode_plan`; `time_limit_s`: a safety
    net, the budget is `max_per_prompt`)."""
    folder = (
        Path(out)
        if out is not None
        else Path(tempfile.mkdtemp(prefix=f"synthetic-{profile}-{mode}-"))
    )
    try:
        with (
            SyntheticServer("plain", profile=profile) as ref,
            SyntheticServer(mode, profile=profile) as cand,
        ):
            plan = mode_plan(mode, declared_coupled, max_per_prompt, time_limit_s)
            result = run_campaign(
                PROMPTS,
                folder,
                plan.with_urls([ref.base_url], [cand.base_url]),
                Certification(certify_profile),
            )
        return (
            rediagnosed_with_draft(result, folder, profile, certify_profile)
            if result.verdict == Verdict.NOT_EXACT
            else result
        )
    finally:
        if out is None:
            shutil.rmtree(folder, ignore_errors=True)


def rediagnosed_with_draft(
    result: EngineResult, folder: Path, profile: str, certify_profile: str
) -> EngineResult:
    """A NOT_EXACT's result with its diagnosis made again with the draft's reports (the draft served plain, its
    reports of the candidate's first `DRAFT_PREFIXES` prefixes in folder/draft.jsonl), so that it can name the
    mechanisms that read q. The files are certified again with them, and their verdict is the run's (ValueError if it
    were not: the draft's reports are read by the diagnosis alone)."""
    reference, candidate = (
        read_samples(folder / "reference.jsonl"),
        read_samples(folder / "candidate.jsonl"),
    )
    with SyntheticServer("draft", profile=profile) as draft_server:
        collect_draft_reports(
            draft_server.base_url,
            candidate,
            reference.header.request_defaults,
            int(reference.header.request_defaults["max_tokens"]),
            folder / "draft.jsonl",
            n_probs=20,
            limit=DRAFT_PREFIXES,
        )
    again = certify_samples(
        reference, candidate, certify_profile, draft=read_samples(folder / "draft.jsonl")
    )
    if again.verdict != result.verdict:
        raise ValueError(f"the files' verdict {again.verdict} is not the run's {result.verdict}")
    result.extra["diagnosis"] = again.extra.get("diagnosis")
    return result


__all__ = [
    "DRAFT_PREFIXES",
    "PROMPTS",
    "SEED_KEY",
    "mode_plan",
    "rediagnosed_with_draft",
    "run_mode",
]
