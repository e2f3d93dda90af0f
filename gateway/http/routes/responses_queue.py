"""Queued background responses: a background create that finds every run slot busy waits in the
store (`queued`, up to API_SERVER_MAX_QUEUED_RUNS across replicas, then 429), and the first
replica with a free slot claims it (store/runs.py `claim`: once, whichever replicas ask) and
starts it then, as the key that created it.

What a queued run keeps is its request body and the name of the key that sent it (never the key
itself): the replica that claims it parses the body again and resolves its model,
previous_response_id or conversation at that moment; a failure then (the previous response
deleted meanwhile, the key revoked) makes the response `failed`, saying why.

The claims themselves (when, how many, the slots they take) are gateway/runs/queue.py's; this
module enqueues a request and starts a run a claim hands it.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from gateway.common import json_out
from gateway.errors import GatewayError, RateLimitError
from gateway.http import appkeys
from gateway.http.auth import KeyRunSlot, store_for, store_of
from gateway.http.key_limits import claimed_limits
from gateway.http.routes.responses_background import BackgroundReply, launch
from gateway.http.routes.responses_follow import admit, stream
from gateway.http.routes.responses_reply import named
from gateway.http.routes.responses_turn import prepare_turn
from gateway.keys.ring import CURRENT_CALLER
from gateway.runs.background import BACKGROUND_RUNS, BackgroundRuns, run_store
from gateway.runs.keeper import RunKeeper
from gateway.runs.queue import Claimer
from gateway.store.api import StoredResponse
from gateway.store.runs import QUEUED, OwnerQueueFullError, QueueFullError, Run
from gateway.wire.responses_output import ResponseBuilder
from gateway.wire.responses_request import ResponsesRequest, parse_responses_request

log = logging.getLogger("agent_gateway.background")


async def enqueue(request: web.Request, body: dict[str, Any], parsed: ResponsesRequest) -> web.StreamResponse:
    """Store the response `queued` with what it starts from, and answer at once: the Response
    object, or (with `stream`) its events from when a replica starts it."""
    builder = ResponseBuilder(parsed, model=parsed.model or request.app[appkeys.SETTINGS].model_name, events=True)
    builder.status = QUEUED
    slot = admit(request, builder.id) if parsed.stream else None  # a 429 before anything is stored
    try:
        await _store_queued(request, body, builder, parsed)
    except BaseException:
        if slot is not None:
            slot.release()
        raise
    log.info("background response %s queued: every run slot is busy", builder.id)
    if slot is None:
        return web.Response(body=json_out.dumps(builder.response()), content_type="application/json")
    return await stream(request, builder.id, -1, slot)


async def _store_queued(request: web.Request, body: dict[str, Any], builder: ResponseBuilder,
                        parsed: ResponsesRequest) -> None:
    app = request.app
    settings = app[appkeys.SETTINGS]
    caller = CURRENT_CALLER.get() or app[appkeys.KEYRING].default
    store = store_of(request)
    await store.put(StoredResponse(id=builder.id, created_at=builder.created_at, response=builder.response(),
                                   transcript=[], input_items=parsed.input_items))
    runs = run_store(app)
    share = app[appkeys.KEYRING].queue_share(settings.max_queued_runs)
    try:
        await runs.enqueue(builder.id, store.owner, json_out.dumps({"body": body, "key": caller.name}),
                           max_queued=settings.max_queued_runs, max_per_owner=share)
    except QueueFullError as exc:
        await store.delete(builder.id)
        if isinstance(exc, OwnerQueueFullError):
            raise RateLimitError(f"Every run slot is busy and key '{caller.name}' has {share} background responses "
                                 "queued already, its share of the queue (API_SERVER_MAX_QUEUED_RUNS divided "
                                 "among the keys); retry shortly.", retry_after=1) from None
        raise RateLimitError(f"Every run slot is busy and {settings.max_queued_runs} background responses are "
                             "queued already (API_SERVER_MAX_QUEUED_RUNS); retry shortly.", retry_after=1) from None


async def start_claimed(app: web.Application, runs: BackgroundRuns, run: Run) -> None:
    """Start a claimed run as the key that queued it; a failure to start makes it `failed`."""
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
        local = runs.register(run.response_id, run_store(app))
        reply = BackgroundReply(store, parsed, builder, prepared.continuation, prepared.turn, run=local)
        try:
            reply.served()
            reply.record(builder.start())
            await reply.placeholder()
        except BaseException:
            runs.forget(local)
            raise
    except GatewayError as exc:
        await _failed_to_start(app, runs, run, parsed, created_at, exc)
        return
    log.info("background response %s started from the queue", run.response_id)
    ring = app[appkeys.KEYRING]
    key_slot = None
    if caller.max_concurrent is not None:  # the key's slot: the claim skipped its runs while it had none
        if not ring.enter_run(caller):
            log.info("background response %s started as key %s's run over its limit (a request took the "
                     "slot while it was claimed)", run.response_id, caller.name)
            ring.take_run(caller)
        key_slot = KeyRunSlot(lambda: ring.leave_run(caller))
    if caller.limited and (ring.limits.shared is not None or caller.token_limited):
        key_slot = await claimed_limits(ring.limits, caller, key_slot)
    launch(app, prepared.agent_request, reply, key_slot)


async def _failed_to_start(app: web.Application, runs: BackgroundRuns, run: Run, parsed: ResponsesRequest | None,
                       created_at: int | None, error: GatewayError) -> None:
    log.warning("queued background response %s could not start: %s", run.response_id,
                error.detail or error.message)
    run_records = runs.store.runs
    store = app[appkeys.STORE]
    try:
        if parsed is not None:  # a follower's stream says so too
            builder = ResponseBuilder(parsed, model=parsed.model or app[appkeys.SETTINGS].model_name,
                                      response_id=run.response_id, created_at=created_at, events=True)
            events = [*builder.start(), *builder.fail(error.message, error.code or "server_error")]
            await run_records.append_events(run.response_id, 0, [named([event]) for event in events],
                                            replica=runs.replica)
        record = await store.get(run.response_id, touch=False)
        if record is not None:
            response = {**record.response, "status": "failed",
                        "error": {"code": error.code or "server_error", "message": error.message}}
            await store.put(StoredResponse(id=record.id, created_at=record.created_at, response=response,
                                           transcript=[], input_items=record.input_items, owner=record.owner))
        await run_records.finish(run.response_id, "failed", replica=runs.replica)
    except GatewayError as exc:
        log.warning("the failed response %s was not stored: %s", run.response_id, exc.detail or exc.message)


async def background_runs_ctx(app: web.Application) -> AsyncIterator[None]:
    """cleanup_ctx: the runs, their upkeep and the queue's claims for the app's life; the runs
    stopped before the store closes (so append this after the store's context)."""
    runs = app[BACKGROUND_RUNS] = BackgroundRuns(app[appkeys.STORE])
    keeper = RunKeeper(app, runs)
    claimer = Claimer(runs, app[appkeys.LIMITER], functools.partial(start_claimed, app, runs),
                      app[appkeys.KEYRING].full_owners)
    keeper.start()
    claimer.start()
    app[appkeys.KEYRING].on_run_left = claimer.key_freed
    yield
    runs.draining = True
    app[appkeys.KEYRING].on_run_left = None
    await claimer.stop()
    await runs.stop_all()
    await keeper.stop()
