"""Background runs of this process: their tasks and their events, for resumed streams and cancel.

A background response (`background: true`) runs in a task the app owns, not the request's: the
client may leave, poll with GET, follow the events with `GET ...?stream=true&starting_after=N`, or
cancel. The record in the store says the status to any replica; the events and the task live
here, in the process that runs it (events are not shared across replicas: a resumed stream must
reach the replica that runs the response).

Bounds: a run's events are its own output (bounded by AGENT_RUN_TIMEOUT and the model's limits);
a finished run's events are kept `KEEP_SECONDS` (OpenAI keeps background data about 10 minutes
for polling), then dropped at the next registration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable

from aiohttp import web

log = logging.getLogger("agent_gateway.background")

#: how long a finished run's events stay for a resumed stream
KEEP_SECONDS = 600.0


class BackgroundRun:
    """One background response's task and its events, as SSE frames indexed by sequence number."""

    def __init__(self, response_id: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.response_id = response_id
        self.frames: list[bytes] = []
        self.task: asyncio.Task[None] | None = None
        #: the final record is being written: a cancel now would race it, so it waits instead
        self.saving = False
        #: why the task was cancelled: "cancel" (the client's) or "shutdown"
        self.stop_reason = "cancel"
        self.ended_at: float | None = None
        self._clock = clock
        self._changed = asyncio.Event()

    @property
    def done(self) -> bool:
        return self.ended_at is not None

    def push(self, seq: int, frame: bytes) -> None:
        if seq != len(self.frames):  # the builder numbers events 0, 1, 2...: a gap is a bug
            raise AssertionError(f"event {seq} after {len(self.frames)} events")
        self.frames.append(frame)
        self._wake()

    def end(self) -> None:
        if self.ended_at is None:
            self.ended_at = self._clock()
            self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def follow(self, after: int, *, idle: float) -> AsyncIterator[bytes]:
        """The frames after sequence number `after`, then each new one until the run ends;
        `b""` after `idle` seconds without one (the caller's keepalive cue)."""
        index = after + 1
        while True:
            changed = self._changed
            if index < len(self.frames):
                batch, index = self.frames[index:], len(self.frames)
                yield b"".join(batch)
            elif self.done:
                return
            else:
                try:
                    await asyncio.wait_for(changed.wait(), timeout=idle)
                except TimeoutError:
                    yield b""


class BackgroundRuns:
    """The process's background runs by response id."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._runs: dict[str, BackgroundRun] = {}
        self._clock = clock

    def get(self, response_id: str) -> BackgroundRun | None:
        return self._runs.get(response_id)

    def register(self, response_id: str) -> BackgroundRun:
        self._forget_old()
        run = self._runs[response_id] = BackgroundRun(response_id, clock=self._clock)
        return run

    def _forget_old(self) -> None:
        now = self._clock()
        for response_id in [rid for rid, run in self._runs.items()
                            if run.ended_at is not None and now - run.ended_at > KEEP_SECONDS]:
            del self._runs[response_id]

    async def stop_all(self) -> None:
        """At shutdown: cancel the runs still going and wait for each to record how it ended."""
        tasks = []
        for run in self._runs.values():
            if run.task is not None and not run.task.done():
                run.stop_reason = "shutdown"
                run.task.cancel()
                tasks.append(run.task)
        if tasks:
            log.info("shutdown: stopping %d background run(s)", len(tasks))
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*tasks, return_exceptions=True)


BACKGROUND_RUNS = web.AppKey("background_runs", BackgroundRuns)


async def background_runs_ctx(app: web.Application) -> AsyncIterator[None]:
    """cleanup_ctx: the registry for the app's life; its runs stopped before the store closes
    (so append this after the store's context)."""
    runs = app[BACKGROUND_RUNS] = BackgroundRuns()
    yield
    await runs.stop_all()
