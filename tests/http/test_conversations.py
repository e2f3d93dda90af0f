"""The Conversations API through the official openai SDK: create, retrieve, update, delete; items
listed, added, fetched and deleted; `/v1/responses` with `conversation: "conv_..."` reading and
appending (the model still gets the full results of the gateway's own web searches), and the
errors a client gets for what does not exist."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
import pytest
from jsonschema import Draft202012Validator
from openai.types.conversations import Conversation, Message

from gateway.http.routes.openapi import openapi_document
from tests.conftest import API_KEY
from tests.fakes.searxng import FakeSearxng, searxng_server  # noqa: F401
from tests.fakes.upstream import text, tool_call
from tests.support.helpers import assert_error_envelope

AUTH = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture
async def client(make_client: Any, searxng_server: FakeSearxng) -> Any:  # noqa: F811
    return await make_client(api_key=API_KEY, env={"SEARXNG_URL": searxng_server.base_url})


@pytest.fixture
async def sdk(client: Any) -> Any:
    sdk = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=API_KEY, max_retries=0)
    yield sdk
    await sdk.close()


def sent(upstream: Any, index: int = -1) -> list[dict[str, Any]]:
    """The messages the upstream received, the agent's own system prompt left out."""
    return list(upstream.requests[index]["messages"][1:])


async def test_create_retrieve_update_delete(sdk: Any) -> None:
    created = await sdk.conversations.create(metadata={"topic": "otters"})
    assert isinstance(created, Conversation) and created.id.startswith("conv_")
    assert created.object == "conversation" and created.metadata == {"topic": "otters"}
    assert (await sdk.conversations.retrieve(created.id)).model_dump() == created.model_dump()
    updated = await sdk.conversations.update(created.id, metadata={"topic": "seals"})
    assert updated.metadata == {"topic": "seals"} and updated.created_at == created.created_at
    deleted = await sdk.conversations.delete(created.id)
    assert (deleted.id, deleted.object, deleted.deleted) == (created.id, "conversation.deleted", True)
    with pytest.raises(openai.NotFoundError):
        await sdk.conversations.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        await sdk.conversations.delete(created.id)


async def test_items_are_listed_newest_first_and_paged_by_the_sdk(sdk: Any) -> None:
    conversation = await sdk.conversations.create(
        items=[{"type": "message", "role": "user", "content": f"note {i}"} for i in range(5)])
    page = await sdk.conversations.items.list(conversation.id, limit=2)
    assert [item.content[0].text for item in page.data] == ["note 4", "note 3"] and page.has_more
    every = [item.content[0].text async for item in sdk.conversations.items.list(conversation.id, limit=2,
                                                                                  order="asc")]
    assert every == [f"note {i}" for i in range(5)]
    first = page.data[0]
    assert isinstance(first, Message) and first.id.startswith("msg_") and first.role == "user"


async def test_items_are_added_fetched_and_deleted(sdk: Any) -> None:
    conversation = await sdk.conversations.create()
    added = await sdk.conversations.items.create(conversation.id, items=[
        {"type": "message", "role": "user", "content": "Hello"},
        {"type": "message", "role": "assistant", "content": "Hi, how can I help?"}])
    assert [item.role for item in added.data] == ["user", "assistant"] and not added.has_more
    user_id = added.data[0].id
    got = await sdk.conversations.items.retrieve(user_id, conversation_id=conversation.id)
    assert got.content[0].text == "Hello" and got.content[0].type == "input_text"
    after = await sdk.conversations.items.delete(user_id, conversation_id=conversation.id)
    assert after.id == conversation.id and after.object == "conversation"
    remaining = await sdk.conversations.items.list(conversation.id)
    assert [item.role for item in remaining.data] == ["assistant"]
    with pytest.raises(openai.NotFoundError):
        await sdk.conversations.items.retrieve(user_id, conversation_id=conversation.id)


async def test_responses_in_a_conversation_read_and_append_its_items(sdk: Any, upstream: Any) -> None:
    conversation = await sdk.conversations.create(
        items=[{"type": "message", "role": "user", "content": "My name is Ada."}])
    upstream.queue(text("Nice to meet you, Ada."), text("You are Ada."))
    first = await sdk.responses.create(model="m", input="Hello!", conversation=conversation.id)
    assert first.conversation is not None and first.conversation.id == conversation.id
    assert sent(upstream) == [{"role": "user", "content": "My name is Ada."},
                              {"role": "user", "content": "Hello!"}]
    second = await sdk.responses.create(model="m", input="Who am I?", conversation={"id": conversation.id})
    assert second.output_text == "You are Ada."
    assert [(m["role"], m["content"]) for m in sent(upstream)] == [
        ("user", "My name is Ada."), ("user", "Hello!"), ("assistant", "Nice to meet you, Ada."),
        ("user", "Who am I?")]
    items = [item async for item in sdk.conversations.items.list(conversation.id, order="asc")]
    assert [item.role for item in items] == ["user", "user", "assistant", "user", "assistant"]
    assert items[-1].id == second.output[0].id and items[-1].content[0].text == "You are Ada."
    # the responses are stored as usual, and name the conversation
    assert (await sdk.responses.retrieve(first.id)).conversation.id == conversation.id


async def test_the_next_turn_gets_the_full_results_of_a_search_the_client_saw_as_an_item(
        sdk: Any, upstream: Any, searxng_server: FakeSearxng) -> None:  # noqa: F811
    conversation = await sdk.conversations.create()
    upstream.queue(tool_call(("web_search", {"query": "otter diet"})), text("Otters eat fish."), text("Yes."))
    await sdk.responses.create(model="m", input="otters?", conversation=conversation.id,
                               tools=[{"type": "web_search"}])
    items = [item async for item in sdk.conversations.items.list(conversation.id, order="asc")]
    assert [item.type for item in items] == ["message", "web_search_call", "message"]
    assert items[1].action.query == "otter diet"
    await sdk.responses.create(model="m", input="Sure?", conversation=conversation.id, tools=[{"type": "web_search"}])
    history = sent(upstream)
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant", "user"]
    assert history[1]["tool_calls"][0]["function"]["name"] == "web_search"
    assert "https://example.org/1" in history[2]["content"]  # the result itself, not a note about it


async def test_a_turn_whose_search_item_was_deleted_reads_as_its_remaining_items(
        sdk: Any, upstream: Any, searxng_server: FakeSearxng) -> None:  # noqa: F811
    conversation = await sdk.conversations.create()
    upstream.queue(tool_call(("web_search", {"query": "otter diet"})), text("Otters eat fish."), text("Ok."))
    await sdk.responses.create(model="m", input="otters?", conversation=conversation.id)
    items = [item async for item in sdk.conversations.items.list(conversation.id, order="asc")]
    await sdk.conversations.items.delete(items[1].id, conversation_id=conversation.id)
    await sdk.responses.create(model="m", input="And?", conversation=conversation.id)
    assert [(m["role"], m["content"]) for m in sent(upstream)] == [
        ("user", "otters?"), ("assistant", "Otters eat fish."), ("user", "And?")]


async def test_a_streamed_turn_appends_too_and_store_false_still_appends(sdk: Any, upstream: Any) -> None:
    conversation = await sdk.conversations.create()
    upstream.queue(text("One."), text("Two."))
    async with sdk.responses.stream(model="m", input="first", conversation=conversation.id) as stream:
        final = await stream.get_final_response()
    assert final.output_text == "One."
    unstored = await sdk.responses.create(model="m", input="second", conversation=conversation.id, store=False)
    with pytest.raises(openai.NotFoundError):
        await sdk.responses.retrieve(unstored.id)
    items = [item async for item in sdk.conversations.items.list(conversation.id, order="asc")]
    assert [item.content[0].text for item in items] == ["first", "One.", "second", "Two."]


async def test_an_unknown_conversation_id_is_a_404_and_a_named_conversation_still_works(
        client: Any, upstream: Any) -> None:
    response = await client.post("/v1/responses", json={"input": "hi", "conversation": "conv_nope"}, headers=AUTH)
    body = await response.json()
    assert response.status == 404
    assert_error_envelope(body, param="conversation")
    assert "conv_nope" in body["error"]["message"]
    assert upstream.requests == []
    upstream.queue(text("One."), text("Two."))
    for said in ("first", "second"):
        response = await client.post("/v1/responses", json={"input": said, "conversation": "my-chat"}, headers=AUTH)
        assert response.status == 200
    assert [m["content"] for m in sent(upstream)] == ["first", "One.", "second"]


@pytest.mark.parametrize(("method", "path", "body", "param"), [
    ("POST", "/v1/conversations", {"metadata": {"k": 1}}, "metadata.k"),
    ("POST", "/v1/conversations", {"items": "hello"}, "items"),
    ("POST", "/v1/conversations", {"items": [{"type": "file_search_call"}]}, "items[0].type"),
    ("POST", "/v1/conversations", {"items": [{"role": "user", "content": "a", "id": "msg_1"},
                                             {"role": "user", "content": "b", "id": "msg_1"}]}, "items[1].id"),
    ("POST", "/v1/conversations", {"items": [{"role": "user", "content": "x"}] * 21}, "items"),
    ("POST", "/v1/conversations/{id}", {}, "metadata"),
    ("POST", "/v1/conversations/{id}/items", {"items": []}, "items"),
    ("GET", "/v1/conversations/{id}/items?limit=0", None, "limit"),
    ("GET", "/v1/conversations/{id}/items?order=sideways", None, "order"),
    ("GET", "/v1/conversations/{id}/items?include=nope", None, "include"),
])
async def test_malformed_requests_are_400_naming_the_field(client: Any, method: str, path: str, body: Any,
                                                           param: str) -> None:
    created = await (await client.post("/v1/conversations", json={}, headers=AUTH)).json()
    response = await client.request(method, path.replace("{id}", created["id"]), json=body, headers=AUTH)
    assert response.status == 400, await response.text()
    assert_error_envelope(await response.json(), param=param)


async def test_unknown_ids_are_404s_in_the_openai_envelope(client: Any) -> None:
    created = await (await client.post("/v1/conversations", json={}, headers=AUTH)).json()
    for method, path, param in [
        ("GET", "/v1/conversations/conv_nope", "conversation_id"),
        ("POST", "/v1/conversations/conv_nope/items", "conversation_id"),
        ("GET", "/v1/conversations/conv_nope/items", "conversation_id"),
        ("GET", f"/v1/conversations/{created['id']}/items/msg_nope", "item_id"),
        ("DELETE", f"/v1/conversations/{created['id']}/items/msg_nope", "item_id"),
        ("GET", f"/v1/conversations/{created['id']}/items?after=msg_nope", "after"),
    ]:
        body = {"items": [{"role": "user", "content": "x"}]} if method == "POST" else None
        response = await client.request(method, path, json=body, headers=AUTH)
        assert response.status == 404, (method, path)
        assert_error_envelope(await response.json(), param=param)


async def test_an_input_item_already_in_the_conversation_is_a_400_before_the_model_runs(
        client: Any, upstream: Any) -> None:
    created = await (await client.post("/v1/conversations", json={
        "items": [{"id": "msg_mine", "role": "user", "content": "x"}]}, headers=AUTH)).json()
    response = await client.post("/v1/responses", headers=AUTH, json={
        "conversation": created["id"], "input": [{"id": "msg_mine", "role": "user", "content": "again"}]})
    assert response.status == 400
    assert_error_envelope(await response.json(), param="input[0].id")
    assert upstream.requests == []


async def test_two_turns_racing_on_one_conversation_keep_one_and_tell_the_other_to_retry(
        client: Any, upstream: Any) -> None:
    created = await (await client.post("/v1/conversations", json={}, headers=AUTH)).json()
    upstream.queue(text("A.", delay=0.2), text("B.", delay=0.2))
    responses = await asyncio.gather(*(
        client.post("/v1/responses", json={"input": said, "conversation": created["id"]}, headers=AUTH)
        for said in ("a", "b")))
    statuses = sorted(r.status for r in responses)
    assert statuses == [200, 409]
    loser = next(r for r in responses if r.status == 409)
    assert (await loser.json())["error"]["code"] == "conversation_conflict"
    listed = await (await client.get(f"/v1/conversations/{created['id']}/items?order=asc", headers=AUTH)).json()
    assert len(listed["data"]) == 2  # one turn: its input and its answer


async def test_an_unknown_route_under_v1_is_a_404_naming_it(client: Any) -> None:
    response = await client.get("/v1/assistants?secret=x", headers=AUTH)
    body = await response.json()
    assert response.status == 404
    assert body["error"]["message"].startswith("Invalid URL (GET /v1/assistants)")
    assert "lives under /v1" not in body["error"]["message"] and "secret" not in json.dumps(body)
    outside = await (await client.get("/chat/completions", headers=AUTH)).json()
    assert "lives under /v1" in outside["error"]["message"] and "/chat/completions" in outside["error"]["message"]


async def test_every_kind_of_item_a_conversation_keeps_matches_openapi_json(sdk: Any, upstream: Any) -> None:
    components = json.loads(openapi_document())["components"]

    def check(schema: str, value: Any) -> None:
        Draft202012Validator({"$ref": f"#/components/schemas/{schema}", "components": components}).validate(value)

    conversation = await sdk.conversations.create(items=[
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "replayed"}]},
        {"type": "function_call_output", "call_id": "call_0", "output": [{"type": "input_text", "text": "42"}]}])
    upstream.queue(tool_call(("web_search", {"query": "otter diet"}), reasoning="Let me look."),
                   text("Otters eat fish.", reasoning="Found it."),
                   tool_call(("get_weather", {"city": "Oslo"})))
    await sdk.responses.create(model="m", input="otters?", conversation=conversation.id,
                               tools=[{"type": "web_search"}], include=["web_search_call.action.sources"])
    oslo = [{"role": "user", "content": [{"type": "input_text", "text": "Oslo?"}]}]
    await sdk.responses.create(model="m", input=oslo, conversation=conversation.id,
                               tools=[{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}])
    raw = await sdk.conversations.items.with_raw_response.list(conversation.id, order="asc", limit=100)
    listed = json.loads(raw.text)
    check("ConversationItemList", listed)
    kinds = {item["type"] for item in listed["data"]}
    assert kinds == {"message", "reasoning", "function_call", "function_call_output", "web_search_call"}, kinds
    for item in listed["data"]:
        got = await sdk.conversations.items.with_raw_response.retrieve(item["id"], conversation_id=conversation.id)
        check("ConversationItem", json.loads(got.text))
    check("Conversation", json.loads((await sdk.conversations.with_raw_response.retrieve(conversation.id)).text))
    check("ConversationDeleted", json.loads((await sdk.conversations.with_raw_response.delete(conversation.id)).text))


@pytest.mark.parametrize("limit", ["1_0", "%D9%A5", "+5", "%205", "5.0", "",
                                   pytest.param("9" * 5000, id="5000 digits")])
async def test_a_limit_that_is_not_plain_digits_is_a_400(client: Any, limit: str) -> None:
    # int() would take "1_0" as 10 and an Arabic-Indic five as 5; the document says an integer
    created = await (await client.post("/v1/conversations", json={}, headers=AUTH)).json()
    response = await client.get(f"/v1/conversations/{created['id']}/items?limit={limit}", headers=AUTH)
    assert response.status == 400, limit
    assert_error_envelope(await response.json(), param="limit")


async def test_a_search_items_sources_are_kept_and_shown_when_a_listing_includes_them(
        sdk: Any, upstream: Any, searxng_server: FakeSearxng) -> None:  # noqa: F811
    """The turn did not ask for sources; the conversation keeps them anyway, and a listing or a
    fetch with `include=["web_search_call.action.sources"]` shows them, as OpenAI's does."""
    conversation = await sdk.conversations.create()
    upstream.queue(tool_call(("web_search", {"query": "otter diet"})), text("Otters eat fish."))
    created = await sdk.responses.create(model="m", input="otters?", conversation=conversation.id)
    assert created.output[0].type == "web_search_call" and created.output[0].action.sources is None
    plain = await sdk.conversations.items.list(conversation.id, order="asc")
    assert plain.data[1].type == "web_search_call" and plain.data[1].action.sources is None
    included = await sdk.conversations.items.list(conversation.id, order="asc",
                                                  include=["web_search_call.action.sources"])
    urls = [source.url for source in included.data[1].action.sources]
    assert urls[:2] == ["https://example.org/1", "https://example.org/2"]
    one = await sdk.conversations.items.retrieve(plain.data[1].id, conversation_id=conversation.id,
                                                 include=["web_search_call.action.sources"])
    assert [source.url for source in one.action.sources] == urls


async def test_a_responses_input_items_listing_takes_include_as_openai_s_does(sdk: Any, client: Any,
                                                                               upstream: Any) -> None:
    upstream.queue(text("Hi."))
    created = await sdk.responses.create(model="m", input="hello")
    listed = await sdk.responses.input_items.list(created.id, include=["web_search_call.action.sources"])
    assert [item.type for item in listed.data] == ["message"]
    response = await client.get(f"/v1/responses/{created.id}/input_items?include=nope", headers=AUTH)
    assert response.status == 400
    assert_error_envelope(await response.json(), param="include")


async def test_a_retried_create_or_append_with_an_idempotency_key_is_done_once(client: Any) -> None:
    headers = {**AUTH, "Idempotency-Key": "create-1"}
    first = await client.post("/v1/conversations", json={"metadata": {"k": "v"}}, headers=headers)
    again = await client.post("/v1/conversations", json={"metadata": {"k": "v"}}, headers=headers)
    assert first.status == again.status == 200 and again.headers.get("Idempotent-Replayed") == "true"
    conversation = await first.json()
    assert (await again.json())["id"] == conversation["id"]
    path = f"/v1/conversations/{conversation['id']}/items"
    body = {"items": [{"role": "user", "content": "once"}]}
    for _ in range(2):
        response = await client.post(path, json=body, headers={**AUTH, "Idempotency-Key": "append-1"})
        assert response.status == 200
    listed = await (await client.get(path, headers=AUTH)).json()
    assert [item["content"][0]["text"] for item in listed["data"]] == ["once"]
