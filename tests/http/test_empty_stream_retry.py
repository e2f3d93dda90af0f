"""A streamed upstream reply that ends before its first frame is asked for again, whole (issue 48,
item 9): llama-cpp-python's server with `chat_format: chatml-function-calling` answers a streamed
request that carries tools with an empty 200 event stream, and the same request unstreamed
properly. A stream that dies after its first frame still fails as before."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from tests.fakes.upstream import Reply, text, tool_call
from tests.support.helpers import chat_chunks, sse_frames, streamed_text

WEATHER_CHAT = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}
WEATHER_RESPONSES = {"type": "function", "name": "get_weather",
                     "parameters": WEATHER_CHAT["function"]["parameters"]}


def events(body: str) -> list[dict[str, Any]]:
    return [json.loads(data) for _, data in sse_frames(body)]


@pytest.fixture
def llama_cpp(upstream: Any) -> Any:
    upstream.empty_stream_with_tools = True
    return upstream


async def test_chat_stream_with_tools_from_a_server_that_streams_nothing_is_answered(client, llama_cpp, caplog):
    llama_cpp.queue(text("Sunny, 21 degrees."))
    with caplog.at_level(logging.DEBUG, logger="agent_gateway.agent"):
        resp = await client.post("/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": [WEATHER_CHAT], "stream": True})
        body = await resp.text()
    assert resp.status == 200
    chunks = chat_chunks(body)
    assert streamed_text(chunks) == "Sunny, 21 degrees."
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert [(r["stream"], bool(r.get("tools"))) for r in llama_cpp.requests] == [(True, True), (False, True)]
    assert any("asking again unstreamed" in r.getMessage() for r in caplog.records)


async def test_responses_stream_with_tools_from_a_server_that_streams_nothing_streams_the_call(client, llama_cpp):
    llama_cpp.queue(tool_call(("get_weather", {"city": "Oslo"})))
    resp = await client.post("/v1/responses", json={"input": "Weather in Oslo?", "tools": [WEATHER_RESPONSES],
                                                    "stream": True})
    assert resp.status == 200
    seen = events(await resp.text())
    kinds = [e["type"] for e in seen]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.done" in kinds
    [call] = seen[-1]["response"]["output"]
    assert (call["type"], call["name"], json.loads(call["arguments"])) == ("function_call", "get_weather",
                                                                          {"city": "Oslo"})


async def test_every_round_of_an_agent_turn_is_asked_again_when_its_stream_is_empty(client, llama_cpp, lookup_tool):
    # the gateway's own tools go upstream with every round: each streamed round comes back empty
    llama_cpp.queue(tool_call(("lookup", {"term": "Oslo"})), text("Found it."))
    resp = await client.post("/v1/responses", json={"input": "Look up Oslo", "stream": True})
    assert resp.status == 200
    last = events(await resp.text())[-1]
    assert last["type"] == "response.completed"
    assert last["response"]["output"][-1]["content"][0]["text"] == "Found it."
    assert lookup_tool.calls == [{"term": "Oslo"}]
    assert [r["stream"] for r in llama_cpp.requests] == [True, False, True, False]


@pytest.mark.parametrize("transport", ["auto", "aiohttp"])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
async def test_a_stream_closed_before_its_first_frame_is_asked_again_unstreamed(make_client, upstream, path,
                                                                                 transport):
    client = await make_client(llm_http_client=transport)
    upstream.queue(Reply(drop_after=0, body_delay=0.01), text("Here."))
    body: dict[str, Any] = ({"messages": [{"role": "user", "content": "hi"}]} if path.endswith("completions")
                            else {"input": "hi"})
    resp = await client.post(path, json={**body, "stream": True})
    assert resp.status == 200
    answer = await resp.text()
    if path.endswith("completions"):
        assert streamed_text(chat_chunks(answer)) == "Here."
    else:
        assert events(answer)[-1]["type"] == "response.completed"
    assert [r["stream"] for r in upstream.requests] == [True, False]


async def test_a_stream_that_dies_after_its_first_frame_is_not_asked_again(client, upstream):
    upstream.queue(text("A long answer that is cut", drop_after=2), text("never asked for"))
    resp = await client.post("/v1/responses", json={"input": "hi", "stream": True})
    last = events(await resp.text())[-1]
    assert last["type"] == "response.failed"
    assert len(upstream.requests) == 1
    stored = await client.get(f"/v1/responses/{last['response']['id']}")
    assert (await stored.json())["status"] == "failed"
