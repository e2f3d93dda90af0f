"""Queued background responses: a background create that finds every run slot busy waits in the
store (`queued`, up to API_SERVER_MAX_QUEUED_RUNS across replicas, then 429), and the first
replica with a free slot claims it (store/runs.py `claim`: once, whichever replicas ask) and
starts it then (gateway/http/routes/responses_queue.py: as the key that created it).

A replica claims whenever one of its run slots frees and whenever a run is queued anywhere
(`wait_queued`, bounded by QUEUE_LOOK_SECONDS); a draining one (SIGTERM) claims nothing.

A claim needs the run's key slot too (`--max-concurrent`, per replica): the owners whose keys have
none free here are skipped by the claim, so their runs stay queued (for this replica once one of
their runs ends, or for another replica) while the runs of other keys behind them start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from gateway.errors import GatewayError
from gateway.runs.background import BackgroundRuns
from gateway.runs.keeper import LEASE_SECONDS
from gateway.store.runs import Run

log = logging.getLogger("agent_gateway.background")

#: a replica looks at the queue at least this often (a slot freed by another replica's request,
#: a notification lost with a dropped connection)
QUEUE_LOOK_SECONDS = 5.0


class SlotLimiter(Protocol):
    """The run slots a claim needs (the front door's RunLimiter): taken while `active < limit`,
    `on_release` called whenever one frees."""

    limit: int
    active: int
    on_release: Callable[[], None] | None


class Claimer:
    """This replica's taking of queued runs while it has a free slot."""

    def __init__(self, runs: BackgroundRuns, limiter: SlotLimiter, start: Callable[[Run], Awaitable[None]],
                 full_owners: Callable[[], Sequence[str]] = tuple) -> None:
        #: `start(run)` starts a claimed run (the front door's part: it parses, resolves and launches
        #: it, or records why it could not start); `full_owners()`: whose runs must stay queued now
        self.runs, self.limiter, self._start, self._full_owners = runs, limiter, start, full_owners
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        #: a run may be queued (cleared when a claim finds none; set by every `wait_queued`
        #: wake-up): a freed slot costs a claim only then, not a store round trip per request
        self.maybe_queued = True
        #: the owners the last claim that found nothing skipped (their keys were full): one of
        #: their runs may still wait, so a slot of theirs freeing is a cue to claim (`key_freed`)
        self._skipped: frozenset[str] = frozenset()

    def start(self) -> None:
        self._spawn(self._loop())
        self.limiter.on_release = self.slot_freed

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def key_freed(self, owner: str) -> None:
        """A key's run ended on this replica: if the last claim skipped its runs, look again."""
        if owner in self._skipped:
            self._skipped = frozenset()
            self.maybe_queued = True
            self.slot_freed()

    def slot_freed(self) -> None:
        if self.maybe_queued and not self.runs.draining and not self._lock.locked():
            self._spawn(self.claim_while_free())

    async def stop(self) -> None:
        self.limiter.on_release = None
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        store = self.runs.store.runs
        while True:
            await self.claim_while_free()
            try:
                await store.wait_queued(QUEUE_LOOK_SECONDS)
            except GatewayError:
                await asyncio.sleep(QUEUE_LOOK_SECONDS)
            self.maybe_queued = True

    async def claim_while_free(self) -> None:
        limiter, store = self.limiter, self.runs.store.runs
        async with self._lock:
            while not self.runs.draining and limiter.active < limiter.limit:
                skipped = self._full_owners()
                try:
                    run = await store.claim(replica=self.runs.replica, lease_seconds=LEASE_SECONDS,
                                            skip_owners=skipped)
                except GatewayError as exc:
                    log.warning("claiming a queued background response failed: %s", exc.detail or exc.message)
                    return
                if run is None:
                    self.maybe_queued = False
                    self._skipped = frozenset(skipped)
                    return
                await self._start(run)
