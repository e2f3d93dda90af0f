"""Every replica's upkeep of background runs: its leases, cancels asked on other replicas, and the
runs whose replica died.

- **Leases.** One `renew` every RENEW_SECONDS for all the runs this replica holds (a lease lasts
  LEASE_SECONDS, so two renewals may fail before it runs out). A run missing from renew's answer
  was lost (another replica expired it): it is stopped without writing anything more.
- **Cancels from elsewhere.** A task per run waits on the run's changes (`RunStore.wait`) and, at
  most twice a second, reads whether a cancel was asked; renew's answer says it too.
- **Dead replicas.** Every SWEEP_SECONDS, `expire` marks the runs whose lease ran out `failed`,
  and this replica writes their response records `failed` with an error saying the gateway that
  ran them stopped (never re-run: their searches were paid for). A kill -9 is so marked within
  LEASE_SECONDS + SWEEP_SECONDS. Ended runs' events go after KEEP_SECONDS (`purge_finished`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Coroutine
from typing import Any

from aiohttp import web

from gateway.errors import GatewayError
from gateway.runs.background import BACKGROUND_RUNS, KEEP_SECONDS, BackgroundRun, BackgroundRuns, run_store
from gateway.runs.frames import LOST_MESSAGE
from gateway.store.runs import TERMINAL, Run

log = logging.getLogger("agent_gateway.background")

LEASE_SECONDS = 10.0
RENEW_SECONDS = 3.0
SWEEP_SECONDS = 5.0
PURGE_SECONDS = 60.0
#: a run's cancel mark is read at most this often, however many events wake its watcher
CANCEL_CHECK_SECONDS = 0.5


async def record_expired(app: web.Application, expired: list[Run]) -> None:
    """Write each expired run's response record `failed`, saying why (nothing appended to any
    conversation: only the record's status and error change)."""
    store = app[BACKGROUND_RUNS].store
    for run in expired:
        log.warning("background response %s failed: the replica running it (%s) stopped renewing its lease",
                    run.response_id, run.replica or "?")
        try:
            record = await store.get(run.response_id, touch=False)
            if record is None or record.response.get("status") in TERMINAL:
                continue
            response = {**record.response, "status": "failed",
                        "error": {"code": "server_error", "message": LOST_MESSAGE}}
            await store.put(dataclasses.replace(record, response=response, expected_head=None))
        except GatewayError as exc:
            log.warning("the failed response %s was not stored: %s", run.response_id, exc.detail or exc.message)


class RunKeeper:
    """The periodic tasks of one replica (started and stopped with the app)."""

    def __init__(self, app: web.Application, runs: BackgroundRuns) -> None:
        self.app, self.runs = app, runs
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._spawn(self._renew_loop())
        self._spawn(self._sweep_loop())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(work))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _renew_loop(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time() + RENEW_SECONDS
        while True:
            # on a fixed beat (a slow renew does not push the next one back), and never ended by a
            # surprise: this loop dying silently would lose every run this replica holds
            await asyncio.sleep(max(0.0, due - loop.time()))
            late = loop.time() - due
            due = max(due + RENEW_SECONDS, loop.time() + RENEW_SECONDS / 2)
            if late > RENEW_SECONDS:
                log.warning("the event loop was blocked: leases renewed %.1f s late (a lease lasts %g s)",
                            late, LEASE_SECONDS)
            try:
                await self._renew()
            except Exception:
                log.exception("renewing the background runs' leases failed")

    async def _renew(self) -> None:
        held = [run for run in self.runs.running() if not run.done]
        if not held:
            return
        try:
            answer = await run_store(self.app).renew(self.runs.replica, [run.response_id for run in held],
                                                     lease_seconds=LEASE_SECONDS)
        except GatewayError as exc:
            log.warning("renewing the leases of %d background run(s) failed: %s", len(held),
                        exc.detail or exc.message)
            return
        for run in held:
            if run.response_id not in answer:
                if not run.done:
                    log.warning("background response %s was lost (its lease expired); stopping it",
                                run.response_id)
                    run.stop("lost")
            elif answer[run.response_id]:
                run.stop("cancel")

    async def _sweep_loop(self) -> None:
        store = run_store(self.app)
        since_purge = 0.0
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            try:
                await record_expired(self.app, await store.expire())
                since_purge += SWEEP_SECONDS
                if since_purge >= PURGE_SECONDS:
                    since_purge = 0.0
                    if purged := await store.purge_finished(KEEP_SECONDS):
                        log.info("dropped the events of %d ended background run(s)", purged)
            except GatewayError as exc:
                log.warning("the background runs' sweep failed: %s", exc.detail or exc.message)


async def watch_cancel(app: web.Application, run: BackgroundRun) -> None:
    """Until `run` ends: stop it when a cancel is asked for it (on any replica)."""
    store = run_store(app)
    while not run.done:
        try:
            await store.wait(run.response_id, timeout=RENEW_SECONDS)
            current = await store.get(run.response_id)
        except GatewayError:
            await asyncio.sleep(RENEW_SECONDS)  # renew tells it too
            continue
        if current is not None and current.cancel_requested:
            run.stop("cancel")
            return
        await asyncio.sleep(CANCEL_CHECK_SECONDS)
