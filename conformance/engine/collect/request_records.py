"""What a request leaves behind: the errors that stop a collection (not exactspec's bugs), the request as recorded
in a sample file, and the line a finished batch prints."""

from __future__ import annotations

import sys

import httpx

from .engine_errors import EngineCallError
from .jobs import Outcome

#: A request that raises one of these (after its retries) stops the run; the output stays resumable. ValueError: a
#: reply the dialect cannot read; EngineCallError: an in-process engine that raised.
REQUEST_ERRORS = (httpx.HTTPError, ValueError, EngineCallError)


def record_of_request(body: dict) -> dict:
    """The request as recorded: the body sent without the prompt (the header's prompt, plus the prefix)."""
    return {key: value for key, value in body.items() if key != "prompt"}


def report_outcome(name: str, outcome: Outcome, skipped: int, dropped: int = 0) -> None:
    """One line on stderr: what a batch wrote, found on disk and left; a warning when reports were dropped."""
    print(
        f"{name}: {outcome.written} written, {skipped} already on disk, {outcome.left} left",
        file=sys.stderr,
    )
    if dropped:
        print(
            f"{name}: warning: {dropped} completions recorded without top_probs (the engine did not report a "
            "distribution at every position, e.g. speculative rounds)",
            file=sys.stderr,
        )


__all__ = ["REQUEST_ERRORS", "record_of_request", "report_outcome"]
