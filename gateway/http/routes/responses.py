"""/v1/responses: create (plain or streamed), retrieve, delete, list input items.

Handlers stay thin: the wire work is in `responses_wire` / `responses_builder`, the storage in
`store`. A response is stored before the client can learn its id (before the JSON reply, before
the `response.completed` event), so a client that chains at once always finds it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from aiohttp import web

from gateway.agent.events import AgentEvent
from gateway.agent.loop import AgentRequest
from gateway.errors import GatewayError, InvalidRequestError, NotFoundError
from gateway.http import appkeys
from gateway.http.body import read_json_object
from gateway.http.runs import Messages, run_streamed, run_whole
from gateway.http.sse import named_frames
from gateway.store.api import ResponseStore, StoredResponse
from gateway.wire import json_out
from gateway.wire.responses_output import ResponseBuilder, event_json
from gateway.wire.responses_request import ResponsesRequest, parse_responses_request

log = logging.getLogger("agent_gateway.responses")
routes = web.RouteTableDef()


def _dumps(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False)


def _not_found(response_id: str) -> NotFoundError:
    return NotFoundError(f"No response found with id '{response_id}'.", param="response_id")


async def _history(store: ResponseStore, parsed: ResponsesRequest) -> tuple[list[dict[str, Any]], str | None]:
    """The stored conversation this request continues (empty for a fresh start), and for a named
    conversation the head it continues ("" when fresh): the turn is stored only if that is still
    the head when it ends (another replica's turn in between is a 409, see store/api.py)."""
    if parsed.previous_response_id is not None:
        previous = await store.get(parsed.previous_response_id)
        if previous is None:
            raise NotFoundError(
                f"Previous response with id '{parsed.previous_response_id}' not found.",
                param="previous_response_id", code="previous_response_not_found",
            )
        return previous.transcript, None
    if parsed.conversation is not None:
        head = await store.conversation_head(parsed.conversation)
        return (head.transcript, head.id) if head is not None else ([], "")
    return [], None


@routes.post("/v1/responses")
async def create_response(request: web.Request) -> web.StreamResponse:
    parsed = parse_responses_request(await read_json_object(request))
    app = request.app
    settings = app[appkeys.SETTINGS]
    store = app[appkeys.STORE]
    history, expected_head = await _history(store, parsed)
    agent_request = AgentRequest(
        messages=[*history, *parsed.messages], client_tools=parsed.chat_tools,
        params=parsed.upstream_params(), stream=parsed.stream, instructions=parsed.instructions,
        web=parsed.web,
    )
    builder = ResponseBuilder(parsed, model=parsed.model or settings.model_name, events=parsed.stream,
                              reasoning=settings.reasoning == "show")
    with app[appkeys.LIMITER].slot():
        if parsed.stream:
            reply = _ResponsesStream(store, parsed, builder, agent_request.messages, expected_head)
            return await run_streamed(request, agent_request, reply, log=log)
        builder.start()
        return await run_whole(app, agent_request, _ResponsesWhole(store, parsed, builder, agent_request.messages,
                                                                expected_head))


def _named(events: list[dict[str, Any]]) -> bytes:
    return named_frames([(event["type"], event_json(event)) for event in events])


def _ending_on_assistant(messages: Messages) -> list[dict[str, Any]]:
    """A kept turn ends on an assistant message (what a chat upstream expects after tool
    results). The agent's finished turns always do; one the client cut short may not."""
    if not messages or messages[-1]["role"] == "tool":
        return [*messages, {"role": "assistant", "content": ""}]
    return list(messages)


class _Reply:
    """What both kinds of Responses reply share: the builder, and storing the response."""

    def __init__(self, store: ResponseStore, parsed: ResponsesRequest, builder: ResponseBuilder,
                 history: list[dict[str, Any]], expected_head: str | None) -> None:
        self.store, self.parsed, self.builder, self.history = store, parsed, builder, history
        self.expected_head = expected_head

    async def save(self, messages: Messages) -> None:
        """Store the response as the builder has it, with the conversation so far: the history
        the turn continued and the transcript the agent kept of it."""
        if not self.parsed.store:
            return
        builder, parsed = self.builder, self.parsed
        record = StoredResponse(
            id=builder.id, created_at=builder.created_at, response=builder.response(),
            transcript=[*self.history, *messages], input_items=parsed.input_items,
            conversation=parsed.conversation, expected_head=self.expected_head,
        )
        # Shielded: a client going away must not cancel the write halfway.
        await asyncio.shield(self.store.put(record))


class _ResponsesWhole(_Reply):
    def feed(self, event: AgentEvent) -> object:
        return self.builder.feed(event)

    async def end(self, messages: Messages) -> web.Response:
        self.builder.finish()
        await self.save(_ending_on_assistant(messages))
        return web.Response(body=json_out.dumps(self.builder.response()), content_type="application/json")


class _ResponsesStream(_Reply):
    """Responses events as `event:`/`data:` frames. The response is stored before the client can
    learn it is done (before `response.completed`); a store that refuses it turns the ending into
    `response.failed`, and an interrupted or failed response is stored as such."""

    _closing: tuple[dict[str, Any], ...] = ()  # the end's events bar its last, if the store refuses it

    def begin(self) -> bytes:
        return _named(self.builder.start())

    def encode(self, events: list[AgentEvent]) -> bytes:
        feed = self.builder.feed
        return _named([out for event in events for out in feed(event)])

    async def end(self, messages: Messages) -> bytes:
        final = self.builder.finish()
        self._closing = tuple(final[:-1])
        await self.save(_ending_on_assistant(messages))
        return _named(final)

    async def fail(self, error: GatewayError, messages: Messages) -> bytes:
        code = "rate_limit_exceeded" if error.status == 429 else "server_error"
        final = [*self._closing, *self.builder.fail(error.message, code)]
        await self._save_quietly("failed", messages)
        return _named(final)

    async def interrupted(self, messages: Messages) -> None:
        self.builder.interrupt()
        await self._save_quietly("interrupted", _ending_on_assistant(messages))

    async def _save_quietly(self, what: str, messages: Messages) -> None:
        # the stream has started (or the client is gone): a store fault can only be logged now
        try:
            await self.save(messages)
        except GatewayError as exc:
            log.warning("the %s response %s was not stored: %s", what, self.builder.id, exc.message)


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
