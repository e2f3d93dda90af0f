"""Background responses (`background: true`): the run in an app-owned task, its end, and cancel.

The record is stored `in_progress` before the client learns the id, and replaced when the run
ends (`completed`, `incomplete`, `failed`, or `cancelled`), through the same `put` as any response
(an upsert by id; a turn of a conversation appends to it only when it completed or was
incomplete, as a foreground turn). The run holds a run slot (API_SERVER_MAX_CONCURRENT_RUNS), and
its key's slot when the key has a concurrent-runs limit, until it ends. Its run in the store
(store/runs.py: lease, cancel mark, events) lets any replica follow it (runs/follow.py) or
cancel it; runs/keeper.py keeps its lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from aiohttp import web

from gateway.agent.events import Finished
from gateway.agent.loop import AgentRequest
from gateway.common import json_out
from gateway.errors import GatewayError, InvalidRequestError
from gateway.http import appkeys
from gateway.http.auth import KeyRunSlot, hand_over_key_slot, store_of
from gateway.http.routes.responses_follow import admit, stream
from gateway.http.routes.responses_reply import Continuation, Reply, ending_on_assistant
from gateway.http.run_loop import Messages, run_timeout_error
from gateway.http.sse import named_frames
from gateway.runs.background import BACKGROUND_RUNS, BackgroundRun, EventsLimitError, run_store
from gateway.runs.keeper import LEASE_SECONDS, record_expired, watch_cancel
from gateway.store.api import ResponseStore, StoredResponse
from gateway.store.runs import TERMINAL
from gateway.upstream.routes import RouteTurn
from gateway.wire.responses_event_json import event_json
from gateway.wire.responses_output import ResponseBuilder
from gateway.wire.responses_request import ResponsesRequest

log = logging.getLogger("agent_gateway.responses")
#: `incomplete_details.reason` of a run the gateway's shutdown cut short (openai-python types the
#: field as max_output_tokens | content_filter but parses any string)
SHUTDOWN_REASON = "gateway_shutdown"
#: how long a cancel waits for the replica running the response to stop it
CANCEL_WAIT_SECONDS = 5.0


class BackgroundReply(Reply):
    """A background turn: every event recorded in its run (for any stream that follows it)."""

    def __init__(self, store: ResponseStore, parsed: ResponsesRequest, builder: ResponseBuilder,
                 continuation: Continuation, turn: RouteTurn | None, *, run: BackgroundRun) -> None:
        super().__init__(store, parsed, builder, continuation, turn)
        self.run = run

    def record(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            self.run.push(event["sequence_number"],
                          named_frames([(str(event["type"]), event_json(event))]))

    async def placeholder(self) -> None:
        """The record while it runs: the response so far, no turn to continue from yet, so a
        chained request before the end does not see a half-made turn as history."""
        builder = self.builder
        await self.store.put(StoredResponse(id=builder.id, created_at=builder.created_at,
                                            response=builder.response(), transcript=[],
                                            input_items=self.parsed.input_items))

    async def failed_without_output(self) -> None:
        """The failed response was refused (a key's stored-bytes quota, say): a poll must still
        learn that it failed, so the record says so without its output."""
        builder = self.builder
        try:
            await asyncio.shield(self.store.put(StoredResponse(
                id=builder.id, created_at=builder.created_at, response={**builder.response(), "output": []},
                transcript=[], input_items=[])))
        except GatewayError as exc:
            log.warning("the failed response %s is still stored in progress: %s", builder.id,
                        exc.detail or exc.message)

    async def stopped(self, reason: str, messages: Messages) -> None:
        """Cancelled by the client (`cancelled`) or by shutdown (`incomplete`, its
        `incomplete_details.reason` SHUTDOWN_REASON): stored as such, nothing appended to a
        conversation, no head moved."""
        builder = self.builder
        if reason == "cancel":
            builder.cancel()
        else:
            self.record(builder.interrupt(reason=SHUTDOWN_REASON))
        await asyncio.shield(self.store.put(StoredResponse(
            id=builder.id, created_at=builder.created_at, response=builder.response(),
            transcript=[*self.parsed.messages, *ending_on_assistant(messages)],
            input_items=self.parsed.input_items)))


async def start(request: web.Request, agent_request: AgentRequest, reply: BackgroundReply) -> web.StreamResponse:
    """Store the response `in_progress` and its run, start the run, and answer: the Response
    object at once, or (with `stream`) the run's events as they come."""
    app = request.app
    run = reply.run
    slot = None
    try:
        if reply.parsed.stream:  # its stream is a follower like any other: past the bounds, a 429 now
            slot = admit(request, run.response_id)
        reply.served()
        reply.record(reply.builder.start())
        await reply.placeholder()
        await run_store(app).begin(run.response_id, store_of(request).owner, replica=app[BACKGROUND_RUNS].replica,
                                   lease_seconds=LEASE_SECONDS)
    except BaseException:
        app[BACKGROUND_RUNS].forget(run)
        if slot is not None:
            slot.release()
        raise
    launch(app, agent_request, reply, hand_over_key_slot(request))
    if slot is None:
        return web.Response(body=json_out.dumps(reply.builder.response()), content_type="application/json")
    return await stream(request, run.response_id, -1, slot)


def launch(app: web.Application, agent_request: AgentRequest, reply: BackgroundReply,
           key_slot: KeyRunSlot | None) -> None:
    """Run a begun (or claimed) background response: its task holds a run slot, and its key's
    slot, until it ends."""
    limiter, registry, run = app[appkeys.LIMITER], app[BACKGROUND_RUNS], reply.run
    limiter.hold_for_background()
    run.start_flushing()
    loop = asyncio.get_running_loop()
    task = run.task = loop.create_task(_drive(app, agent_request, reply))
    watcher = loop.create_task(watch_cancel(app, run))

    def ended(_: object) -> None:
        watcher.cancel()
        registry.forget(run)
        if key_slot is not None:
            key_slot.release()
        limiter.release()  # last: it may start a queued run at once

    task.add_done_callback(ended)


async def _drive(app: web.Application, agent_request: AgentRequest, reply: BackgroundReply) -> None:
    settings = app[appkeys.SETTINGS]
    events_limit = settings.max_run_events_mb * 1_000_000
    agent_run = app[appkeys.AGENT].run(agent_request)
    run, builder = reply.run, reply.builder
    finished: Finished | None = None
    error: GatewayError | None = None
    status: str | None = None
    try:
        try:
            async with asyncio.timeout(settings.run_timeout), contextlib.aclosing(agent_run.events) as events:
                async for event in events:
                    if isinstance(event, Finished):
                        finished = event
                    reply.record(builder.feed(event))
                    if run.event_bytes > events_limit:
                        raise EventsLimitError(
                            f"The response's stream events passed API_SERVER_MAX_RUN_EVENTS_MB "
                            f"({settings.max_run_events_mb:g} MB), the most a background response keeps; "
                            "it was stopped there.", code="server_error")
        except TimeoutError:
            error = run_timeout_error(settings.run_timeout)
        except GatewayError as exc:
            error = exc
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("unexpected error in background response %s", builder.id)
            error = GatewayError("internal error; see the gateway's log", code="internal_error")
        # the lease renewed, or lost, before the end is written: a run another replica failed
        # (its lease ran out while this one was busy) is never also saved `completed` here
        if not await run.holds_lease(LEASE_SECONDS):
            log.warning("background response %s lost its lease before its end was written; the replica "
                        "that failed it writes its record", builder.id)
            return
        run.saving = True
        if error is None:
            reply.served()
            closing = builder.finish()
            try:
                await reply.save(ending_on_assistant(finished.messages if finished else agent_run.messages))
            except GatewayError as exc:  # the ending event was not sent: `fail` takes its number
                error = exc
                reply.record(closing[:-1])
            else:
                reply.record(closing)
        if error is not None:
            log.warning("background response %s failed: %s", builder.id, error.detail or error.message)
            code = {429: "rate_limit_exceeded", 409: error.code}.get(error.status) or "server_error"
            closing = builder.fail(error.message, code)
            try:
                await reply.save(agent_run.messages)
            except GatewayError as exc:
                log.warning("the failed response %s was not stored: %s", builder.id, exc.detail or exc.message)
                await reply.failed_without_output()
            reply.record(closing)
        status = builder.status
    except asyncio.CancelledError:
        if run.lost:  # another replica failed it: nothing more of it is ours to write
            log.info("background response %s stopped: its lease was lost", builder.id)
        elif not run.saving:  # the upstream call is abandoned with the task; record how it ended
            run.saving = True
            log.info("background response %s stopped (%s)", builder.id, run.stop_reason)
            try:
                await reply.stopped(run.stop_reason, agent_run.messages)
            except GatewayError as exc:
                log.warning("the stopped response %s was not stored: %s", builder.id, exc.detail or exc.message)
            status = builder.status
    finally:
        await run.close(status)


async def cancel(request: web.Request, record: StoredResponse) -> web.Response:
    """POST /v1/responses/{id}/cancel for the caller's record `record`: on the replica running it,
    its task is stopped here; elsewhere the store carries the request to its holder, and the
    answer waits (CANCEL_WAIT_SECONDS at most) for the run to end."""
    if not record.response.get("background"):
        raise InvalidRequestError("Only responses created with 'background': true can be cancelled.",
                                  param="response_id")
    response = record.response
    if response.get("status") not in TERMINAL:
        await stop(request, record)
        stored = await store_of(request).get(record.id, touch=False)
        response = stored.response if stored is not None else response
    return web.Response(body=json_out.dumps(response), content_type="application/json", charset="utf-8")


async def stop(request: web.Request, record: StoredResponse) -> None:
    """Cancel the background response `record` if it is still queued or running, wherever it
    runs, and return once it has ended (its end recorded), or once CANCEL_WAIT_SECONDS passed.
    DELETE calls this first, so that a deleted response neither runs on nor is written back."""
    if not record.response.get("background") or record.response.get("status") in TERMINAL:
        return
    local = request.app[BACKGROUND_RUNS].get(record.id)
    if local is not None and local.task is not None and not local.task.done():
        local.stop("cancel")
        await asyncio.wait([local.task])  # it records how it ended
    else:
        await _cancel_elsewhere(request, record)


async def _cancel_elsewhere(request: web.Request, record: StoredResponse) -> None:
    app = request.app
    store = run_store(app)
    run = await store.request_cancel(record.id)
    deadline = time.monotonic() + CANCEL_WAIT_SECONDS
    while run is not None and run.status not in TERMINAL and (left := deadline - time.monotonic()) > 0:
        await store.wait(record.id, timeout=min(left, 1.0))
        run = await store.get(record.id)
    if run is not None and run.status not in TERMINAL:  # its holder may be dead, its lease run out
        await record_expired(app, await store.expire())
        run = await store.get(record.id)
    if run is None or run.status == "cancelled":
        # a queued run cancelled before it started (or a run no longer in the store): nobody else
        # writes its record
        current = await store_of(request).get(record.id, touch=False)
        if current is not None and current.response.get("status") not in TERMINAL:
            await store_of(request).put(StoredResponse(
                id=current.id, created_at=current.created_at, response={**current.response, "status": "cancelled"},
                transcript=current.transcript, input_items=current.input_items))
