"""What the engine level certifies (a pair of sample files) and its cases (one prompt each), as plain data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .samples import SampleFile


@dataclass(frozen=True)
class SamplePair:
    """What the engine level certifies: the reference's and the candidate's sample files; `pooled`: the prompts are
    certified together (many prompts, few completions each), not one by one; `draft`: the draft's reports, which only
    the diagnosis of a NOT_EXACT reads."""

    reference: SampleFile
    candidate: SampleFile
    pooled: bool = False
    # the draft served plain, its reports of the candidate's prefixes (diagnosis only)
    draft: SampleFile | None = None


@dataclass(frozen=True, eq=False)
class EngineCase:
    """One prompt, and which checks its data allow (decided from the files' structure and the reference alone,
    before any test of the candidate)."""

    name: str
    greedy: bool  # temperature 0: equality (or the spread test) replaces the law checks
    positions: int  # m: the law checks read positions 1..m (the drift 2..m)
    # the reference reported the prefixes of the candidate's tokens (teacher forcing)
    law: bool = True
    # the reference reported its own prefixes (its self-check can run)
    reference_reported: bool = True
    reference_varies: bool = False  # temperature 0 and the reference's output differs between seeds
    member: bool = False  # a prompt of a pooled run: its hard checks run here, its statistics in the pooled case
    # the candidate's completions are labelled serial and loaded (the load check runs)
    load_labels: bool = False
    # checks.PromptData: the prompt's completions and reports
    data: Any = field(default=None, repr=False)
    notes: list[str] = field(default_factory=list, repr=False)  # what its hard checks had to say
