"""What a real server (llama-cpp-python 0.3.36) sends and wants, replayed through the fake upstream:
each test is one of the defects a run against it showed (issue 26), and issue 25's `tool_choice:
"none"`. The bytes are in tests/fakes/llama_cpp_replies.py; tests/real_upstream/ runs the server.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from tests.fakes.llama_cpp_replies import (
    EMPTY_STREAM,
    FORCED_CALL_ARGUMENTS,
    FORCED_CALL_STREAM,
    TEXT_STREAM,
    TEXT_STREAM_CUT,
    stream,
)
from tests.fakes.searxng import searxng_server  # noqa: F401
from tests.fakes.upstream import Reply, text, tool_call
from tests.support.helpers import assert_error_envelope, chat_chunks, sse_frames

USER = [{"role": "user", "content": "Weather in Oslo?"}]
CITY = {"type": "object", "properties": {"city": {"type": "string"}}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
                                            "parameters": CITY}}
WEATHER_RESPONSES = {"type": "function", "name": "get_weather", "parameters": WEATHER["function"]["parameters"]}


def events(body: str) -> list[dict[str, Any]]:
    return [json.loads(data) for _, data in sse_frames(body) if data != "[DONE]"]


# ---- 1. a streamed tool call whose every fragment repeats the name ---------------------------


async def test_a_streamed_client_call_whose_fragments_repeat_the_name_has_the_name_once(client, upstream):
    upstream.queue(stream(FORCED_CALL_STREAM))
    resp = await client.post("/v1/chat/completions", json={"messages": USER, "tools": [WEATHER], "stream": True})
    assert resp.status == 200
    calls = [d for c in chat_chunks(await resp.text()) for d in c["choices"][0]["delta"].get("tool_calls", [])]
    assert calls[0]["function"]["name"] == "get_weather"  # not get_weatherget_weatherget_weather
    assert calls[0]["id"].startswith("call__0_get_weather_cmpl-")
    assert "".join(c["function"]["arguments"] for c in calls) == FORCED_CALL_ARGUMENTS


async def test_a_streamed_call_to_an_agent_tool_whose_fragments_repeat_the_name_runs_that_tool(
        client, upstream, lookup_tool):
    upstream.queue(stream(FORCED_CALL_STREAM.replace(b"get_weather", b"lookup").replace(b"city", b"term")),
                   text("Done."))
    resp = await client.post("/v1/chat/completions", json={"messages": USER, "stream": True})
    assert resp.status == 200
    await resp.text()
    assert lookup_tool.calls == [{"term": "Oslo"}]
    call = upstream.requests[1]["messages"][-2]["tool_calls"][0]
    assert call["function"] == {"name": "lookup", "arguments": FORCED_CALL_ARGUMENTS.replace("city", "term")}


async def test_a_responses_function_call_from_repeated_name_fragments_has_the_name_once(client, upstream):
    upstream.queue(stream(FORCED_CALL_STREAM))
    resp = await client.post("/v1/responses", json={"input": "Weather in Oslo?", "tools": [WEATHER_RESPONSES],
                                                    "stream": True})
    assert resp.status == 200
    [item] = events(await resp.text())[-1]["response"]["output"]
    assert (item["type"], item["name"], item["arguments"]) == ("function_call", "get_weather", FORCED_CALL_ARGUMENTS)


# ---- 2. a stream that ends before its end ----------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
async def test_an_empty_stream_is_asked_again_unstreamed_and_its_answer_streamed(client, upstream, caplog, path):
    upstream.queue(stream(EMPTY_STREAM), text("Sunny in Oslo."))
    body: dict[str, Any] = {"messages": USER} if path.endswith("completions") else {"input": "Weather in Oslo?"}
    with caplog.at_level(logging.DEBUG, logger="agent_gateway.agent"):
        resp = await client.post(path, json={**body, "stream": True})
        answer = await resp.text()
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    if path.endswith("completions"):
        chunks = chat_chunks(answer)
        assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == \
            "Sunny in Oslo."
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    else:
        last = events(answer)[-1]
        assert last["type"] == "response.completed"
        assert last["response"]["output"][-1]["content"][0]["text"] == "Sunny in Oslo."
    assert [r.get("stream") for r in upstream.requests] == [True, False]
    assert any("before its first frame" in r.getMessage() and r.levelno == logging.DEBUG for r in caplog.records)


async def test_an_empty_stream_whose_unstreamed_retry_fails_is_that_failure(client, upstream):
    upstream.queue(stream(EMPTY_STREAM), Reply(status=500, error_body={"error": {"message": "template failed"}}))
    resp = await client.post("/v1/chat/completions", json={"messages": USER, "stream": True})
    assert resp.status == 502
    assert_error_envelope(await resp.json(), code="upstream_error")
    assert "template failed" in (await resp.json())["error"]["message"]
    assert len(upstream.requests) == 2  # asked again once, not more


async def test_a_chat_stream_cut_after_its_first_text_ends_in_an_error_frame(client, upstream, caplog):
    upstream.queue(stream(TEXT_STREAM_CUT))
    with caplog.at_level(logging.WARNING, logger="agent_gateway"):
        resp = await client.post("/v1/chat/completions", json={"messages": USER, "stream": True})
        body = await resp.text()
    assert resp.status == 200  # the first text was on its way
    frames = [data for _, data in sse_frames(body)]
    assert frames[-1] == "[DONE]"
    error = json.loads(frames[-2])
    assert error["error"]["code"] == "upstream_stream_cut"
    assert not any('"finish_reason":"stop"' in f for f in frames)  # not a finished answer
    assert any("failed mid-stream" in r.getMessage() for r in caplog.records)


async def test_a_responses_stream_cut_after_its_first_text_ends_in_response_failed(client, upstream):
    upstream.queue(stream(TEXT_STREAM_CUT))
    resp = await client.post("/v1/responses", json={"input": "hi", "stream": True})
    assert resp.status == 200
    last = events(await resp.text())[-1]
    assert last["type"] == "response.failed"
    error = last["response"]["error"]
    assert error["code"] == "server_error"  # the Responses API's closed set of codes
    assert "ended its stream unfinished" in error["message"]


# ---- 3. no usage from the server is unknown usage, not zero ----------------------------------


async def test_chat_without_upstream_usage_reports_none_rather_than_zeros(client, upstream):
    upstream.queue(stream(TEXT_STREAM))
    resp = await client.post("/v1/chat/completions", json={"messages": USER, "stream": True,
                                                           "stream_options": {"include_usage": True}})
    chunks = chat_chunks(await resp.text())
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"  # no usage chunk after it
    assert all("usage" not in c for c in chunks)
    # a whole reply without `usage` (optional in OpenAI's ChatCompletion) leaves it out too
    upstream.queue(Reply(raw=json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                                         "choices": [{"index": 0, "finish_reason": "stop",
                                                      "message": {"role": "assistant", "content": "Hi"}}]}).encode()))
    resp = await client.post("/v1/chat/completions", json={"messages": USER})
    assert resp.status == 200
    assert "usage" not in await resp.json()


async def test_a_response_without_upstream_usage_has_usage_null(client, upstream):
    upstream.queue(stream(TEXT_STREAM))
    resp = await client.post("/v1/responses", json={"input": "hi", "stream": True})
    response = events(await resp.text())[-1]["response"]
    assert response["status"] == "incomplete"  # finish_reason "length"
    assert response["usage"] is None  # Optional in the SDK's Response: unknown, not 0 tokens
    stored = await (await client.get(f"/v1/responses/{response['id']}")).json()
    assert stored["usage"] is None


async def test_a_turn_in_which_one_round_reported_no_usage_reports_none(client, upstream, lookup_tool):
    upstream.queue(tool_call(("lookup", {"term": "x"})), stream(TEXT_STREAM))
    resp = await client.post("/v1/chat/completions", json={"messages": USER, "stream": True,
                                                           "stream_options": {"include_usage": True}})
    chunks = chat_chunks(await resp.text())
    assert chunks[-1]["choices"][0]["finish_reason"] == "length" and lookup_tool.calls == [{"term": "x"}]
    assert all("usage" not in c for c in chunks)  # round one's 15 tokens are not the turn's usage


# ---- 4. the gateway's own tool-round message -------------------------------------------------


async def test_the_tool_round_message_has_string_content_as_every_server_accepts(client, upstream, lookup_tool):
    upstream.queue(tool_call(("lookup", {"term": "x"})), text("Done."))
    await client.post("/v1/chat/completions", json={"messages": USER})
    assistant = upstream.requests[1]["messages"][-2]
    # llama-cpp-python answers a null content 500 ("Input should be a valid string"), Ollama 400
    assert assistant["role"] == "assistant" and assistant["content"] == "" and assistant["tool_calls"]


async def test_a_client_s_own_call_message_with_null_content_goes_upstream_as_a_string(client, upstream):
    history = [*USER, {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]
    await client.post("/v1/chat/completions", json={"messages": history, "tools": [WEATHER]})
    assert upstream.requests[0]["messages"][-2]["content"] == ""
    await client.post("/v1/responses", json={"tools": [WEATHER_RESPONSES], "input": [
        {"role": "user", "content": "Weather?"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"}]})
    assert upstream.requests[1]["messages"][-2]["content"] == ""


# ---- 5. tool_choice said, not left to the server ---------------------------------------------


async def test_offered_tools_go_with_tool_choice_auto_when_the_client_said_nothing(client, upstream):
    await client.post("/v1/chat/completions", json={"messages": USER})
    await client.post("/v1/chat/completions", json={"messages": USER, "tools": [WEATHER],
                                                    "tool_choice": "required"})
    await client.post("/v1/responses", json={"input": "hi", "tools": [WEATHER_RESPONSES]})
    auto, required, responses = upstream.requests
    assert [t["function"]["name"] for t in auto["tools"]] == ["lookup"] and auto["tool_choice"] == "auto"
    assert required["tool_choice"] == "required"  # the client's own choice stands
    assert responses["tool_choice"] == "auto"


# ---- 6. one system message: see tests/http/test_chat_basic.py and test_responses_api.py -------


async def test_instructions_and_developer_input_join_the_one_system_message(client, upstream):
    await client.post("/v1/responses", json={"instructions": "Be brief.", "input": [
        {"role": "developer", "content": "Answer in French."}, {"role": "user", "content": "hi"}]})
    messages = upstream.requests[0]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"].endswith("\n\nBe brief.\n\nAnswer in French.")


# ---- 7. (issue 25) tool_choice "none": no tool at all ----------------------------------------


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
async def test_tool_choice_none_offers_no_tools_and_runs_no_search(make_client, upstream, searxng_server,  # noqa: F811
                                                                   path):
    client = await make_client(env={"SEARXNG_URL": searxng_server.base_url})
    # a server that calls web_search anyway must not get a search run for it
    upstream.queue(tool_call(("web_search", {"query": "secret plans"})), text("No."))
    chat = path.endswith("completions")
    body: dict[str, Any] = {"messages": USER} if chat else {"input": "Weather?", "tools": [{"type": "web_search"}]}
    if chat:
        body["web_search_options"] = {}
    resp = await client.post(path, json={**body, "tool_choice": "none"})
    assert resp.status == 200
    first = upstream.requests[0]
    assert "tools" not in first and "tool_choice" not in first
    assert searxng_server.requests == []


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
async def test_tool_choice_none_with_client_tools_sends_them_with_none(client, upstream, lookup_tool, path):
    chat = path.endswith("completions")
    body: dict[str, Any] = ({"messages": USER, "tools": [WEATHER]} if chat
                            else {"input": "Weather?", "tools": [WEATHER_RESPONSES]})
    resp = await client.post(path, json={**body, "tool_choice": "none"})
    assert resp.status == 200
    first = upstream.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather"]  # no lookup
    assert first["tool_choice"] == "none"
