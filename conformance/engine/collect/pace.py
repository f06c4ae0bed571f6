"""The reference's completions paced to the candidate's (`Pace`): a collection round samples both ends at once, and
a reference completion without its candidate partner serves no check."""

from __future__ import annotations

import asyncio


class Pace:
    """Keeps the reference's completions within `lead` of the candidate's: a reference completion whose candidate
    partner is not sampled is of no use to any check, and its time (and its prefixes' teacher forcing) is better spent
    on the reports the candidate's completions need. `finish` releases the reference when the candidate is done."""

    def __init__(self, lead: int) -> None:
        self.done, self.lead, self.finished = 0, lead, False
        self.changed = asyncio.Event()

    def advance(self) -> None:
        self.done += 1
        self.changed.set()

    def finish(self) -> None:
        self.finished = True
        self.changed.set()

    async def wait(self, position: int) -> None:
        """Return once the candidate has sampled at least `position - lead` completions (or stopped)."""
        while not self.finished and self.done + self.lead < position:
            self.changed.clear()
            await self.changed.wait()


__all__ = ["Pace"]
