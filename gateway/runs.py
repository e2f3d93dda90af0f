"""Running the agent for a route: the parts both wire formats share."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web

from gateway import appkeys
from gateway.agent import AgentRequest
from gateway.errors import GatewayError, UpstreamTimeoutError
from gateway.events import AgentEvent, ToolCallStarted


def run_timeout_error(seconds: float) -> UpstreamTimeoutError:
    return UpstreamTimeoutError(f"the agent run took longer than AGENT_RUN_TIMEOUT ({seconds:g} s)",
                                code="run_timeout")


async def run_to_end(app: web.Application, agent_request: AgentRequest,
                     feed: Callable[[AgentEvent], object]) -> None:
    """Run one turn for a non-streamed reply, handing each event to `feed`.

    Bounded by AGENT_RUN_TIMEOUT; a failure after a tool ran says `x-should-retry: false`, since an
    SDK's automatic retry would run the tools (and their cost) again.
    """
    settings = app[appkeys.SETTINGS]
    did_work = False
    try:
        async with asyncio.timeout(settings.run_timeout):
            async for event in app[appkeys.AGENT].run(agent_request):
                did_work = did_work or isinstance(event, ToolCallStarted)
                feed(event)
    except TimeoutError as exc:
        raise run_timeout_error(settings.run_timeout) from exc
    except GatewayError as exc:
        if did_work:
            exc.should_retry = False
        raise
