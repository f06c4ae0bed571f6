"""What the engine level certifies (a pair of sample files) and its cases (one prompt each), as plain data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .samples import SampleFile


@dataclass(frozen=True)
class SamplePair:
    """What the engine level certifies: the reference's and the candidate's sample files."""

    reference: SampleFile
    candidate: SampleFile


@dataclass(frozen=True, eq=False)
class EngineCase:
    """One prompt, and which checks its data allow (decided from the files' structure, before any test)."""

    name: str
    greedy: bool  # temperature 0: the hard equality check replaces the statistical ones
    positions: int
    pit: bool  # the reference holds post-sampling prefix_probs for this prompt
    reported: bool  # the reference reported post-sampling first-token probabilities
    data: Any = field(default=None, repr=False)  # checks.PromptData: the prompt's completions and reports
    notes: list[str] = field(default_factory=list, repr=False)  # what its hard checks had to say
