"""Background responses (`background: true`): the run in an app-owned task, cancel, resumed streams.

The record is stored `in_progress` before the client learns the id, and replaced when the run
ends (`completed`, `incomplete`, `failed`, or `cancelled`), through the same `put` as any response
(an upsert by id; a turn of a conversation appends to it only when it completed or was
incomplete, as a foreground turn). The run holds a run slot (API_SERVER_MAX_CONCURRENT_RUNS) until
it ends. Its events live in this process (http/background.py): a stream, at creation or resumed,
follows them; the client leaving ends only its stream, never the run.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web

from gateway.agent.events import Finished
from gateway.agent.loop import AgentRequest
from gateway.common import json_out
from gateway.errors import GatewayError, InvalidRequestError
from gateway.http import appkeys
from gateway.http.auth import store_of
from gateway.http.background import BACKGROUND_RUNS, BackgroundRun
from gateway.http.routes.responses_reply import Continuation, Reply, ending_on_assistant
from gateway.http.runs import Messages, run_timeout_error
from gateway.http.sse import KEEPALIVE_FRAME, SSEWriter, named_frames
from gateway.store.api import ResponseStore, StoredResponse
from gateway.upstream.routes import RouteTurn
from gateway.wire.responses_output import ResponseBuilder, event_json
from gateway.wire.responses_request import ResponsesRequest

log = logging.getLogger("agent_gateway.responses")
TERMINAL = frozenset({"completed", "incomplete", "failed", "cancelled"})


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
        """Cancelled by the client (`cancelled`) or by shutdown (`incomplete`): stored as such,
        nothing appended to a conversation, no head moved."""
        builder = self.builder
        if reason == "cancel":
            builder.cancel()
        else:
            self.record(builder.interrupt())
        await asyncio.shield(self.store.put(StoredResponse(
            id=builder.id, created_at=builder.created_at, response=builder.response(),
            transcript=[*self.parsed.messages, *ending_on_assistant(messages)],
            input_items=self.parsed.input_items)))


async def start(request: web.Request, agent_request: AgentRequest, reply: BackgroundReply) -> web.StreamResponse:
    """Store the response `in_progress`, start its run, and answer: the Response object at once,
    or (with `stream`) the run's events as they come."""
    app = request.app
    reply.served()
    reply.record(reply.builder.start())
    await reply.placeholder()
    # the run's own slot: the request's is released when this handler returns
    limiter = app[appkeys.LIMITER]
    limiter.hold_for_background()
    task = asyncio.get_running_loop().create_task(_drive(app, agent_request, reply))
    reply.run.task = task
    task.add_done_callback(lambda _: limiter.release())
    if not reply.parsed.stream:
        return web.Response(body=json_out.dumps(reply.builder.response()), content_type="application/json")
    return await follow(request, reply.run, after=-1)


async def _drive(app: web.Application, agent_request: AgentRequest, reply: BackgroundReply) -> None:
    settings = app[appkeys.SETTINGS]
    agent_run = app[appkeys.AGENT].run(agent_request)
    run, builder = reply.run, reply.builder
    finished: Finished | None = None
    error: GatewayError | None = None
    try:
        try:
            async with asyncio.timeout(settings.run_timeout):
                async for event in agent_run.events:
                    if isinstance(event, Finished):
                        finished = event
                    reply.record(builder.feed(event))
        except TimeoutError:
            error = run_timeout_error(settings.run_timeout)
        except GatewayError as exc:
            error = exc
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("unexpected error in background response %s", builder.id)
            error = GatewayError("internal error; see the gateway's log", code="internal_error")
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
    except asyncio.CancelledError:
        if not run.saving:  # the upstream call is abandoned with the task; record how it ended
            log.info("background response %s stopped (%s)", builder.id, run.stop_reason)
            try:
                await reply.stopped(run.stop_reason, agent_run.messages)
            except GatewayError as exc:
                log.warning("the stopped response %s was not stored: %s", builder.id, exc.detail or exc.message)
    finally:
        run.end()


async def follow(request: web.Request, run: BackgroundRun, *, after: int) -> web.StreamResponse:
    """Stream the run's events after sequence number `after` until it ends. The client leaving
    ends this stream only."""
    sse = SSEWriter(request)
    idle = request.app[appkeys.SETTINGS].keepalive_interval
    try:
        async for frames in run.follow(after, idle=idle):
            await sse.send(frames or KEEPALIVE_FRAME)
        await sse.finish()
    except (ConnectionError, RuntimeError):
        log.info("client left the stream of background response %s; the run goes on", run.response_id)
    return sse.response


def _starting_after(request: web.Request, run: BackgroundRun) -> int:
    raw = request.query.get("starting_after")
    if raw is None:
        return -1
    try:
        after = int(raw)
    except ValueError:
        raise InvalidRequestError("'starting_after' must be an integer sequence number.",
                                  param="starting_after") from None
    if after < -1 or after >= len(run.frames):  # a client resumes after an event it was sent
        raise InvalidRequestError(f"'starting_after' {after} is beyond the last event of this response "
                                  f"({len(run.frames) - 1}).", param="starting_after")
    return after


async def resume(request: web.Request, record: StoredResponse) -> web.StreamResponse:
    """GET /v1/responses/{id}?stream=true: the events after `starting_after`, then live."""
    if not record.response.get("background"):
        raise InvalidRequestError("Only a background response can be streamed again; this one was not "
                                  "created with 'background': true.", param="stream")
    run = request.app[BACKGROUND_RUNS].get(record.id)
    if run is None:
        raise InvalidRequestError("The events of this response are no longer available (they are kept "
                                  "about 10 minutes after it ends, by the replica that ran it).",
                                  param="stream")
    return await follow(request, run, after=_starting_after(request, run))


async def cancel(request: web.Request, record: StoredResponse) -> web.Response:
    """POST /v1/responses/{id}/cancel for the caller's record `record`."""
    if not record.response.get("background"):
        raise InvalidRequestError("Only responses created with 'background': true can be cancelled.",
                                  param="response_id")
    response = record.response
    if response.get("status") not in TERMINAL:
        run = request.app[BACKGROUND_RUNS].get(record.id)
        if run is not None and run.task is not None and not run.task.done():
            if not run.saving:
                run.stop_reason = "cancel"
                run.task.cancel()
            await asyncio.wait([run.task])  # it records how it ended
            stored = await _current(request, record.id)
            response = stored.response if stored is not None else response
        elif run is None:  # not running here (a replica that died, or another one): say so in the record
            response = {**response, "status": "cancelled"}
            await store_of(request).put(StoredResponse(
                id=record.id, created_at=record.created_at, response=response, transcript=record.transcript,
                input_items=record.input_items))
    return web.Response(body=json_out.dumps(response), content_type="application/json", charset="utf-8")


async def _current(request: web.Request, response_id: str) -> StoredResponse | None:
    return await store_of(request).get(response_id, touch=False)
