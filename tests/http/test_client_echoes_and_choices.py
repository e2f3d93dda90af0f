"""Issue 25's Low findings: tool_choice types the gateway cannot honour are a 400 (both APIs), error
messages repeat at most 200 characters of a client's value, and a streamed turn that loses a
conversation race ends `response.failed` with code `conversation_conflict`."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from tests.fakes.upstream import text
from tests.support.helpers import assert_error_envelope, sse_frames

FUNCTION_TOOL = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}
CHAT_TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
HUGE = "t" * 10_000


@pytest.fixture
async def client(make_client: Any) -> Any:
    return await make_client(tools=[])


@pytest.mark.parametrize(("choice", "param"), [
    ({"type": "file_search"}, "tool_choice"), ({"type": HUGE}, "tool_choice"),
    ({"type": "code_interpreter"}, "tool_choice"),
    ("sometimes", "tool_choice"), (HUGE, "tool_choice"),
    # an mcp choice must name an mcp tool of the request (tests/http/test_mcp_tool_choice.py)
    ({"type": "mcp", "server_label": "x"}, "tool_choice.server_label"), ({"type": "mcp"}, "tool_choice.server_label")])
async def test_an_unknown_tool_choice_is_a_400_in_the_responses_api(client: Any, upstream: Any, choice: Any,
                                                                    param: str) -> None:
    reply = await client.post("/v1/responses", json={"input": "hi", "tools": [FUNCTION_TOOL], "tool_choice": choice})
    assert reply.status == 400, await reply.text()
    body = await reply.json()
    assert_error_envelope(body, param=param)
    assert len(body["error"]["message"]) < 400
    assert upstream.requests == []  # never stored, never sent upstream


@pytest.mark.parametrize("choice", [{"type": "file_search"}, {"type": "mcp"}, {"type": HUGE}, {"type": "function"},
                                    "sometimes", HUGE, 7])
async def test_an_unknown_tool_choice_is_a_400_in_chat_completions(client: Any, upstream: Any, choice: Any) -> None:
    reply = await client.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "hi"}], "tools": [CHAT_TOOL], "tool_choice": choice})
    assert reply.status == 400, await reply.text()
    body = await reply.json()
    assert body["error"]["param"].startswith("tool_choice") and len(body["error"]["message"]) < 400
    assert upstream.requests == []


@pytest.mark.parametrize(("api", "choice"), [
    ("responses", "none"), ("responses", "auto"), ("responses", "required"),
    ("responses", {"type": "function", "name": "lookup"}), ("responses", {"type": "web_search"}),
    ("responses", {"type": "web_search_preview"}),
    ("chat", "none"), ("chat", "auto"), ("chat", "required"),
    ("chat", {"type": "function", "function": {"name": "lookup"}}),
])
async def test_the_tool_choices_openai_documents_are_accepted(
        client: Any, upstream: Any, api: str, choice: Any) -> None:
    upstream.queue(text("fine"))
    if api == "responses":
        reply = await client.post("/v1/responses", json={"input": "hi", "tool_choice": choice,
                                                         "tools": [FUNCTION_TOOL, {"type": "web_search"}]})
    else:
        reply = await client.post("/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "hi"}], "tools": [CHAT_TOOL], "tool_choice": choice})
    assert reply.status == 200, await reply.text()


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/v1/responses", {"input": "hi", "include": [HUGE]}),
    ("POST", "/v1/responses", {"input": [{"type": HUGE}]}),
    ("POST", "/v1/responses", {"input": [{"role": "user", "content": [{"type": HUGE}]}]}),
    ("POST", "/v1/responses", {"input": "hi", "tools": [{"type": HUGE}]}),
    ("POST", "/v1/responses", {"input": "hi",
                               "tools": [{"type": "web_search", "filters": {"allowed_domains": [HUGE]}}]}),
    ("GET", "/v1/models/" + "m" * 5000, None),
    ("GET", "/v1/conversations/conv_x/items?include=" + "i" * 5000, None),
])
async def test_an_error_message_repeats_at_most_200_characters_of_a_client_value(
        client: Any, method: str, path: str, body: Any) -> None:
    reply = await client.request(method, path, json=body)
    assert 400 <= reply.status < 500
    message = (await reply.json())["error"]["message"]
    longest_run = max(len(run) for run in re.findall(r"t+|m+|i+", message))
    assert longest_run <= 200, message[:500]


async def test_a_streamed_turn_that_loses_a_conversation_race_fails_with_conversation_conflict(
        client: Any, upstream: Any) -> None:
    conversation = (await (await client.post("/v1/conversations", json={})).json())["id"]
    # the stream's model answer trickles; the other turn's answer comes at once
    upstream.queue(text("a slow streamed answer", chunk_size=2, chunk_delay=0.05), text("quick"))
    streamed = await client.post("/v1/responses", json={"input": "a", "conversation": conversation, "stream": True})
    assert streamed.status == 200
    await streamed.content.readany()  # the stream has started
    quick = await client.post("/v1/responses", json={"input": "b", "conversation": conversation})
    assert quick.status == 200  # stored first: the stream's turn lost the race
    async with asyncio.timeout(30):
        frames = sse_frames((await streamed.read()).decode())
    name, payload = frames[-1]
    assert name == "response.failed"
    assert json.loads(payload)["response"]["error"]["code"] == "conversation_conflict"
