"""Teacher forcing one token at a time, for servers that keep one KV cache across requests and whose kernels are not
batch-invariant (llama-cpp-python's server: ``--force-token-by-token``).

Such a server evaluates a request's prompt from the longest prefix it still holds: a teacher-forced prefix asked
cold has its generated tokens evaluated in one batch, while decoding evaluated them one at a time, and the two
logits differ in the last bits (measured: benchmarks/README.md, "Engine level"). Here every
request to one server goes through one lock, the ids the server holds after each request are tracked, and a prefix
is asked only once the server holds all of it but its last token: the missing shorter prefixes are asked first
(`priming_prefixes`), so each forced token is evaluated alone, as in decoding. The premise check of every
certificate (decode-time against teacher-forced reports) measures whether it worked.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


@dataclass
class ServerSession:
    """What this process knows of one server: the lock its requests take, and the ids it holds (None: unknown)."""

    lock: asyncio.Lock
    loop: asyncio.AbstractEventLoop
    held: tuple[int, ...] | None = None
    priming_requests: int = field(default=0)


_SESSIONS: dict[str, ServerSession] = {}


def session_of(base_url: str) -> ServerSession:
    """The one session of `base_url` in this event loop (every client of that server shares it)."""
    loop = asyncio.get_running_loop()
    session = _SESSIONS.get(base_url)
    if session is None or session.loop is not loop:
        session = _SESSIONS[base_url] = ServerSession(asyncio.Lock(), loop)
    return session


def held_after(prompt: list[int], tokens: list[int], cut: bool) -> tuple[int, ...] | None:
    """The ids a server holds after sampling `tokens` after `prompt`: every one but the last is evaluated (the last
    sampled token never is; a left-out end token counts as the last); unknown (None) for a cut completion."""
    if cut:
        return None
    return (*prompt, *tokens[:-1])


def priming_prefixes(
    held: tuple[int, ...] | None, prompt: list[int], prefix: list[int]
) -> list[int]:
    """The lengths j of the prefixes prefix[:j] to ask, in order, before prompt + prefix, so that the server then
    holds all of it but its last token: none when it does already; else from just after the longest prefix it holds
    (from the prompt alone, evaluated as decoding does, when it holds less than the prompt)."""
    wanted = (*prompt, *prefix)
    if held is not None and held[: len(wanted) - 1] == wanted[:-1] and len(held) >= len(wanted) - 1:
        return []
    start = 0
    if held is not None and held[: len(prompt)] == tuple(prompt):
        covered = len(prompt)
        while (
            covered < len(wanted) - 1 and covered < len(held) and held[covered] == wanted[covered]
        ):
            covered += 1
        start = covered - len(prompt) + 1
    return list(range(start, len(prefix)))


__all__ = ["ServerSession", "held_after", "priming_prefixes", "session_of"]
