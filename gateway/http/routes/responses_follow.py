"""Sending a background run's events to a follower as SSE (the frames come from gateway/runs/follow.py):
at its creation (`stream: true`), and resumed with `GET /v1/responses/{id}?stream=true&starting_after=N`.

Each follower takes a slot first (runs/followers.py: a 429 past API_SERVER_MAX_FOLLOWERS_PER_RUN
or _PER_KEY), and is dropped when its client leaves a write untaken for
API_SERVER_FOLLOWER_STALL_SECONDS (http/sse.py); either way the run goes on.
"""

from __future__ import annotations

import logging

from aiohttp import web

from gateway.errors import GatewayError, InvalidRequestError
from gateway.http import appkeys
from gateway.http.auth import store_of
from gateway.http.sse import KEEPALIVE_FRAME, SSEWriter, StalledClientError
from gateway.runs.background import BACKGROUND_RUNS
from gateway.runs.follow import following
from gateway.runs.followers import FollowerSlot

log = logging.getLogger("agent_gateway.responses")
_KEEPALIVE = (KEEPALIVE_FRAME,)


def admit(request: web.Request, response_id: str) -> FollowerSlot:
    """A follower's slot for the caller, or the 429 (before anything is stored or sent)."""
    settings = request.app[appkeys.SETTINGS]
    return request.app[BACKGROUND_RUNS].followers.admit(
        response_id, store_of(request).owner, per_run=settings.max_followers_per_run,
        per_key=settings.max_followers_per_key)


async def stream(request: web.Request, response_id: str, after: int, slot: FollowerSlot) -> web.StreamResponse:
    """Send the run's frames after sequence number `after` as SSE until they end, then give
    `slot` back. The client leaving (or stalling) ends this stream only."""
    settings = request.app[appkeys.SETTINGS]
    stall = settings.follower_stall_seconds
    sse = SSEWriter(request)
    try:
        async with following(request.app[BACKGROUND_RUNS], response_id, after,
                             idle=settings.keepalive_interval) as frames:
            try:
                async for batch in frames:
                    await sse.send_frames(batch or _KEEPALIVE, stall=stall)
                await sse.finish_within(stall)
            except StalledClientError:
                log.info("a follower of background response %s took nothing for %g s: dropped; the run goes on",
                         response_id, stall)
            except (ConnectionError, RuntimeError):
                log.info("client left the stream of background response %s; the run goes on", response_id)
            except GatewayError as exc:
                if not sse.started:
                    raise
                # past the status line: cut the stream short, so the client sees it unfinished
                # (and may resume after the last event it got) rather than a clean end
                log.warning("the stream of background response %s was cut: %s", response_id,
                            exc.detail or exc.message)
                if request.transport is not None:
                    request.transport.abort()
    finally:
        slot.release()
    return sse.response


def _starting_after(request: web.Request) -> int:
    raw = request.query.get("starting_after")
    if raw is None:
        return -1
    # ASCII digits only: int() also takes '1_0', '+3', ' 3' and other scripts' digits
    if not (0 < len(raw) <= 18 and raw.isascii() and raw.isdigit()):
        raise InvalidRequestError("'starting_after' must be a sequence number (ASCII digits).",
                                  param="starting_after")
    return int(raw)


async def resume(request: web.Request, response_id: str, *, background: bool) -> web.StreamResponse:
    """GET /v1/responses/{id}?stream=true of the caller's response `response_id`: the events after
    `starting_after`, then live."""
    if not background:
        raise InvalidRequestError("Only a background response can be streamed again; this one was not "
                                  "created with 'background': true.", param="stream")
    after = _starting_after(request)
    return await stream(request, response_id, after, admit(request, response_id))
