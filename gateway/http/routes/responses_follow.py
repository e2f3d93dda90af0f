"""Sending a background run's events to a follower as SSE (the frames come from gateway/runs/follow.py):
at its creation (`stream: true`), and resumed with `GET /v1/responses/{id}?stream=true&starting_after=N`."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from aiohttp import web

from gateway.errors import InvalidRequestError
from gateway.http import appkeys
from gateway.http.sse import KEEPALIVE_FRAME, SSEWriter
from gateway.runs.background import BACKGROUND_RUNS, BackgroundRun
from gateway.runs.follow import frames_after
from gateway.store.api import StoredResponse

log = logging.getLogger("agent_gateway.responses")


async def stream(request: web.Request, response_id: str, frames: AsyncIterator[bytes]) -> web.StreamResponse:
    """Send a follower's frames as SSE until they end. The client leaving ends this stream only."""
    sse = SSEWriter(request)
    try:
        async for chunk in frames:
            await sse.send(chunk or KEEPALIVE_FRAME)
        await sse.finish()
    except (ConnectionError, RuntimeError):
        log.info("client left the stream of background response %s; the run goes on", response_id)
    return sse.response


def follow_local(request: web.Request, run: BackgroundRun, after: int) -> AsyncIterator[bytes]:
    return run.follow(after, idle=request.app[appkeys.SETTINGS].keepalive_interval)


def _starting_after(request: web.Request) -> int:
    raw = request.query.get("starting_after")
    if raw is None:
        return -1
    # ASCII digits only: int() also takes '1_0', '+3', ' 3' and other scripts' digits
    if not (0 < len(raw) <= 18 and raw.isascii() and raw.isdigit()):
        raise InvalidRequestError("'starting_after' must be a sequence number (ASCII digits).",
                                  param="starting_after")
    return int(raw)


async def resume(request: web.Request, record: StoredResponse) -> web.StreamResponse:
    """GET /v1/responses/{id}?stream=true: the events after `starting_after`, then live."""
    if not record.response.get("background"):
        raise InvalidRequestError("Only a background response can be streamed again; this one was not "
                                  "created with 'background': true.", param="stream")
    idle = request.app[appkeys.SETTINGS].keepalive_interval
    frames = await frames_after(request.app[BACKGROUND_RUNS], record.id, _starting_after(request), idle=idle)
    return await stream(request, record.id, frames)
