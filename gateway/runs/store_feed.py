"""Followers of a run that another replica holds (or that has ended): one reader of the store per
run on this replica, its frames fanned out in memory to every follower here (runs/frames.py).

Each follower reading the store itself cost about two queries per batch the holder stores (a run
of a few seconds: hundreds of transactions per follower); one reader costs that once, whatever the
number of followers. The reader starts with the first follower, reads every stored frame from the
first (a later follower may resume from any of them), then waits for the store's announcements
(store/runs.py `wait`) until the run ended and every frame is read; it stops when its last
follower leaves. A feed whose reader met a store fault ends with it (each follower raises it);
the next follower starts a fresh one.
"""

from __future__ import annotations

import asyncio
import logging

from gateway.errors import GatewayError
from gateway.runs.frames import FrameLog
from gateway.store.runs import TERMINAL, RunStore

log = logging.getLogger("agent_gateway.background")

#: the longest the reader waits for an announcement before looking again (a notification lost
#: with a dropped LISTEN connection costs this much, never the frames)
WAIT_SECONDS = 5.0


class StoreFeed(FrameLog):
    """The stored frames of one run, read once for this replica's followers."""

    def __init__(self, store: RunStore, response_id: str) -> None:
        super().__init__()
        self.response_id = response_id
        #: the run is not in the store (never a background response, or its events were purged)
        self.missing = False
        self.followers = 0
        self._store = store
        self._looked = asyncio.Event()  # the reader's first look at the run is done
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._read())

    async def looked(self) -> None:
        """Return once the reader has seen the run once (its events so far read, or it is missing)."""
        await self._looked.wait()

    async def _read(self) -> None:
        store, response_id = self._store, self.response_id
        try:
            while True:
                run = await store.get(response_id)  # before the events: a run ended has all of them stored
                if run is None:
                    self.missing = True
                    return
                if run.last_seq > self.last_seq:
                    batch = await store.events_after(response_id, self.last_seq)
                    if batch:
                        self.frames.extend(frame for _, frame in batch)
                        self._wake()
                        continue
                self._looked.set()
                if run.status in TERMINAL:
                    # failed without its end among the frames: expired, its holder wrote no more
                    self.lost = run.status == "failed"
                    return
                await store.wait(response_id, timeout=WAIT_SECONDS)
        except GatewayError as exc:
            log.warning("the events of background response %s could not be read: %s", response_id,
                        exc.detail or exc.message)
            self.error = exc
        finally:
            self.done = True
            self._looked.set()
            self._wake()

    def cancel(self) -> asyncio.Task[None] | None:
        """Stop the reader (its last follower left); the task, to wait for at shutdown."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
        return task


class StoreFeeds:
    """This replica's feeds, one per run followed from the store."""

    def __init__(self, store: RunStore) -> None:
        self._store = store
        self._feeds: dict[str, StoreFeed] = {}

    def attach(self, response_id: str) -> StoreFeed:
        """The run's feed, started if none is going (or the last one failed); `detach` it after."""
        feed = self._feeds.get(response_id)
        if feed is None or feed.error is not None:
            feed = self._feeds[response_id] = StoreFeed(self._store, response_id)
            feed.start()
        feed.followers += 1
        return feed

    def detach(self, feed: StoreFeed) -> None:
        """A follower left: the last one stops the reader and lets the frames go."""
        feed.followers -= 1
        if feed.followers == 0:
            if self._feeds.get(feed.response_id) is feed:
                del self._feeds[feed.response_id]
            feed.cancel()

    def __len__(self) -> int:
        return len(self._feeds)

    async def close(self) -> None:
        """At shutdown: every reader stopped (before the store closes)."""
        feeds, self._feeds = list(self._feeds.values()), {}
        tasks = [task for feed in feeds if (task := feed.cancel()) is not None]
        await asyncio.gather(*tasks, return_exceptions=True)
