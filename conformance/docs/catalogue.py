"""The committed certificates as the indexes list them: each one's JSON (`core.report.read_certificate`), where it
sits, and its flags: made from a dirty tree (`provenance.exactspec.uncommitted_changes`) or with sample files
changed after it was written (their recorded sha256, else the files committed with the certificate, from git).
"""

from __future__ import annotations

import gzip
import hashlib
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..core.report import read_certificate

CERTIFICATES = Path("docs/certificates")
SAMPLE_NAMES = ("reference.jsonl", "candidate.jsonl")
DIRTY = "dirty tree"
SAMPLES_CHANGED = "samples changed after"


@dataclass
class Certificate:
    """One certificate folder: its path under docs/certificates, its document and its flags."""

    name: str  # e.g. "engine/ngram-t0.7"
    doc: dict
    flags: list[str] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        return CERTIFICATES / self.name


def read_all(repo: Path) -> dict[str, Certificate]:
    """Every certificate.json under docs/certificates (by folder name, sorted), with its flags."""
    out = {}
    for path in sorted((repo / CERTIFICATES).rglob("certificate.json")):
        name = path.parent.relative_to(repo / CERTIFICATES).as_posix()
        cert = Certificate(name, read_certificate(path))
        cert.flags = flags_of(repo, cert)
        out[name] = cert
    return out


def flags_of(repo: Path, cert: Certificate) -> list[str]:
    """DIRTY where the provenance says the tree had uncommitted changes; SAMPLES_CHANGED where a sample file is not
    the one the certificate was written from."""
    out = []
    if ((cert.doc.get("provenance") or {}).get("exactspec") or {}).get(
        "uncommitted_changes"
    ) is True:
        out.append(DIRTY)
    if changed_samples(repo, cert):
        out.append(SAMPLES_CHANGED)
    return out


def sample_files(repo: Path, cert: Certificate) -> list[Path]:
    """The certificate's sample files as committed (plain or gzipped), relative to the repository."""
    folder = repo / cert.folder
    return [
        p.relative_to(repo)
        for name in SAMPLE_NAMES
        for p in (folder / name, folder / f"{name}.gz")
        if p.is_file()
    ]


def content_sha256(data: bytes, name: str) -> str:
    """The sha256 of a sample file's content (a gzipped one decompressed: gzip's own header is not content)."""
    return hashlib.sha256(gzip.decompress(data) if name.endswith(".gz") else data).hexdigest()


def changed_samples(repo: Path, cert: Certificate) -> list[str]:
    """The sample files that differ from the ones the certificate was written from: from the sha256 it records
    (`certificate_run.sample_sha256`), else from the files committed in the last commit of its certificate.json."""
    files = sample_files(repo, cert)
    recorded = (cert.doc.get("certificate_run") or {}).get("sample_sha256")
    if recorded:
        return [
            f.name
            for f in files
            if recorded.get(f.name) not in (None, content_sha256((repo / f).read_bytes(), f.name))
        ]
    commit = _git(
        repo, "log", "-1", "--format=%H", "--", (cert.folder / "certificate.json").as_posix()
    )
    if not files or not commit:
        return []
    changed = []
    for f in files:
        then = _git_bytes(repo, "show", f"{commit.strip()}:{f.as_posix()}")
        now = (repo / f).read_bytes()
        if then is not None and content_sha256(then, f.name) != content_sha256(now, f.name):
            changed.append(f.name)
    return changed


def _git_bytes(repo: Path, *args: str) -> bytes | None:
    try:
        done = subprocess.run(["git", *args], cwd=repo, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _git(repo: Path, *args: str) -> str | None:
    out = _git_bytes(repo, *args)
    return out.decode() if out else None


def has_history(repo: Path) -> bool:
    """Whether git can say which files were committed with a certificate (a full clone, not a shallow one)."""
    shallow = _git(repo, "rev-parse", "--is-shallow-repository")
    return shallow is not None and shallow.strip() == "false"


__all__ = [
    "CERTIFICATES",
    "Certificate",
    "DIRTY",
    "SAMPLES_CHANGED",
    "changed_samples",
    "content_sha256",
    "flags_of",
    "has_history",
    "read_all",
    "sample_files",
]
