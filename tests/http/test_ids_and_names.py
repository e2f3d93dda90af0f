"""Ids and names a client gives are checked at the wire, the same on SQLite and PostgreSQL: at
most 256 characters, no control character (NUL included); a client-given item id has no `/ ? # %`
or whitespace and is not `.` or `..`. A bad one in a body or query is a 400 naming the field, in a
path the 404 of an id that cannot exist. Before, PostgreSQL refused a NUL or a key over its btree
limit and the gateway answered 503 "store unavailable" (with Retry-After), where SQLite said 404."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from tests.fakes.upstream import text
from tests.support.helpers import assert_error_envelope

LONG_ITEM_ID = "i" * 2705  # over PostgreSQL's btree row limit (2,704 bytes)
LONG_NAME = "n" * 8192


@pytest.fixture(params=["sqlite", "postgres"])
async def client(request: pytest.FixtureRequest, make_client: Any) -> Any:
    if request.param == "postgres":
        return await make_client(tools=[], database_url=request.getfixturevalue("postgres_url"))
    return await make_client(tools=[])


def _message(item_id: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": "hi", "id": item_id}


@pytest.mark.parametrize(("body", "param"), [
    ({"input": "hi", "previous_response_id": "resp_\x00"}, "previous_response_id"),
    ({"input": "hi", "previous_response_id": "r" * 300}, "previous_response_id"),
    ({"input": "hi", "conversation": "a\x00b"}, "conversation"),
    ({"input": "hi", "conversation": LONG_NAME}, "conversation"),
    ({"input": "hi", "conversation": {"id": "conv_\x00"}}, "conversation"),
    ({"input": "hi", "conversation": {"id": "conv_" + "c" * 3000}}, "conversation"),
    ({"input": [_message("a\x00")]}, "input[0].id"),
    ({"input": [_message(LONG_ITEM_ID)]}, "input[0].id"),
    ({"input": [_message("a/b")]}, "input[0].id"),
    ({"input": [_message("a b")]}, "input[0].id"),
    ({"input": [_message("..")]}, "input[0].id"),
    ({"input": [_message("50%")]}, "input[0].id"),
])
async def test_a_bad_id_or_name_in_a_responses_body_is_a_400_naming_it(
        client: Any, upstream: Any, body: dict[str, Any], param: str) -> None:
    reply = await client.post("/v1/responses", json=body)
    assert reply.status == 400, await reply.text()
    payload = await reply.json()
    assert_error_envelope(payload)
    assert payload["error"]["param"] == param
    assert len(payload["error"]["message"]) < 300  # the value is not echoed whole
    assert upstream.requests == []  # refused before the model ran


async def test_a_bad_item_id_in_a_conversation_body_or_after_is_a_400(client: Any) -> None:
    for bad in ("a\x00", LONG_ITEM_ID, "x?y", "."):
        created = await client.post("/v1/conversations", json={"items": [_message(bad)]})
        assert created.status == 400 and (await created.json())["error"]["param"] == "items[0].id"
    conversation = await (await client.post("/v1/conversations", json={"items": [_message("ok_1")]})).json()
    base = f"/v1/conversations/{conversation['id']}/items"
    added = await client.post(base, json={"items": [_message("b\x00")]})
    assert added.status == 400 and (await added.json())["error"]["param"] == "items[0].id"
    for after in ("\x00", "a" * 3000):
        listed = await client.get(base, params={"after": after})
        assert listed.status == 400, await listed.text()
        error = (await listed.json())["error"]
        assert error["param"] == "after" and len(error["message"]) < 300
    assert (await client.get(base, params={"after": "ok_1"})).status == 200


@pytest.mark.parametrize("bad", ["\x00", "resp_\x00x", "r" * 2705])
async def test_a_bad_response_id_in_a_path_is_a_404(client: Any, bad: str) -> None:
    for method, suffix in (("GET", ""), ("DELETE", ""), ("GET", "/input_items")):
        reply = await client.request(method, f"/v1/responses/{quote(bad, safe='')}{suffix}")
        assert reply.status == 404, (method, suffix, await reply.text())
        assert_error_envelope(await reply.json(), code="not_found")


@pytest.mark.parametrize("bad", ["\x00", "conv_\x00", "conv_" + "c" * 2705])
async def test_a_bad_conversation_or_item_id_in_a_path_is_a_404(client: Any, bad: str) -> None:
    path = f"/v1/conversations/{quote(bad, safe='')}"
    for method, suffix in (("GET", ""), ("DELETE", ""), ("GET", "/items"), ("GET", "/items/x")):
        reply = await client.request(method, path + suffix)
        assert reply.status == 404, (method, suffix, await reply.text())
    reply = await client.post(path, json={"metadata": {}})
    assert reply.status == 404
    conversation = await (await client.post("/v1/conversations", json={})).json()
    items = f"/v1/conversations/{conversation['id']}/items/"
    for item_id in ("\x00", LONG_ITEM_ID, ".."):
        for method in ("GET", "DELETE"):
            reply = await client.request(method, items + quote(item_id, safe=""))
            assert reply.status == 404, (method, await reply.text())


async def test_ids_and_names_within_the_bounds_work_on_both_backends(client: Any, upstream: Any) -> None:
    upstream.queue(text("one"), text("two"))
    name = "n" * 256
    first = await client.post("/v1/responses", json={"input": [_message("m" * 256)], "conversation": name})
    assert first.status == 200, await first.text()
    second = await client.post("/v1/responses", json={"input": "again", "conversation": name})
    assert second.status == 200
    assert (await client.get(f"/v1/responses/{(await second.json())['id']}")).status == 200
