"""One probe of every URL before any sampling, so that an engine that is not there is named at once (exit 6), not
after a round of retries or as a crash half-way through the prompts' tokenisation."""

from __future__ import annotations

from contextlib import AsyncExitStack

from .engine_errors import EngineUnreachable
from .plan import Transport


async def probe_endpoints(transport: Transport) -> None:
    """One request to every URL of every role given (`DialectClient.probe`): `EngineUnreachable` naming the role,
    the URL and the flag to fix when nothing answers there. An in-process engine is built instead (its failure to
    build is raised as it is)."""
    async with AsyncExitStack() as stack:
        for role, urls in transport.endpoints().items():
            for url in urls:
                client = await stack.enter_async_context(transport.client(url, role))
                try:
                    await client.probe()
                except EngineUnreachable as error:
                    raise EngineUnreachable(
                        f"the {role}: {error}: start the engine there, or fix --{role}-url"
                    ) from None


__all__ = ["probe_endpoints"]
