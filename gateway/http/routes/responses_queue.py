"""Queued background responses: a background create that finds every run slot busy waits in the
store (`queued`, up to API_SERVER_MAX_QUEUED_RUNS across replicas, then 429), and the first
replica with a free slot claims it (store/runs.py `claim`: once, whichever replicas ask) and
starts it then, as the key that created it.

What a queued run keeps is its request body and the name of the key that sent it (never the key
itself): the replica that claims it parses the body again and resolves its model,
previous_response_id or conversation at that moment; a failure then (the previous response
deleted meanwhile, the key revoked) makes the response `failed`, saying why.

A replica claims whenever one of its run slots frees and whenever a run is queued anywhere
(`wait_queued`, bounded by QUEUE_LOOK_SECONDS); a draining one (SIGTERM) claims nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from gateway.common import json_out
from gateway.errors import GatewayError, RateLimitError
from gateway.http import appkeys
from gateway.http.auth import KeyRunSlot, store_for, store_of
from gateway.http.background import BACKGROUND_RUNS, BackgroundRuns, run_store
from gateway.http.keyring import CURRENT_CALLER
from gateway.http.routes.responses_background import BackgroundReply, launch
from gateway.http.routes.responses_reply import named
from gateway.http.routes.responses_turn import prepare_turn
from gateway.http.run_follow import from_store, stream
from gateway.http.run_keeper import LEASE_SECONDS, RunKeeper
from gateway.store.api import StoredResponse
from gateway.store.runs import QUEUED, QueueFullError, Run
from gateway.wire.responses_output import ResponseBuilder
from gateway.wire.responses_request import ResponsesRequest, parse_responses_request

log = logging.getLogger("agent_gateway.background")

#: a replica looks at the queue at least this often (a slot freed by another replica's request,
#: a notification lost with a dropped connection)
QUEUE_LOOK_SECONDS = 5.0


async def enqueue(request: web.Request, body: dict[str, Any], parsed: ResponsesRequest) -> web.StreamResponse:
    """Store the response `queued` with what it starts from, and answer at once: the Response
    object, or (with `stream`) its events from when a replica starts it."""
    app = request.app
    settings = app[appkeys.SETTINGS]
    caller = CURRENT_CALLER.get() or app[appkeys.KEYRING].default
    store = store_of(request)
    builder = ResponseBuilder(parsed, model=parsed.model or settings.model_name, events=True)
    builder.status = QUEUED
    await store.put(StoredResponse(id=builder.id, created_at=builder.created_at, response=builder.response(),
                                   transcript=[], input_items=parsed.input_items))
    runs = run_store(app)
    try:
        await runs.enqueue(builder.id, store.owner, json_out.dumps({"body": body, "key": caller.name}),
                           max_queued=settings.max_queued_runs)
    except QueueFullError:
        await store.delete(builder.id)
        raise RateLimitError(f"Every run slot is busy and {settings.max_queued_runs} background responses are "
                             "queued already (API_SERVER_MAX_QUEUED_RUNS); retry shortly.", retry_after=1) from None
    log.info("background response %s queued: every run slot is busy", builder.id)
    if not parsed.stream:
        return web.Response(body=json_out.dumps(builder.response()), content_type="application/json")
    idle = settings.keepalive_interval
    return await stream(request, builder.id, from_store(runs, builder.id, -1, idle=idle))


class Claimer:
    """This replica's taking of queued runs while it has a free slot."""

    def __init__(self, app: web.Application, runs: BackgroundRuns) -> None:
        self.app, self.runs = app, runs
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        #: a run may be queued (cleared when a claim finds none; set by every `wait_queued`
        #: wake-up): a freed slot costs a claim only then, not a store round trip per request
        self.maybe_queued = True

    def start(self) -> None:
        self._spawn(self._loop())
        self.app[appkeys.LIMITER].on_release = self.slot_freed

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def slot_freed(self) -> None:
        if self.maybe_queued and not self.runs.draining and not self._lock.locked():
            self._spawn(self.claim_while_free())

    async def stop(self) -> None:
        self.app[appkeys.LIMITER].on_release = None
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        store = run_store(self.app)
        while True:
            await self.claim_while_free()
            try:
                await store.wait_queued(QUEUE_LOOK_SECONDS)
            except GatewayError:
                await asyncio.sleep(QUEUE_LOOK_SECONDS)
            self.maybe_queued = True

    async def claim_while_free(self) -> None:
        limiter, store = self.app[appkeys.LIMITER], run_store(self.app)
        async with self._lock:
            while not self.runs.draining and limiter.active < limiter.limit:
                try:
                    run = await store.claim(replica=self.runs.replica, lease_seconds=LEASE_SECONDS)
                except GatewayError as exc:
                    log.warning("claiming a queued background response failed: %s", exc.detail or exc.message)
                    return
                if run is None:
                    self.maybe_queued = False
                    return
                await self._start(run)

    async def _start(self, run: Run) -> None:
        """Start a claimed run as the key that queued it; a failure to start makes it `failed`."""
        app = self.app
        parsed: ResponsesRequest | None = None
        created_at: int | None = None
        try:
            queued = json.loads(run.request)
            caller = app[appkeys.KEYRING].by_name(queued["key"])
            if caller is None:
                raise GatewayError("The API key that created this background response is no longer valid; it "
                                   "was not started.", code="invalid_api_key")
            CURRENT_CALLER.set(caller)  # the run's task copies this context: it acts as its key
            store = store_for(app, caller)
            record = await store.get(run.response_id, touch=False)
            created_at = record.created_at if record is not None else None
            sealer = app[appkeys.REASONING_SEALER]
            parsed = parse_responses_request(queued["body"], sealer.open)
            prepared = await prepare_turn(app, store, parsed)
            builder = ResponseBuilder(parsed, model=prepared.model, response_id=run.response_id,
                                      created_at=created_at, events=True, reasoning=prepared.reasoning,
                                      seal=sealer.seal)
            local = self.runs.register(run.response_id, run_store(app))
            reply = BackgroundReply(store, parsed, builder, prepared.continuation, prepared.turn, run=local)
            try:
                reply.served()
                reply.record(builder.start())
                await reply.placeholder()
            except BaseException:
                self.runs.forget(local)
                raise
        except GatewayError as exc:
            await self._failed_to_start(run, parsed, created_at, exc)
            return
        log.info("background response %s started from the queue", run.response_id)
        ring = app[appkeys.KEYRING]
        key_slot = None
        if caller.max_concurrent is not None:  # counted as its key's run (it was admitted when queued)
            ring.enter_run(caller)
            key_slot = KeyRunSlot(lambda: ring.leave_run(caller))
        launch(app, prepared.agent_request, reply, key_slot)

    async def _failed_to_start(self, run: Run, parsed: ResponsesRequest | None, created_at: int | None,
                               error: GatewayError) -> None:
        log.warning("queued background response %s could not start: %s", run.response_id,
                    error.detail or error.message)
        app, runs = self.app, run_store(self.app)
        store = app[appkeys.STORE]
        try:
            if parsed is not None:  # a follower's stream says so too
                builder = ResponseBuilder(parsed, model=parsed.model or app[appkeys.SETTINGS].model_name,
                                          response_id=run.response_id, created_at=created_at, events=True)
                events = [*builder.start(), *builder.fail(error.message, error.code or "server_error")]
                await runs.append_events(run.response_id, 0, [named([event]) for event in events],
                                         replica=self.runs.replica)
            record = await store.get(run.response_id, touch=False)
            if record is not None:
                response = {**record.response, "status": "failed",
                            "error": {"code": error.code or "server_error", "message": error.message}}
                await store.put(StoredResponse(id=record.id, created_at=record.created_at, response=response,
                                               transcript=[], input_items=record.input_items, owner=record.owner))
            await runs.finish(run.response_id, "failed", replica=self.runs.replica)
        except GatewayError as exc:
            log.warning("the failed response %s was not stored: %s", run.response_id, exc.detail or exc.message)


async def background_runs_ctx(app: web.Application) -> AsyncIterator[None]:
    """cleanup_ctx: the runs, their upkeep and the queue's claims for the app's life; the runs
    stopped before the store closes (so append this after the store's context)."""
    runs = app[BACKGROUND_RUNS] = BackgroundRuns()
    keeper, claimer = RunKeeper(app, runs), Claimer(app, runs)
    keeper.start()
    claimer.start()
    yield
    runs.draining = True
    await claimer.stop()
    await runs.stop_all()
    await keeper.stop()
