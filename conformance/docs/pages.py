"""The pages that hold generated regions (every Markdown file of the docs, found by its markers), and rendering
them: `write_regions` rewrites, `stale_regions` lists what differs."""

from __future__ import annotations

from pathlib import Path

from .regions import fill, regions, unmatched_marks
from .renderers import RENDERERS, Context

#: Where generated regions may sit (globs relative to the repository root).
PAGE_GLOBS = (
    "README.md",
    "docs/**/*.md",
    "conformance/CONTRACT.md",
    "benchmarks/README.md",
    "proofs/*.md",
    "stat_tests/README.md",
    "gpu_impl/README.md",
)


def pages(repo: Path) -> list[Path]:
    """Every page (relative to `repo`) with at least one generated-region marker."""
    found = {
        p
        for pattern in PAGE_GLOBS
        for p in repo.glob(pattern)
        if "<!-- generated: " in p.read_text()
    }
    return sorted(p.relative_to(repo) for p in found)


def rendered(repo: Path, page: Path, ctx: Context | None = None) -> str:
    """The page's text with every region rendered anew; a ValueError for a region without a renderer or a stray
    marker."""
    ctx = ctx or Context(repo)
    text = (repo / page).read_text()
    stray = unmatched_marks(text)
    if stray:
        raise ValueError(f"{page}: markers that open or close no region: {stray}")
    names = regions(text)
    unknown = sorted(set(names) - set(RENDERERS))
    if unknown:
        raise ValueError(
            f"{page}: regions with no renderer: {unknown} (known: {sorted(RENDERERS)})"
        )
    return fill(text, {name: RENDERERS[name](ctx) for name in names})


def write_regions(repo: Path) -> list[Path]:
    """Rewrite every page whose regions are stale; -> the pages rewritten."""
    ctx, written = Context(repo), []
    for page in pages(repo):
        new = rendered(repo, page, ctx)
        if new != (repo / page).read_text():
            (repo / page).write_text(new)
            written.append(page)
    return written


def stale_regions(repo: Path) -> list[tuple[Path, str]]:
    """(page, region) for every region whose text is not what its renderer gives now."""
    ctx, out = Context(repo), []
    for page in pages(repo):
        now = regions((repo / page).read_text())
        fresh = regions(rendered(repo, page, ctx))
        out += [(page, name) for name in now if now[name] != fresh[name]]
    return out


__all__ = ["PAGE_GLOBS", "pages", "rendered", "stale_regions", "write_regions"]
