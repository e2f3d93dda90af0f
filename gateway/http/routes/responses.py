"""/v1/responses: create (plain or streamed), retrieve, delete, list input items.

Handlers stay thin: the wire work is in `responses_wire` / `responses_builder`, the storage in
`store`. A response is stored before the client can learn its id (before the JSON reply, before
the `response.completed` event), so a client that chains at once always finds it.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from gateway.agent.events import AgentEvent
from gateway.agent.loop import AgentRequest
from gateway.common import json_out
from gateway.errors import GatewayError, InvalidRequestError, NotFoundError, echo
from gateway.http import appkeys
from gateway.http.auth import store_of
from gateway.http.background import BACKGROUND_RUNS
from gateway.http.body import read_json_object
from gateway.http.checks import continue_if_a_run_slot_is_free
from gateway.http.model_routes import context_window, route_turn
from gateway.http.routes import responses_background
from gateway.http.routes.conversations import include_values
from gateway.http.routes.responses_reply import Continuation as _Continuation
from gateway.http.routes.responses_reply import Reply as _Reply
from gateway.http.routes.responses_reply import ending_on_assistant as _ending_on_assistant
from gateway.http.routes.responses_reply import named as _named
from gateway.http.runs import Messages, run_streamed, run_whole
from gateway.store.api import ResponseStore, UnknownConversationError
from gateway.upstream.routes import RouteTurn
from gateway.wire import context_budget, ids
from gateway.wire.conversations import is_conversation_id, item_list, parse_list_query, transcript
from gateway.wire.responses_output import ResponseBuilder
from gateway.wire.responses_request import ResponsesRequest, parse_responses_request

log = logging.getLogger("agent_gateway.responses")
routes = web.RouteTableDef()


def _not_found(response_id: str) -> NotFoundError:
    return NotFoundError(f"No response found with id '{echo(response_id)}'.", param="response_id")


def _response_id(request: web.Request) -> str:
    return ids.check_path(request.match_info["response_id"], "response", "response_id")


async def _continuation(store: ResponseStore, parsed: ResponsesRequest, budget: int) -> _Continuation:
    """What the turn continues, read newest first within `budget` bytes (context_budget.py)."""
    if parsed.previous_response_id is not None:
        previous = await store.chain(parsed.previous_response_id, max_bytes=budget)
        if previous is None:
            raise NotFoundError(
                f"Previous response with id '{echo(parsed.previous_response_id)}' not found.",
                param="previous_response_id", code="previous_response_not_found",
            )
        if previous.records and previous.records[0].response.get("status") in ("queued", "in_progress"):
            # a background response still running has no turn to continue from yet
            raise InvalidRequestError(f"Response '{echo(parsed.previous_response_id)}' is still in progress; "
                                      "continue from it once it has ended.", param="previous_response_id")
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
    if parsed.background:  # every event kept, streamed or not, for a stream resumed later
        builder = ResponseBuilder(parsed, model=model, events=True, reasoning=reasoning == "show")
        run = app[BACKGROUND_RUNS].register(builder.id)
        background = responses_background.BackgroundReply(store, parsed, builder, continuation, turn, run=run)
        return await responses_background.start(request, agent_request, background)
    builder = ResponseBuilder(parsed, model=model, events=parsed.stream, reasoning=reasoning == "show")
    if parsed.stream:
        reply = _ResponsesStream(store, parsed, builder, continuation, turn)
        return await run_streamed(request, agent_request, reply, log=log)
    builder.start()
    return await run_whole(app, agent_request, _ResponsesWhole(store, parsed, builder, continuation, turn))


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
async def retrieve_response(request: web.Request) -> web.StreamResponse:
    response_id = _response_id(request)
    record = await store_of(request).get(response_id)
    if record is None:
        raise _not_found(response_id)
    if request.query.get("stream", "false").lower() == "true":
        return await responses_background.resume(request, record)
    return web.Response(body=json_out.dumps(record.response), content_type="application/json", charset="utf-8")


@routes.post("/v1/responses/{response_id}/cancel")
async def cancel_response(request: web.Request) -> web.Response:
    response_id = _response_id(request)
    record = await store_of(request).get(response_id, touch=False)
    if record is None:
        raise _not_found(response_id)
    return await responses_background.cancel(request, record)


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
