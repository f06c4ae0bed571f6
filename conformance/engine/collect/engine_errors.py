"""What goes wrong on the engine's side, as one line each: the URL that does not answer, the endpoint that answered
with an error and the engine's own message, the in-process engine that raised.

These are not bugs of exactspec and not bad arguments: the commands exit 6 (`ExitCode.UNAVAILABLE`) with the line
(`request_error_text`), never a traceback. A request that fails during a collection stops it (the files stay
resumable); a run that has nothing it could certify then ends with `EngineFailure`.
"""

from __future__ import annotations

import httpx

from ....errors import ExactspecError
from ....outcomes import ExitCode

#: Characters of an engine's error body kept in a message (bodies can be long HTML pages).
MESSAGE_CHARS = 300


class EngineUnavailable(ExactspecError):
    """The engine cannot be used here: unreachable, failing its requests, or an in-process engine that raised."""


class EngineUnreachable(EngineUnavailable):
    """Nothing answers at a URL (found by the probe before any sampling)."""


class EngineFailure(EngineUnavailable):
    """The engine failed a request (after its retries) before anything could be certified or collected."""


class EngineCallError(EngineUnavailable):
    """An in-process engine (`--engine-adapter`) raised while building, sampling or reporting."""


def engine_message(response: httpx.Response) -> str:
    """The engine's own reason in an error reply: its JSON ``error``/``detail``/``message`` field, else the text."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        found = body.get("error", body.get("detail", body.get("message")))
        if isinstance(found, dict):
            found = found.get("message", found)
        if found is not None:
            return str(found)[:MESSAGE_CHARS]
    return " ".join(response.text.split())[:MESSAGE_CHARS]


def status_error(response: httpx.Response) -> httpx.HTTPStatusError:
    """The error of a reply with status >= 400, its message naming the endpoint and the engine's reason."""
    request = response.request
    text = (
        f"{request.method} {request.url} answered HTTP {response.status_code}: "
        f"{engine_message(response) or response.reason_phrase}"
    )
    return httpx.HTTPStatusError(text, request=request, response=response)


def request_error_text(error: BaseException) -> str:
    """One line for a failed request: the endpoint and what the engine said, or why nothing answered."""
    if isinstance(error, httpx.HTTPStatusError):
        return str(error).splitlines()[0]
    if isinstance(error, httpx.TransportError):
        try:
            where = f"{error.request.method} {error.request.url}"
        except RuntimeError:  # an error raised before any request was made
            where = "the engine"
        reason = str(error) or type(error).__name__
        return f"{where}: no answer ({type(error).__name__}: {reason})"
    return f"{type(error).__name__}: {error}"


def refusal(error: ValueError | EngineUnavailable | httpx.HTTPError) -> tuple[ExitCode, str]:
    """The exit code and one line of an engine command stopped by `error`: a bad argument or input is a usage
    error; an engine unreachable or failing, also outside the collection's batches (tokenising a prompt), is
    unavailable."""
    if isinstance(error, ValueError):
        return ExitCode.USAGE, str(error)
    if isinstance(error, EngineUnavailable):
        return ExitCode.UNAVAILABLE, str(error)
    return ExitCode.UNAVAILABLE, request_error_text(error)


__all__ = [
    "EngineCallError",
    "EngineFailure",
    "EngineUnavailable",
    "EngineUnreachable",
    "engine_message",
    "refusal",
    "request_error_text",
    "status_error",
]
