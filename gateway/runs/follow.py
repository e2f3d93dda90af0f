"""Following a background run's events, on any replica: the frames a follower gets after the one
it saw, at the run's creation (`stream: true`) or resumed with `GET /v1/responses/{id}?stream=true
&starting_after=N` (gateway/http/routes/responses_follow.py sends them as SSE).

On the replica running it a follower reads the frames in memory (runs/background.py); anywhere
else (or once the run ended) it reads the store: `events_after`, then `wait` for more until the
run is terminal and every event is read. Both give the same frames in the same order: no gap, no
duplicate. A follower leaving ends its stream only, never the run.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from gateway.errors import InvalidRequestError
from gateway.runs.background import BackgroundRuns
from gateway.store.runs import TERMINAL, RunStore

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


def _within(after: int, last_seq: int) -> int:
    if after < -1 or after > last_seq:  # a client resumes after an event it was sent
        raise InvalidRequestError(f"'starting_after' {after} is beyond the last event of this response "
                                  f"({last_seq}).", param="starting_after")
    return after


async def frames_after(runs: BackgroundRuns, response_id: str, wanted: int, *, idle: float) -> AsyncIterator[bytes]:
    """A follower's frames after sequence number `wanted` (-1: all), from memory when this replica
    runs it, else from the store; `b""` after `idle` quiet seconds (the keepalive cue)."""
    local = runs.get(response_id)
    if local is not None:
        return local.follow(_within(wanted, len(local.frames) - 1), idle=idle)
    store = runs.store.runs
    run = await store.get(response_id)
    if run is None:
        raise InvalidRequestError(GONE_MESSAGE, param="stream")
    if wanted > run.last_seq:
        # the replica running it stores its events in batches: one the client was just sent
        # there may not have reached the store yet
        deadline = time.monotonic() + CATCH_UP_SECONDS
        while run is not None and run.status not in TERMINAL and run.last_seq < wanted \
                and (left := deadline - time.monotonic()) > 0:
            await store.wait(response_id, timeout=left)
            run = await store.get(response_id)
        if run is None:
            raise InvalidRequestError(GONE_MESSAGE, param="stream")
    return from_store(store, response_id, _within(wanted, run.last_seq), idle=idle)
