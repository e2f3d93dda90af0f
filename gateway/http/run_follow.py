"""Following a background run's events: at its creation (`stream: true`) and resumed with
`GET /v1/responses/{id}?stream=true&starting_after=N`, on any replica.

On the replica running it a follower reads the frames in memory (http/background.py); anywhere
else (or once the run ended) it reads the store: `events_after`, then `wait` for more until the
run is terminal and every event is read. Both give the same frames in the same order: no gap, no
duplicate. A follower leaving ends its stream only, never the run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

from aiohttp import web

from gateway.errors import InvalidRequestError
from gateway.http import appkeys
from gateway.http.background import BACKGROUND_RUNS, BackgroundRun, run_store
from gateway.http.sse import KEEPALIVE_FRAME, SSEWriter
from gateway.store.api import StoredResponse
from gateway.store.runs import TERMINAL, RunStore

log = logging.getLogger("agent_gateway.responses")

#: how long a resume on another replica waits for an event the client saw to reach the store
#: (the holder stores them every FLUSH_SECONDS)
CATCH_UP_SECONDS = 1.0
GONE_MESSAGE = ("The events of this response are no longer available (they are kept about 10 minutes "
                "after it ends).")


async def from_store(store: RunStore, response_id: str, after: int, *, idle: float) -> AsyncIterator[bytes]:
    """The stored frames after `after`, then each new batch until the run ended and all are read;
    `b""` after `idle` seconds without one (the caller's keepalive cue)."""
    quiet_since = time.monotonic()
    while True:
        run = await store.get(response_id)  # read before the events: a run ended has all its events stored
        if run is not None and run.last_seq > after:
            batch = await store.events_after(response_id, after)
            if batch:
                after = batch[-1][0]
                quiet_since = time.monotonic()
                yield b"".join(frame for _, frame in batch)
                continue
        if run is None or run.status in TERMINAL:
            return
        await store.wait(response_id, timeout=idle)  # a change after the reads above wakes it at once
        if time.monotonic() - quiet_since >= idle:
            quiet_since = time.monotonic()
            yield b""


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
    try:
        return int(raw)
    except ValueError:
        raise InvalidRequestError("'starting_after' must be an integer sequence number.",
                                  param="starting_after") from None


def _within(after: int, last_seq: int) -> int:
    if after < -1 or after > last_seq:  # a client resumes after an event it was sent
        raise InvalidRequestError(f"'starting_after' {after} is beyond the last event of this response "
                                  f"({last_seq}).", param="starting_after")
    return after


async def resume(request: web.Request, record: StoredResponse) -> web.StreamResponse:
    """GET /v1/responses/{id}?stream=true: the events after `starting_after`, then live."""
    if not record.response.get("background"):
        raise InvalidRequestError("Only a background response can be streamed again; this one was not "
                                  "created with 'background': true.", param="stream")
    wanted = _starting_after(request)
    local = request.app[BACKGROUND_RUNS].get(record.id)
    if local is not None:
        after = _within(wanted, len(local.frames) - 1)
        return await stream(request, record.id, follow_local(request, local, after))
    store = run_store(request.app)
    run = await store.get(record.id)
    if run is None:
        raise InvalidRequestError(GONE_MESSAGE, param="stream")
    if wanted > run.last_seq:
        # the replica running it stores its events in batches: one the client was just sent
        # there may not have reached the store yet
        deadline = time.monotonic() + CATCH_UP_SECONDS
        while run is not None and run.status not in TERMINAL and run.last_seq < wanted \
                and (left := deadline - time.monotonic()) > 0:
            await store.wait(record.id, timeout=left)
            run = await store.get(record.id)
        if run is None:
            raise InvalidRequestError(GONE_MESSAGE, param="stream")
    after = _within(wanted, run.last_seq)
    idle = request.app[appkeys.SETTINGS].keepalive_interval
    return await stream(request, record.id, from_store(store, record.id, after, idle=idle))
