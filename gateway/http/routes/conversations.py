"""/v1/conversations: OpenAI's Conversations API (create, retrieve, update, delete; list, add, get
and delete items). Thin: requests are read by gateway/wire/conversations.py, kept by the store
(gateway/store/api.py); `/v1/responses` with `conversation: "conv_..."` reads and appends to them
(routes/responses.py). Unknown ids are the store's 404s, in the OpenAI envelope.
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from gateway.common import json_out
from gateway.http.auth import store_of
from gateway.http.body import read_json_object
from gateway.store.api import Conversation, ConversationItem, ResponseStore
from gateway.wire import conversations as wire
from gateway.wire import ids
from gateway.wire.responses_input import new_id

routes = web.RouteTableDef()


def _store(request: web.Request) -> ResponseStore:
    return store_of(request)  # the caller's objects only


def _json(payload: Any) -> web.Response:
    return web.Response(body=json_out.dumps(payload), content_type="application/json", charset="utf-8")


def include_values(request: web.Request) -> list[str]:
    """`include` as the SDKs send a list in a query: repeated, bare or with brackets."""
    return [*request.query.getall("include", []), *request.query.getall("include[]", [])]


def _conversation_id(request: web.Request) -> str:
    return ids.check_path(request.match_info["conversation_id"], "conversation", "conversation_id")


def _item_id(request: web.Request) -> str:
    return ids.check_path(request.match_info["item_id"], "item", "item_id", item_id=True)


@routes.post("/v1/conversations")
async def create_conversation(request: web.Request) -> web.Response:
    metadata, items = wire.parse_create(await read_json_object(request))
    conversation = Conversation(id=new_id("conv"), created_at=int(time.time()), metadata=metadata)
    await _store(request).create_conversation(conversation, [ConversationItem(item) for item in items])
    return _json(conversation.object())


@routes.get("/v1/conversations/{conversation_id}")
async def retrieve_conversation(request: web.Request) -> web.Response:
    return _json((await _store(request).get_conversation(_conversation_id(request))).object())


@routes.post("/v1/conversations/{conversation_id}")
async def update_conversation(request: web.Request) -> web.Response:
    metadata = wire.parse_update(await read_json_object(request))
    return _json((await _store(request).update_conversation(_conversation_id(request), metadata)).object())


@routes.delete("/v1/conversations/{conversation_id}")
async def delete_conversation(request: web.Request) -> web.Response:
    conversation_id = _conversation_id(request)
    await _store(request).delete_conversation(conversation_id)
    return _json(wire.deleted(conversation_id))


@routes.get("/v1/conversations/{conversation_id}/items")
async def list_items(request: web.Request) -> web.Response:
    query = wire.parse_list_query(request.query, include_values(request))
    page = await _store(request).list_items(_conversation_id(request), limit=query.limit, order=query.order,
                                            after=query.after)
    return _json(wire.item_list([wire.shown(item.item, query.include) for item in page.items], page.has_more))


@routes.post("/v1/conversations/{conversation_id}/items")
async def add_items(request: web.Request) -> web.Response:
    include = wire.parse_include(include_values(request))
    items = wire.parse_add_items(await read_json_object(request))
    await _store(request).append_items(_conversation_id(request), [ConversationItem(item) for item in items])
    return _json(wire.item_list([wire.shown(item, include) for item in items], has_more=False))


@routes.get("/v1/conversations/{conversation_id}/items/{item_id}")
async def retrieve_item(request: web.Request) -> web.Response:
    include = wire.parse_include(include_values(request))
    found = await _store(request).get_item(_conversation_id(request), _item_id(request))
    return _json(wire.shown(found.item, include))


@routes.delete("/v1/conversations/{conversation_id}/items/{item_id}")
async def delete_item(request: web.Request) -> web.Response:
    conversation = await _store(request).delete_item(_conversation_id(request), _item_id(request))
    return _json(conversation.object())
