"""Background runs this process holds: their tasks, their events in memory, and the batched copy
of those events in the store (store/runs.py) that any replica's follower reads.

A background response (`background: true`) runs in a task the app owns, not the request's: the
client may leave, poll with GET, follow the events with `GET ...?stream=true&starting_after=N`, or
cancel, on this replica or another. Its events go to the store in batches (every FLUSH_SECONDS or
FLUSH_FRAMES frames, and at the end), so a token stream is not one write per delta; followers on
this replica read the frames in memory, others read the store through one reader per run and
replica (runs/follow.py, runs/store_feed.py): the same sequence either way. The lease, cancels
from other replicas and expired runs are runs/keeper.py's.

Bounds: a run's events are capped by API_SERVER_MAX_RUN_EVENTS_MB (past it the run ends failed),
its followers by API_SERVER_MAX_FOLLOWERS_PER_RUN and _PER_KEY (runs/followers.py), each holding
only its place in the one copy of the frames (runs/frames.py); the frames in memory go when the
run ends (the store keeps them KEEP_SECONDS, as OpenAI keeps
background data about 10 minutes for polling).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid

from aiohttp import web

from gateway.errors import GatewayError
from gateway.runs.followers import FollowerSlots
from gateway.runs.frames import FrameLog
from gateway.runs.store_feed import StoreFeeds
from gateway.store.api import ResponseStore
from gateway.store.runs import LostRunError, RunStore

log = logging.getLogger("agent_gateway.background")

#: how long a finished run's events stay in the store for a resumed stream
KEEP_SECONDS = 600.0
#: a batch of events goes to the store this long after its first frame, or at FLUSH_FRAMES frames
FLUSH_SECONDS = 0.05
FLUSH_FRAMES = 64


def run_store(app: web.Application) -> RunStore:
    return app[BACKGROUND_RUNS].store.runs


class EventsLimitError(GatewayError):
    """A run's events passed API_SERVER_MAX_RUN_EVENTS_MB: it ends failed, saying so."""


class BackgroundRun(FrameLog):
    """One background response this process runs: its task, and its events as SSE frames indexed
    by sequence number, in memory (followed here: runs/frames.py) and (batched) in the store."""

    def __init__(self, response_id: str, *, store: RunStore, replica: str) -> None:
        super().__init__()
        self.response_id = response_id
        self.event_bytes = 0
        self.task: asyncio.Task[None] | None = None
        #: the final record is being written: a cancel now would race it, so it waits instead
        self.saving = False
        #: why the task was cancelled: "cancel" (the client's), "shutdown", or "lost" (another
        #: replica expired its lease: nothing more of it is written)
        self.stop_reason = "cancel"
        self._store, self._replica = store, replica
        self._stored = 0  # frames already in the store
        self._flush_lock = asyncio.Lock()
        self._flusher: asyncio.Task[None] | None = None

    def push(self, seq: int, frame: bytes) -> None:
        if seq != len(self.frames):  # the builder numbers events 0, 1, 2...: a gap is a bug
            raise AssertionError(f"event {seq} after {len(self.frames)} events")
        self.frames.append(frame)
        self.event_bytes += len(frame)
        self._wake()

    def stop(self, reason: str) -> None:
        """Cancel the task (unless it is writing its final record, which must not be cut)."""
        if reason == "lost":  # even while saving: its end is no longer its to write (close says so)
            self.lost = True
        if self.task is not None and not self.task.done() and not self.saving:
            self.stop_reason = reason
            self.task.cancel()

    # ---- the store's copy ---------------------------------------------------------------------

    def start_flushing(self) -> None:
        self._flusher = asyncio.get_running_loop().create_task(self._flush_loop())

    async def _flush_loop(self) -> None:
        while True:
            if self._stored == len(self.frames):
                await self._changed.wait()
            # asyncio.timeout, not wait_for: 3.11's wait_for may swallow the task's cancellation
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(FLUSH_SECONDS):
                    while len(self.frames) - self._stored < FLUSH_FRAMES:
                        await self._changed.wait()
            try:
                await self.flush()
            except LostRunError:
                log.warning("background response %s was lost (its lease expired); stopping it", self.response_id)
                self.stop("lost")
                return
            except GatewayError as exc:  # a store fault: the next batch tries again, with these frames
                log.warning("events of background response %s not stored yet: %s", self.response_id,
                            exc.detail or exc.message)
                await asyncio.sleep(FLUSH_SECONDS * 10)

    async def holds_lease(self, lease_seconds: float) -> bool:
        """Renew this run's lease now and say whether this replica still holds it: the holder asks
        before writing the run's end, so that it never writes `completed` over a run another
        replica failed (a store fault: True, the end's own writes will tell)."""
        if self.lost:
            return False
        try:
            held = self.response_id in await self._store.renew(self._replica, [self.response_id],
                                                               lease_seconds=lease_seconds)
        except GatewayError:
            return True
        self.lost = self.lost or not held
        return held

    async def flush(self) -> None:
        """Store every frame not stored yet (LostRunError: this replica no longer holds the run)."""
        async with self._flush_lock:
            while batch := self.frames[self._stored:]:
                try:
                    await self._store.append_events(self.response_id, self._stored, batch, replica=self._replica)
                except ValueError:
                    # the store holds more of them than counted: a batch it took whose answer was
                    # lost (a connection dropped after the commit); go on from where it is
                    run = await self._store.get(self.response_id)
                    if run is None or not self._stored < run.last_seq + 1 <= len(self.frames):
                        raise
                    self._stored = run.last_seq + 1
                    continue
                self._stored += len(batch)

    async def close(self, status: str | None) -> None:
        """The run ended: the last frames stored, then the run `finish`ed with `status` (None: lost,
        nothing more written), and the followers here told."""
        try:
            if self._flusher is not None:
                # never cancelled mid-append: a batch the store took but whose count the flusher had
                # not added yet would be sent again from the old count, refused as misnumbered, and
                # the run never finished (its lease then ran out: `failed`, its response `completed`)
                async with self._flush_lock:
                    self._flusher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._flusher
            if status is not None:
                await asyncio.shield(self.flush())
                await asyncio.shield(self._store.finish(self.response_id, status, replica=self._replica))
        except LostRunError:
            self.lost = True
            log.error("background response %s ended %s after its lease was lost (the other replica "
                      "failed it meanwhile)", self.response_id, status)
        except GatewayError as exc:
            log.warning("the end of background response %s was not stored: %s", self.response_id,
                        exc.detail or exc.message)
        finally:
            self.done = True
            self._wake()


def replica_name() -> str:
    """Unique per process, readable in the database: host, pid and a random part (pids repeat)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class BackgroundRuns:
    """The background runs this process holds, by response id (only while they run)."""

    def __init__(self, store: ResponseStore, replica: str | None = None) -> None:
        #: the app's store: the runs' own records (`store.runs`) and the responses they end in
        self.store = store
        self.replica = replica or replica_name()
        #: the followers' bounds, and the store's readers for the runs other replicas hold
        self.followers = FollowerSlots()
        self.feeds = StoreFeeds(store.runs)
        #: SIGTERM: no new run is claimed from the queue
        self.draining = False
        self._runs: dict[str, BackgroundRun] = {}
        self._idle = asyncio.Event()
        self._idle.set()

    def get(self, response_id: str) -> BackgroundRun | None:
        return self._runs.get(response_id)

    def running(self) -> list[BackgroundRun]:
        return list(self._runs.values())

    def register(self, response_id: str, store: RunStore) -> BackgroundRun:
        run = self._runs[response_id] = BackgroundRun(response_id, store=store, replica=self.replica)
        self._idle.clear()
        return run

    def forget(self, run: BackgroundRun) -> None:
        if self._runs.get(run.response_id) is run:
            del self._runs[run.response_id]
        if not self._runs:
            self._idle.set()

    async def wait_all(self, timeout: float) -> bool:
        """SIGTERM's grace: wait up to `timeout` seconds for every run to end; True if all did."""
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    async def stop_all(self) -> None:
        """At shutdown: cancel the runs still going and wait for each to record how it ended;
        stop the store's readers."""
        await self.feeds.close()
        tasks = []
        for run in self._runs.values():
            if run.task is not None and not run.task.done():
                run.stop("shutdown")
                tasks.append(run.task)
        if tasks:
            log.info("shutdown: stopping %d background run(s)", len(tasks))
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*tasks, return_exceptions=True)


BACKGROUND_RUNS = web.AppKey("background_runs", BackgroundRuns)
