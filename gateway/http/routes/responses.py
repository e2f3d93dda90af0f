"""/v1/responses: create (plain or streamed), retrieve, delete, list input items.

Handlers stay thin: the wire work is in `responses_wire` / `responses_builder`, the storage in
`store`. A response is stored before the client can learn its id (before the JSON reply, before
the `response.completed` event), so a client that chains at once always finds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from aiohttp import web

from gateway.agent.events import TextDelta, ToolCallStarted
from gateway.agent.loop import AgentRequest
from gateway.errors import GatewayError, InvalidRequestError, NotFoundError
from gateway.http import appkeys
from gateway.http.runs import Deadline, run_timeout_error, run_to_end
from gateway.http.sse import Keepalive, SSEWriter, batched_with_keepalive
from gateway.store.sqlite import ResponseStore, StoredResponse
from gateway.wire import json_out
from gateway.wire.checks import read_json_object
from gateway.wire.responses_output import ResponseBuilder, event_json
from gateway.wire.responses_request import ResponsesRequest, parse_responses_request

log = logging.getLogger("agent_gateway.responses")
routes = web.RouteTableDef()


def _dumps(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False)


def _not_found(response_id: str) -> NotFoundError:
    return NotFoundError(f"No response found with id '{response_id}'.", param="response_id")


async def _history(store: ResponseStore, parsed: ResponsesRequest) -> list[dict[str, Any]]:
    """The stored conversation this request continues (empty for a fresh start)."""
    if parsed.previous_response_id is not None:
        previous = await store.get(parsed.previous_response_id)
        if previous is None:
            raise NotFoundError(
                f"Previous response with id '{parsed.previous_response_id}' not found.",
                param="previous_response_id", code="previous_response_not_found",
            )
        return previous.transcript
    if parsed.conversation is not None:
        head = await store.conversation_head(parsed.conversation)
        return head.transcript if head is not None else []
    return []


async def _save(store: ResponseStore, parsed: ResponsesRequest, builder: ResponseBuilder) -> None:
    if not parsed.store:
        return
    record = StoredResponse(
        id=builder.id, created_at=builder.created_at, response=builder.response(),
        transcript=builder.transcript(), input_items=parsed.input_items, conversation=parsed.conversation,
    )
    # Shielded: a client going away must not cancel the write halfway.
    await asyncio.shield(store.put(record))


@routes.post("/v1/responses")
async def create_response(request: web.Request) -> web.StreamResponse:
    parsed = parse_responses_request(await read_json_object(request))
    app = request.app
    settings = app[appkeys.SETTINGS]
    store = app[appkeys.STORE]
    history = await _history(store, parsed)
    agent_request = AgentRequest(
        messages=[*history, *parsed.messages], client_tools=parsed.chat_tools,
        params=parsed.upstream_params(), stream=parsed.stream, instructions=parsed.instructions,
    )
    builder = ResponseBuilder(parsed, model=parsed.model or settings.model_name,
                              history=agent_request.messages, events=parsed.stream)
    with app[appkeys.LIMITER].slot():
        if parsed.stream:
            return await _stream(request, parsed, agent_request, builder)
        return await _complete(request, parsed, agent_request, builder)


async def _complete(
    request: web.Request, parsed: ResponsesRequest, agent_request: AgentRequest, builder: ResponseBuilder
) -> web.Response:
    builder.start()
    await run_to_end(request.app, agent_request, builder.feed)
    builder.finish()
    await _save(request.app[appkeys.STORE], parsed, builder)
    return web.Response(body=json_out.dumps(builder.response()), content_type="application/json")


async def _stream(
    request: web.Request, parsed: ResponsesRequest, agent_request: AgentRequest, builder: ResponseBuilder
) -> web.StreamResponse:
    """Like chat: headers wait for the first agent event (or keepalive tick), so a fault before any
    output keeps its HTTP status; after that a fault is a `response.failed` event."""
    app = request.app
    settings = app[appkeys.SETTINGS]
    store = app[appkeys.STORE]
    sse = SSEWriter(request)

    def named(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [(event["type"], event_json(event)) for event in events]

    started = did_work = False
    # As in chat: the agent's events in batches, each batch's stream events in one write, the
    # first event on its own so the first token is not held behind the rest of its burst.
    batches = batched_with_keepalive(app[appkeys.AGENT].run(agent_request), settings.keepalive_interval,
                                     first_alone=True)
    try:
        async with contextlib.aclosing(batches), Deadline(settings.run_timeout):
            async for batch in batches:
                out: list[dict[str, Any]] = []
                if not started:
                    started = True
                    out = builder.start()
                if isinstance(batch, Keepalive):
                    await sse.events_many(named(out))
                    await sse.comment()
                    continue
                for item in batch:
                    did_work = did_work or isinstance(item, TextDelta | ToolCallStarted)
                    out += builder.feed(item)
                await sse.events_many(named(out))
        final = builder.finish()
    except (ConnectionResetError, ConnectionError, asyncio.CancelledError) as exc:
        log.info("client went away mid-stream; storing what was produced as incomplete")
        builder.interrupt()
        await _save(store, parsed, builder)
        if isinstance(exc, asyncio.CancelledError):
            raise
        return sse.response
    except (TimeoutError, GatewayError) as exc:
        error = run_timeout_error(settings.run_timeout) if isinstance(exc, TimeoutError) else exc
        if not sse.started:
            if did_work:
                error.should_retry = False
            raise error from exc
        log.warning("agent run failed mid-stream: %s", error.message)
        final = builder.fail(error.message, "rate_limit_exceeded" if error.status == 429 else "server_error")
    if not started:
        final = builder.start() + final
    await _save(store, parsed, builder)
    # the closing events leave with the end of the body, in one write
    with contextlib.suppress(ConnectionError, RuntimeError):
        await sse.finish(events=named(final))
    return sse.response


@routes.get("/v1/responses/{response_id}")
async def retrieve_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    record = await request.app[appkeys.STORE].get(response_id)
    if record is None:
        raise _not_found(response_id)
    return web.Response(body=json_out.dumps(record.response), content_type="application/json", charset="utf-8")


@routes.delete("/v1/responses/{response_id}")
async def delete_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    if not await request.app[appkeys.STORE].delete(response_id):
        raise _not_found(response_id)
    return web.json_response({"id": response_id, "object": "response.deleted", "deleted": True})


def _limit(raw: str | None) -> int:
    if raw is None:
        return 20
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if not 1 <= limit <= 100:
        raise InvalidRequestError("'limit' must be an integer from 1 to 100.", param="limit")
    return limit


@routes.get("/v1/responses/{response_id}/input_items")
async def list_input_items(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    query = request.query
    limit = _limit(query.get("limit"))
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequestError("'order' must be asc or desc.", param="order")
    record = await request.app[appkeys.STORE].get(response_id)
    if record is None:
        raise _not_found(response_id)
    items = record.input_items if order == "asc" else list(reversed(record.input_items))
    after = query.get("after")
    if after is not None:
        ids = [item["id"] for item in items]
        if after not in ids:
            raise InvalidRequestError(f"No input item with id '{after}' in this response.", param="after")
        items = items[ids.index(after) + 1:]
    page = items[:limit]
    return web.json_response({
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(items) > limit,
    }, dumps=_dumps)
