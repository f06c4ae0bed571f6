"""Marked regions of a Markdown file: the text between ``<!-- generated: NAME -->`` and
``<!-- end generated: NAME -->``, each line on its own, which `conformance.docs` rewrites and checks."""

from __future__ import annotations

import re

START, END = "<!-- generated: {} -->", "<!-- end generated: {} -->"
REGION = re.compile(
    r"^<!-- generated: ([\w-]+) -->\n(.*?)^<!-- end generated: \1 -->$", re.S | re.M
)
MARK = re.compile(r"<!-- (?:end )?generated: ([\w-]+) -->")


def regions(text: str) -> dict[str, list[str]]:
    """Each region's name -> its bodies (a name may mark several regions of one file; all get the same text)."""
    out: dict[str, list[str]] = {}
    for match in REGION.finditer(text):
        out.setdefault(match.group(1), []).append(match.group(2))
    return out


def unmatched_marks(text: str) -> list[str]:
    """Markers that open or close no well-formed region (a typo, a missing end)."""
    inside = {
        m.start() for r in REGION.finditer(text) for m in MARK.finditer(text, r.start(), r.end())
    }
    return [m.group(0) for m in MARK.finditer(text) if m.start() not in inside]


def fill(text: str, bodies: dict[str, str]) -> str:
    """`text` with every region named in `bodies` holding that body (ending in one newline)."""

    def body(match: re.Match) -> str:
        name = match.group(1)
        if name not in bodies:
            return match.group(0)
        new = bodies[name] if bodies[name].endswith("\n") else bodies[name] + "\n"
        return f"{START.format(name)}\n{new}{END.format(name)}"

    return REGION.sub(body, text)


__all__ = ["END", "START", "fill", "regions", "unmatched_marks"]
