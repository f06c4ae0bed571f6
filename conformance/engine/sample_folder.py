"""A certificate folder's sample files: the file of a role (plain or gzipped), and a draft file checked against the
candidate it describes."""

from __future__ import annotations

from pathlib import Path

from .samples import SampleFile


def sample_file_in(folder: str | Path, role: str) -> Path:
    """A certificate folder's file of `role`: ROLE.jsonl, or ROLE.jsonl.gz; ValueError naming the folder otherwise."""
    for name in (f"{role}.jsonl", f"{role}.jsonl.gz"):
        if (Path(folder) / name).is_file():
            return Path(folder) / name
    raise ValueError(f"CERT_DIR: {folder} has no {role}.jsonl or {role}.jsonl.gz")


def checked_draft(draft: SampleFile, candidate: SampleFile) -> SampleFile:
    """`draft` when it is a draft file of the candidate's prompts (ValueError naming the file otherwise)."""
    if draft.header.role != "draft":
        raise ValueError(f"{draft.path}: header role is {draft.header.role!r}, expected 'draft'")
    if dict(draft.header.prompts) != dict(candidate.header.prompts):
        raise ValueError(f"{draft.path}: its prompts are not the candidate's ({candidate.path})")
    return draft


__all__ = ["checked_draft", "sample_file_in"]
