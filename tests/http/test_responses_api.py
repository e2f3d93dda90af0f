"""/v1/responses through the official openai SDK: create, chain, stream, store, retrieve, delete."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from tests.fakes.upstream import text, tool_call
from tests.support.helpers import assert_error_envelope, sse_frames

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def sdk_for(client: Any) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="unused", max_retries=0)


@pytest.fixture
async def sdk(client: Any) -> AsyncIterator[AsyncOpenAI]:
    async with sdk_for(client) as oai:
        yield oai


def conversation_sent(upstream: Any, index: int = -1) -> list[tuple[str, Any]]:
    """(role, content) of what the upstream received, the agent's own system prompt left out."""
    messages = upstream.requests[index]["messages"]
    return [(m["role"], m.get("content")) for m in messages[1:]]


async def test_create_retrieve_delete(sdk: AsyncOpenAI, upstream: Any) -> None:
    upstream.queue(text("Paris.", usage=(11, 2)))
    created = await sdk.responses.create(model="agent", input="Capital of France?", metadata={"k": "v"})
    assert created.id.startswith("resp_") and created.object == "response"
    assert created.status == "completed" and created.output_text == "Paris."
    assert created.model == "agent" and created.metadata == {"k": "v"}
    assert created.usage is not None and (created.usage.input_tokens, created.usage.total_tokens) == (11, 13)
    [message] = created.output
    assert message.type == "message" and message.id.startswith("msg_")

    retrieved = await sdk.responses.retrieve(created.id)
    assert retrieved.model_dump() == created.model_dump()

    deleted = await sdk.responses.with_raw_response.delete(created.id)
    assert json.loads(deleted.content) == {"id": created.id, "object": "response.deleted", "deleted": True}
    with pytest.raises(openai.NotFoundError):
        await sdk.responses.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        await sdk.responses.delete(created.id)


async def test_instructions_reach_the_model_but_are_not_carried_over(sdk: AsyncOpenAI, upstream: Any) -> None:
    first = await sdk.responses.create(model="m", input="one", instructions="Answer in French.")
    system = upstream.requests[-1]["messages"][0]  # the one system message: the gateway's prompt, then them
    assert system["role"] == "system" and system["content"].endswith("\n\nAnswer in French.")
    assert conversation_sent(upstream) == [("user", "one")]
    await sdk.responses.create(model="m", input="two", previous_response_id=first.id)
    assert "French" not in json.dumps(upstream.requests[-1]["messages"])


async def test_chain_of_three_through_previous_response_id_sends_the_whole_history(
    sdk: AsyncOpenAI, upstream: Any
) -> None:
    upstream.queue(text("A1"), text("A2"), text("A3"))
    first = await sdk.responses.create(model="m", input="Q1")
    second = await sdk.responses.create(model="m", input="Q2", previous_response_id=first.id)
    third = await sdk.responses.create(model="m", input="Q3", previous_response_id=second.id)
    assert third.previous_response_id == second.id and third.output_text == "A3"
    assert conversation_sent(upstream) == [
        ("user", "Q1"), ("assistant", "A1"), ("user", "Q2"), ("assistant", "A2"), ("user", "Q3"),
    ]
    # Each record keeps its own turn: a deleted ancestor ends the chain there, and the turn
    # continues with what is left (store/api.py), not a 404.
    await sdk.responses.delete(first.id)
    await sdk.responses.create(model="m", input="Q4", previous_response_id=third.id)
    assert [c for _, c in conversation_sent(upstream)] == ["Q2", "A2", "Q3", "A3", "Q4"]


async def test_chain_of_three_through_a_named_conversation(sdk: AsyncOpenAI, upstream: Any) -> None:
    upstream.queue(text("A1"), text("A2"), text("A3"), text("B1"))
    for question in ("Q1", "Q2", "Q3"):
        reply = await sdk.responses.create(model="m", input=question, conversation="chat-7")
        assert reply.conversation is not None and reply.conversation.id == "chat-7"
    assert conversation_sent(upstream) == [
        ("user", "Q1"), ("assistant", "A1"), ("user", "Q2"), ("assistant", "A2"), ("user", "Q3"),
    ]
    await sdk.responses.create(model="m", input="other", extra_body={"conversation": {"id": "chat-8"}})
    assert conversation_sent(upstream) == [("user", "other")]


async def test_unknown_previous_response_is_404(client: Any) -> None:
    resp = await client.post("/v1/responses", json={"input": "x", "previous_response_id": "resp_nope"})
    assert resp.status == 404
    assert_error_envelope(await resp.json(), code="previous_response_not_found", param="previous_response_id")


async def test_previous_response_id_with_conversation_is_400(sdk: AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk.responses.create(model="m", input="x", previous_response_id="resp_1", conversation="c")
    assert caught.value.param == "previous_response_id"


async def test_gateway_tool_calls_are_web_search_call_items_and_the_model_keeps_their_results(
    sdk: AsyncOpenAI, upstream: Any, lookup_tool: Any
) -> None:
    upstream.queue(tool_call(("lookup", {"term": "sky"})), text("It is green."), text("Yes."))
    first = await sdk.responses.create(model="m", input="Sky colour?")
    assert [item.type for item in first.output] == ["web_search_call", "message"]
    assert first.output[0].status == "completed" and first.output[0].id.startswith("ws_")
    assert lookup_tool.calls == [{"term": "sky"}]

    await sdk.responses.create(model="m", input="Sure?", previous_response_id=first.id)
    sent = upstream.requests[-1]["messages"][1:]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "lookup"
    assert sent[2]["tool_call_id"] == sent[1]["tool_calls"][0]["id"] and "the sky is green" in sent[2]["content"]


async def test_client_tool_call_goes_back_and_its_output_continues_the_turn(
    sdk: AsyncOpenAI, upstream: Any
) -> None:
    upstream.queue(tool_call(("get_weather", {"city": "Oslo"})), text("Oslo: 3C."))
    first = await sdk.responses.create(model="m", input="Weather in Oslo?", tools=[WEATHER_TOOL])
    [call] = first.output
    assert call.type == "function_call" and call.name == "get_weather" and call.status == "completed"
    assert upstream.requests[-1]["tools"][-1]["function"]["name"] == "get_weather"

    second = await sdk.responses.create(
        model="m", previous_response_id=first.id, tools=[WEATHER_TOOL],
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "3C"}],
    )
    assert second.output_text == "Oslo: 3C."
    sent = upstream.requests[-1]["messages"][1:]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["tool_calls"][0]["id"] == call.call_id
    assert sent[2] == {"role": "tool", "tool_call_id": call.call_id, "content": "3C"}


async def test_sdk_stream_helper_gets_events_in_order_and_the_final_response(
    sdk: AsyncOpenAI, upstream: Any
) -> None:
    upstream.queue(text("Streaming answer here.", chunk_size=5))
    async with sdk.responses.stream(model="m", input="hi") as stream:
        kinds = [event.type async for event in stream]
        final = await stream.get_final_response()
    assert kinds[:4] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
    ]
    assert set(kinds[4:-4]) == {"response.output_text.delta"} and len(kinds[4:-4]) == 5
    assert kinds[-4:] == [
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.completed",
    ]
    assert final.output_text == "Streaming answer here." and final.status == "completed"
    stored = await sdk.responses.retrieve(final.id)
    assert stored.output_text == final.output_text


async def test_raw_stream_frames_carry_event_lines_and_no_done(client: Any, upstream: Any) -> None:
    upstream.queue(tool_call(("lookup", {"term": "x"})), text("ok"))
    resp = await client.post("/v1/responses", json={"input": "q", "stream": True})
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    frames = sse_frames(await resp.text())
    assert all(name == json.loads(data)["type"] for name, data in frames)
    assert "[DONE]" not in [data for _, data in frames]
    events = [json.loads(data) for _, data in frames]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["item"]["type"] for e in events if e["type"] == "response.output_item.done"] == [
        "web_search_call", "message",
    ]


async def test_lru_bound_evicts_the_least_recently_used(make_client: Any, upstream: Any) -> None:
    client = await make_client(tools=[], max_stored_responses=2)
    async with sdk_for(client) as sdk:
        a = await sdk.responses.create(model="m", input="a")
        b = await sdk.responses.create(model="m", input="b")
        await sdk.responses.retrieve(a.id)  # a is now more recent than b
        await sdk.responses.create(model="m", input="c")
        await sdk.responses.retrieve(a.id)
        with pytest.raises(openai.NotFoundError):
            await sdk.responses.retrieve(b.id)


async def test_a_conversation_whose_head_was_evicted_starts_afresh(make_client: Any, upstream: Any) -> None:
    client = await make_client(tools=[], max_stored_responses=2)
    upstream.queue(*(text(answer) for answer in ("A1", "A2", "O", "A3", "U", "G", "A4")))
    async with sdk_for(client) as sdk:
        await sdk.responses.create(model="m", input="Q1", conversation="kept")
        await sdk.responses.create(model="m", input="Q2", conversation="kept")
        await sdk.responses.create(model="m", input="other")  # evicts Q1's response
        await sdk.responses.create(model="m", input="Q3", conversation="kept")
        # the chain continues with what is left of it
        assert [c for _, c in conversation_sent(upstream)] == ["Q2", "A2", "Q3"]
        await sdk.responses.create(model="m", input="unrelated")
        await sdk.responses.create(model="m", input="again")  # evicts the head (Q3's response)
        await sdk.responses.create(model="m", input="Q4", conversation="kept")
        assert conversation_sent(upstream) == [("user", "Q4")]


async def test_store_false_is_not_kept(sdk: AsyncOpenAI) -> None:
    reply = await sdk.responses.create(model="m", input="x", store=False)
    assert reply.store is False
    with pytest.raises(openai.NotFoundError):
        await sdk.responses.retrieve(reply.id)


async def test_input_items_page_like_openai(sdk: AsyncOpenAI) -> None:
    reply = await sdk.responses.create(model="m", input=[
        {"role": "user", "content": "one"}, {"role": "user", "content": "two"}, {"role": "user", "content": "three"},
    ])
    newest_first = await sdk.responses.input_items.list(reply.id)
    assert [item.content[0].text for item in newest_first.data] == ["three", "two", "one"]
    page = await sdk.responses.input_items.list(reply.id, limit=2, order="asc")
    assert [item.content[0].text for item in page.data] == ["one", "two"] and page.has_more is True
    rest = await sdk.responses.input_items.list(reply.id, limit=2, order="asc", after=page.data[-1].id)
    assert [item.content[0].text for item in rest.data] == ["three"] and rest.has_more is False
    with pytest.raises(openai.BadRequestError):
        await sdk.responses.input_items.list(reply.id, limit=101)


async def test_client_disconnect_mid_stream_stores_an_incomplete_response(client: Any, upstream: Any) -> None:
    upstream.queue(text("word " * 40, chunk_size=5, chunk_delay=0.02))
    resp = await client.post("/v1/responses", json={"input": "long please", "stream": True})
    seen = b""
    while b"response.output_text.delta" not in seen:
        seen += await resp.content.readany()
    response_id = json.loads(sse_frames(seen.decode())[0][1])["response"]["id"]
    resp.close()
    for _ in range(200):
        got = await client.get(f"/v1/responses/{response_id}")
        if got.status == 200:
            body = await got.json()
            break
        await asyncio.sleep(0.02)
    else:
        pytest.fail("the interrupted response was never stored")
    assert body["status"] == "incomplete"
    produced = body["output"][0]["content"][0]["text"]
    assert produced and ("word " * 40).startswith(produced) and len(produced) < len("word " * 40)


async def test_a_broken_store_is_503_for_responses_while_chat_still_works(
    make_client: Any, settings: Any, upstream: Any
) -> None:
    settings.db_path.write_bytes(b"not a database" * 100)
    auth = {"Authorization": "Bearer broken-store-key"}
    client = await make_client(tools=[], api_key="broken-store-key")
    resp = await client.post("/v1/responses", json={"input": "x"}, headers=auth)
    assert resp.status == 503
    body = await resp.json()
    assert_error_envelope(body)
    assert body["error"]["message"] == "The response store is unavailable; retry shortly."
    chat = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]},
                             headers=auth)
    assert chat.status == 200


async def test_a_broken_store_without_api_server_key_is_503_not_open(
    make_client: Any, settings: Any, upstream: Any
) -> None:
    """Issue 42 (keys fail closed): the store may hold keys that cannot be read, so a gateway
    without API_SERVER_KEY serves nobody keyless while it cannot read them."""
    settings.db_path.write_bytes(b"not a database" * 100)
    client = await make_client(tools=[])
    chat = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
    assert chat.status == 503
    assert_error_envelope(await chat.json())
    assert upstream.requests == []


async def test_responses_share_the_chat_concurrency_limit(make_client: Any, upstream: Any) -> None:
    client = await make_client(tools=[], max_concurrent_runs=1)
    upstream.queue(text("slow", delay=0.3))
    running = asyncio.ensure_future(client.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "hi"}]}))
    while not upstream.requests:
        await asyncio.sleep(0.01)
    refused = await client.post("/v1/responses", json={"input": "x"})
    assert refused.status == 429 and "Retry-After" in refused.headers
    assert (await running).status == 200
