"""Following a background run's events, on any replica: the frames a follower gets after the one
it saw, at the run's creation (`stream: true`) or resumed with `GET /v1/responses/{id}?stream=true
&starting_after=N` (gateway/http/routes/responses_follow.py sends them as SSE).

On the replica running it a follower reads the frames in memory (runs/background.py); anywhere
else (or once the run ended) it reads what this replica's one reader of the store holds for the
run (runs/store_feed.py). Both give the same frames in the same order: no gap, no duplicate, and
every follower of a run on a replica shares one copy of them (runs/frames.py). A follower leaving
ends its stream only, never the run.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator

from gateway.errors import InvalidRequestError
from gateway.runs.background import BackgroundRuns
from gateway.runs.store_feed import StoreFeed

#: how long a resume on another replica waits for an event the client saw to reach the store
#: (the holder stores them every FLUSH_SECONDS)
CATCH_UP_SECONDS = 1.0
GONE_MESSAGE = ("The events of this response are no longer available (they are kept about 10 minutes "
                "after it ends).")


def _within(after: int, last_seq: int) -> int:
    if after < -1 or after > last_seq:  # a client resumes after an event it was sent
        raise InvalidRequestError(f"'starting_after' {after} is beyond the last event of this response "
                                  f"({last_seq}).", param="starting_after")
    return after


async def _start_at(feed: StoreFeed, wanted: int) -> int:
    """Where a follower of `feed` starts: after `wanted`, once the feed has it. The replica running
    the run stores its events in batches: one the client was just sent there may not have reached
    the store yet, so a resume waits CATCH_UP_SECONDS for it."""
    await feed.looked()
    if feed.error is not None:
        raise feed.error
    if feed.missing:
        raise InvalidRequestError(GONE_MESSAGE, param="stream")
    deadline = time.monotonic() + CATCH_UP_SECONDS
    while feed.last_seq < wanted and not feed.done and (left := deadline - time.monotonic()) > 0:
        await feed.changed(left)
    return _within(wanted, feed.last_seq)


@contextlib.asynccontextmanager
async def following(runs: BackgroundRuns, response_id: str, wanted: int, *,
                    idle: float) -> AsyncIterator[AsyncIterator[list[bytes]]]:
    """A follower's frames after sequence number `wanted` (-1: all), at most FOLLOW_BATCH at a
    time, from memory when this replica runs it, else from this replica's reader of the store;
    `[]` after `idle` quiet seconds (the keepalive cue). Raises the 400s (a `starting_after`
    beyond the last event, events no longer kept) before it yields."""
    local = runs.get(response_id)
    if local is not None:
        yield local.follow(_within(wanted, local.last_seq), idle=idle)
        return
    feed = runs.feeds.attach(response_id)
    try:
        yield feed.follow(await _start_at(feed, wanted), idle=idle)
    finally:
        runs.feeds.detach(feed)
