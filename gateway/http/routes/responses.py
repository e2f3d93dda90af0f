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
from gateway.common import json_out
from gateway.errors import GatewayError, InvalidRequestError, NotFoundError, echo
from gateway.http import appkeys
from gateway.http.auth import quota_before_run, store_of
from gateway.http.body import read_json_object
from gateway.http.checks import continue_if_a_run_slot_is_free
from gateway.http.key_limits import admit_tokens, token_estimate
from gateway.http.lifecycle import OVER_SLOTS, too_many_runs
from gateway.http.routes import responses_background, responses_follow, responses_queue
from gateway.http.routes.conversations import include_values
from gateway.http.routes.responses_reply import Reply as _Reply
from gateway.http.routes.responses_reply import ending_on_assistant as _ending_on_assistant
from gateway.http.routes.responses_reply import named as _named
from gateway.http.routes.responses_turn import prepare_turn
from gateway.http.run_loop import Messages, run_streamed, run_whole
from gateway.keys.ring import CURRENT_CALLER
from gateway.runs.background import BACKGROUND_RUNS, run_store
from gateway.wire import ids
from gateway.wire.conversations import item_list, parse_list_query
from gateway.wire.responses_output import ResponseBuilder
from gateway.wire.responses_request import ResponsesRequest, parse_responses_request

log = logging.getLogger("agent_gateway.responses")
routes = web.RouteTableDef()


def _not_found(response_id: str) -> NotFoundError:
    return NotFoundError(f"No response found with id '{echo(response_id)}'.", param="response_id")


def _response_id(request: web.Request) -> str:
    return ids.check_path(request.match_info["response_id"], "response", "response_id")


@routes.post("/v1/responses", expect_handler=continue_if_a_run_slot_is_free)
async def create_response(request: web.Request) -> web.StreamResponse:
    body = await read_json_object(request)
    sealer = request.app[appkeys.REASONING_SEALER]
    parsed = parse_responses_request(body, sealer.open)
    if parsed.store:  # a key past its stored-bytes quota is refused before its run, not after
        quota_before_run(request, request.content_length or 0)
    caller = CURRENT_CALLER.get()
    if caller is not None and caller.token_limited:  # its tokens reserved, or a 429; a queued run's too
        waiting = admit_tokens(request, caller, request.app[appkeys.KEYRING].limits,
                               token_estimate(_estimated_items(parsed), parsed.max_output_tokens))
        if waiting is not None:  # behind replicas: the database's round trip
            await waiting
    if request.get(OVER_SLOTS):  # admitted past the run slots only to see whether it may queue
        if not parsed.background:
            raise too_many_runs(request.app[appkeys.LIMITER].limit)
        return await responses_queue.enqueue(request, body, parsed)
    app = request.app
    store = store_of(request)
    prepared = await prepare_turn(app, store, parsed)
    agent_request, continuation, turn = prepared.agent_request, prepared.continuation, prepared.turn
    if parsed.background:  # every event kept, streamed or not, for a stream resumed later
        builder = ResponseBuilder(parsed, model=prepared.model, events=True, reasoning=prepared.reasoning,
                                  seal=sealer.seal)
        run = app[BACKGROUND_RUNS].register(builder.id, run_store(app))
        background = responses_background.BackgroundReply(store, parsed, builder, continuation, turn, run=run)
        return await responses_background.start(request, agent_request, background)
    builder = ResponseBuilder(parsed, model=prepared.model, events=parsed.stream, reasoning=prepared.reasoning,
                              seal=sealer.seal)
    if parsed.stream:
        reply = _ResponsesStream(store, parsed, builder, continuation, turn)
        return await run_streamed(request, agent_request, reply, log=log)
    builder.start()
    return await run_whole(app, agent_request, _ResponsesWhole(store, parsed, builder, continuation, turn))


def _estimated_items(parsed: ResponsesRequest) -> list[Any]:
    instructions = [{"role": "system", "content": parsed.instructions}] if parsed.instructions else []
    return [*instructions, *parsed.messages, *parsed.chat_tools]


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
        background = bool(record.response.get("background"))
        del record  # a follower may stay for minutes: it must not pin the stored response (megabytes, maybe)
        return await responses_follow.resume(request, response_id, background=background)
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
    store = store_of(request)
    record = await store.get(response_id, touch=False)
    if record is not None:  # a running background response is stopped first: deleted, it stays deleted
        await responses_background.stop(request, record)
    if not await store.delete(response_id):
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
