"""/v1/responses: create (plain or streamed), retrieve, delete, list input items.

Handlers stay thin: the wire work is in `responses_wire` / `responses_builder`, the storage in
`store`. A response is stored before the client can learn its id (before the JSON reply, before
the `response.completed` event), so a client that chains at once always finds it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from gateway.agent.events import AgentEvent
from gateway.agent.loop import AgentRequest
from gateway.common import json_out
from gateway.errors import GatewayError, InvalidRequestError, NotFoundError, echo
from gateway.http import appkeys
from gateway.http.auth import store_of
from gateway.http.body import read_json_object
from gateway.http.checks import continue_if_a_run_slot_is_free
from gateway.http.model_routes import context_window, route_turn
from gateway.http.routes.conversations import include_values
from gateway.http.runs import Messages, run_streamed, run_whole
from gateway.http.sse import named_frames
from gateway.store.api import ConversationItem, ResponseStore, StoredResponse, UnknownConversationError
from gateway.upstream.routes import RouteTurn
from gateway.wire import context_budget, ids
from gateway.wire.conversations import is_conversation_id, item_list, parse_list_query, transcript, turn_items
from gateway.wire.responses_output import ResponseBuilder, event_json
from gateway.wire.responses_request import ResponsesRequest, parse_responses_request

log = logging.getLogger("agent_gateway.responses")
routes = web.RouteTableDef()


def _not_found(response_id: str) -> NotFoundError:
    return NotFoundError(f"No response found with id '{echo(response_id)}'.", param="response_id")


def _response_id(request: web.Request) -> str:
    return ids.check_path(request.match_info["response_id"], "response", "response_id")


@dataclass
class _Continuation:
    """What a request continues: the stored conversation as far back as the context window
    reaches (empty for a fresh start), and what the store checks when the turn is kept, so that a
    turn stored meanwhile (another replica's, or a concurrent request's) makes this one a 409
    rather than a lost turn (see store/api.py)."""

    transcript: list[dict[str, Any]] = field(default_factory=list)
    #: False: older history was left unread (the window's budget was spent before its start)
    complete: bool = True
    #: the record this turn continues: its parent when stored (previous_response_id, a named head)
    parent_id: str | None = None
    #: a named conversation: the head it continued ("" when fresh)
    expected_head: str | None = None
    #: a conversation object (`conv_...`): its id, and the last item the turn read ("" if none)
    conversation_id: str | None = None
    expected_last: str | None = None


async def _continuation(store: ResponseStore, parsed: ResponsesRequest, budget: int) -> _Continuation:
    """What the turn continues, read newest first within `budget` bytes (context_budget.py)."""
    if parsed.previous_response_id is not None:
        previous = await store.chain(parsed.previous_response_id, max_bytes=budget)
        if previous is None:
            raise NotFoundError(
                f"Previous response with id '{echo(parsed.previous_response_id)}' not found.",
                param="previous_response_id", code="previous_response_not_found",
            )
        return _Continuation(previous.transcript(), previous.complete, parent_id=parsed.previous_response_id)
    if parsed.conversation is None:
        return _Continuation()
    if is_conversation_id(parsed.conversation):
        return await _conversation_object(store, parsed, parsed.conversation, budget)
    head = await store.conversation_head(parsed.conversation, touch=False)
    chain = await store.chain(head.id, max_bytes=budget) if head is not None else None
    if head is None or chain is None:  # no head, or evicted between the two reads: a fresh start
        return _Continuation(expected_head="")
    return _Continuation(chain.transcript(), chain.complete, parent_id=head.id, expected_head=head.id)


async def _conversation_object(store: ResponseStore, parsed: ResponsesRequest, conversation_id: str,
                               budget: int) -> _Continuation:
    try:
        tail = await store.conversation_tail(conversation_id, max_bytes=budget,
                                             check_ids=[given["id"] for given in parsed.input_items])
    except UnknownConversationError:
        raise UnknownConversationError.on(conversation_id, param="conversation") from None
    for index, given in enumerate(parsed.input_items):
        if given["id"] in tail.taken:  # refused now, not after the model ran: the append would be
            raise InvalidRequestError(f"An item with id '{echo(given['id'])}' is already in conversation "
                                      f"'{conversation_id}'; send only the new items.", param=f"input[{index}].id")
    return _Continuation(transcript([(item.item, item.model) for item in tail.items]), tail.complete,
                         conversation_id=conversation_id, expected_last=tail.last_id)


async def _within_window(request: web.Request, parsed: ResponsesRequest,
                         turn: RouteTurn | None) -> tuple[_Continuation, list[Any]]:
    """The continuation, its history cut to the context window (or a 400, see context_budget.py)."""
    instructions = [{"role": "system", "content": parsed.instructions}] if parsed.instructions else []
    fixed = context_budget.fixed_tokens([*instructions, *parsed.messages, *parsed.chat_tools],
                                        parsed.max_output_tokens)
    if parsed.previous_response_id is None and parsed.conversation is None \
            and fixed <= context_budget.SMALLEST_WINDOW:
        return _Continuation(), []  # fits any model: no window to look up
    window = await context_window(request, turn)
    continuation = await _continuation(store_of(request), parsed, context_budget.history_bytes(window, fixed))
    history = context_budget.fit(continuation.transcript, complete=continuation.complete, window=window,
                                 fixed=fixed, truncation=parsed.truncation)
    return continuation, history


@routes.post("/v1/responses", expect_handler=continue_if_a_run_slot_is_free)
async def create_response(request: web.Request) -> web.StreamResponse:
    parsed = parse_responses_request(await read_json_object(request))
    app = request.app
    settings = app[appkeys.SETTINGS]
    store = store_of(request)
    # the model the client names now, whatever a previous response used (as OpenAI does)
    turn = await route_turn(request, parsed.model) if settings.llm_models is not None else None
    continuation, history = await _within_window(request, parsed, turn)
    agent_request = AgentRequest(
        messages=[*history, *parsed.messages], client_tools=parsed.chat_tools,
        params=parsed.upstream_params(), stream=parsed.stream, instructions=parsed.instructions,
        web=parsed.web,
    )
    if turn is None:
        model, reasoning = parsed.model or settings.model_name, settings.reasoning
    else:
        agent_request.opener, agent_request.web_tools = turn.open, turn.route.web_tools
        model, reasoning = turn.route.id, turn.route.reasoning
    builder = ResponseBuilder(parsed, model=model, events=parsed.stream, reasoning=reasoning == "show")
    if parsed.stream:
        reply = _ResponsesStream(store, parsed, builder, continuation, turn)
        return await run_streamed(request, agent_request, reply, log=log)
    builder.start()
    return await run_whole(app, agent_request, _ResponsesWhole(store, parsed, builder, continuation, turn))


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
                 continuation: _Continuation, turn: RouteTurn | None = None) -> None:
        self.store, self.parsed, self.builder = store, parsed, builder
        self.continuation = continuation
        self.turn = turn

    def served(self) -> None:
        """The response's `model` is the route that answered (a fallback's, perhaps)."""
        if self.turn is not None:
            self.builder.model = self.turn.served.id

    async def save(self, messages: Messages) -> None:
        """Store the response as the builder has it, with its own turn (its input and the
        transcript the agent kept of it) and a link to the record it continued, never a copy of
        the history (a chain is read back by walking parents). A turn of a conversation
        object that ended (completed or incomplete, not failed or cut short) appends its input
        and output items to it, with the response in the same write, whatever `store` says
        (as OpenAI does: `store` is about the response object)."""
        builder, parsed, continuation = self.builder, self.parsed, self.continuation
        response = builder.response()
        conversation_id = continuation.conversation_id
        record = StoredResponse(
            id=builder.id, created_at=builder.created_at, response=response,
            transcript=[*parsed.messages, *messages], input_items=parsed.input_items,
            conversation=None if conversation_id is not None else parsed.conversation,
            parent_id=continuation.parent_id, expected_head=continuation.expected_head,
        )
        # Shielded: a client going away must not cancel the write halfway.
        if conversation_id is not None and builder.status in ("completed", "incomplete"):
            items = turn_items(parsed.input_items, builder.kept_output(), list(messages))
            await asyncio.shield(self.store.append_items(
                conversation_id, [ConversationItem(item, model) for item, model in items],
                expected_last=continuation.expected_last, response=record if parsed.store else None))
        elif parsed.store:
            await asyncio.shield(self.store.put(record))


class _ResponsesWhole(_Reply):
    def feed(self, event: AgentEvent) -> object:
        return self.builder.feed(event)

    async def end(self, messages: Messages) -> web.Response:
        self.served()
        self.builder.finish()
        await self.save(_ending_on_assistant(messages))
        return web.Response(body=json_out.dumps(self.builder.response()), content_type="application/json")


class _ResponsesStream(_Reply):
    """Responses events as `event:`/`data:` frames. The response is stored before the client can
    learn it is done (before `response.completed`); a store that refuses it turns the ending into
    `response.failed`, and an interrupted or failed response is stored as such."""

    _closing: tuple[dict[str, Any], ...] = ()  # the end's events bar its last, if the store refuses it

    def begin(self) -> bytes:
        self.served()
        return _named(self.builder.start())

    def encode(self, events: list[AgentEvent]) -> bytes:
        feed = self.builder.feed
        return _named([out for event in events for out in feed(event)])

    async def end(self, messages: Messages) -> bytes:
        self.served()
        final = self.builder.finish()
        self._closing = tuple(final[:-1])
        await self.save(_ending_on_assistant(messages))
        return _named(final)

    async def fail(self, error: GatewayError, messages: Messages) -> bytes:
        # a lost conversation race is the client's to retry, as the non-streamed 409 says
        code = {429: "rate_limit_exceeded", 409: error.code}.get(error.status) or "server_error"
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
            log.warning("the %s response %s was not stored: %s", what, self.builder.id, exc.detail or exc.message)


@routes.get("/v1/responses/{response_id}")
async def retrieve_response(request: web.Request) -> web.Response:
    response_id = _response_id(request)
    record = await store_of(request).get(response_id)
    if record is None:
        raise _not_found(response_id)
    return web.Response(body=json_out.dumps(record.response), content_type="application/json", charset="utf-8")


@routes.delete("/v1/responses/{response_id}")
async def delete_response(request: web.Request) -> web.Response:
    response_id = _response_id(request)
    if not await store_of(request).delete(response_id):
        raise _not_found(response_id)
    return web.json_response({"id": response_id, "object": "response.deleted", "deleted": True})


@routes.get("/v1/responses/{response_id}/input_items")
async def list_input_items(request: web.Request) -> web.Response:
    response_id = _response_id(request)
    query = parse_list_query(request.query, include_values(request))
    record = await store_of(request).get(response_id)
    if record is None:
        raise _not_found(response_id)
    items = record.input_items if query.order == "asc" else list(reversed(record.input_items))
    if query.after is not None:
        ids = [item["id"] for item in items]
        if query.after not in ids:
            raise InvalidRequestError(f"No input item with id '{echo(query.after)}' in this response.", param="after")
        items = items[ids.index(query.after) + 1:]
    return web.Response(body=json_out.dumps(item_list(items[:query.limit], len(items) > query.limit)),
                        content_type="application/json", charset="utf-8")
