"""What the synthetic server serves beside the modes of `synthetic_engine`: the draft model served plain, whose
reports of a candidate's prefixes a NOT_EXACT's diagnosis reads (`collect.draft_reports`)."""

from __future__ import annotations

from .synthetic_engine import MODES, Mode, Plain, Request
from .synthetic_model import draw


class DraftPlain(Plain):
    """draft (not a candidate): the draft model served plain, one token per step from the warped draft row: the
    draft's reports of a candidate's prefixes, which a NOT_EXACT's diagnosis reads (`collect.draft_reports`)."""

    name, exact = "draft", False

    def round(self, req: Request, k: int) -> tuple[list[int], int]:
        return [draw(req.model.draft_row(req.context, req.chain), req.rng)], 0


#: What the server can serve: every mode, and the draft served plain.
SERVABLE: dict[str, Mode] = {**MODES, "draft": DraftPlain()}


def servable(name: str) -> Mode:
    """The servable mode named `name` (ValueError listing the names otherwise)."""
    if name not in SERVABLE:
        raise ValueError(f"mode must be one of {sorted(SERVABLE)}, got {name!r}")
    return SERVABLE[name]


__all__ = ["DraftPlain", "SERVABLE", "servable"]
