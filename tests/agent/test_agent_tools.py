"""The agent loop through Chat Completions: server-side tools, markers, rounds, client tools."""

from __future__ import annotations

import json

import pytest

from tests.fakes.tools import LookupTool
from tests.fakes.upstream import text, tool_call
from tests.support.helpers import chat_chunks, streamed_text

USER = [{"role": "user", "content": "What colour is the sky?"}]


async def test_tool_call_runs_server_side_and_result_reaches_the_model(client, upstream, lookup_tool):
    upstream.queue(tool_call(("lookup", {"term": "sky"})), text("The sky is green, says lookup."))
    resp = await client.post("/v1/chat/completions", json={"messages": USER})
    body = await resp.json()
    assert body["choices"][0]["message"]["content"] == "The sky is green, says lookup."
    assert body["choices"][0]["finish_reason"] == "stop"
    assert lookup_tool.calls == [{"term": "sky"}]
    assert body["usage"]["total_tokens"] == 30  # two upstream rounds summed
    first, second = upstream.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["lookup"]
    assistant, tool_msg = second["messages"][-2:]
    assert assistant["tool_calls"][0]["function"] == {"name": "lookup", "arguments": '{"term": "sky"}'}
    assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == assistant["tool_calls"][0]["id"]
    assert json.loads(tool_msg["content"])["fact"] == "the sky is green"


async def test_stream_shows_inline_marker_before_the_answer(client, upstream):
    upstream.queue(tool_call(("lookup", {"term": "sky colour"})), text("Green."))
    resp = await client.post("/v1/chat/completions", json={"messages": USER, "stream": True})
    content = streamed_text(chat_chunks(await resp.text()))
    assert content == "`🔍 sky colour`\n\nGreen."


async def test_markers_can_be_turned_off(make_client, upstream, lookup_tool):
    client = await make_client(tools=[lookup_tool], tool_progress="off")
    upstream.queue(tool_call(("lookup", {"term": "sky"})), text("Green."))
    resp = await client.post("/v1/chat/completions", json={"messages": USER, "stream": True})
    assert streamed_text(chat_chunks(await resp.text())) == "Green."


async def test_markers_in_returned_history_do_not_reach_the_model(client, upstream):
    history = [*USER, {"role": "assistant", "content": "`🔍 sky colour`\n\n`📄 https://example.com`\n\nGreen."},
               {"role": "user", "content": "Why?"}]
    await client.post("/v1/chat/completions", json={"messages": history})
    assistant = upstream.requests[-1]["messages"][-2]
    assert assistant == {"role": "assistant", "content": "Green."}


async def test_history_with_code_but_no_markers_reaches_the_model_unchanged(client, upstream):
    answer = "Use `retry()`:\n```python\nretry(5)\n```\n`🔍` alone is not a marker line: `x`🔍 neither."
    history = [*USER, {"role": "assistant", "content": answer}, {"role": "user", "content": "And then?"}]
    await client.post("/v1/chat/completions", json={"messages": history})
    assert upstream.requests[-1]["messages"][-2] == {"role": "assistant", "content": answer}


async def test_several_calls_in_one_round_run_in_parallel(make_client, upstream):
    slow = LookupTool(delay=0.2)
    client = await make_client(tools=[slow])
    upstream.queue(tool_call(("lookup", {"term": "a"}), ("lookup", {"term": "b"}), ("lookup", {"term": "c"})),
                   text("done"))
    resp = await client.post("/v1/chat/completions", json={"messages": USER})
    assert resp.status == 200
    assert slow.max_running == 3
    tool_messages = [m for m in upstream.requests[-1]["messages"] if m["role"] == "tool"]
    assert [json.loads(m["content"])["term"] for m in tool_messages] == ["a", "b", "c"]


async def test_failing_tool_becomes_a_tool_error_and_the_turn_completes(make_client, upstream):
    client = await make_client(tools=[LookupTool(fail=True)])
    upstream.queue(tool_call(("lookup", {"term": "x"})), text("I could not look it up."))
    resp = await client.post("/v1/chat/completions", json={"messages": USER})
    assert (await resp.json())["choices"][0]["message"]["content"] == "I could not look it up."
    result = json.loads(upstream.requests[-1]["messages"][-1]["content"])
    assert result["success"] is False and "lookup backend is down" in result["error"]


async def test_slow_tool_is_cut_by_the_tool_timeout(make_client, upstream):
    client = await make_client(tools=[LookupTool(delay=5)], tool_timeout=0.1)
    upstream.queue(tool_call(("lookup", {"term": "x"})), text("Timed out."))
    resp = await client.post("/v1/chat/completions", json={"messages": USER})
    assert resp.status == 200
    assert "timed out" in json.loads(upstream.requests[-1]["messages"][-1]["content"])["error"]


async def test_unknown_tool_and_bad_arguments_are_reported_to_the_model(client, upstream):
    upstream.queue(tool_call(("teleport", {}), ("lookup", "{not json")), text("ok"))
    await client.post("/v1/chat/completions", json={"messages": USER})
    errors = [json.loads(m["content"])["error"] for m in upstream.requests[-1]["messages"] if m["role"] == "tool"]
    assert "unknown tool 'teleport'" in errors[0]
    assert "not valid JSON" in errors[1]


async def test_after_max_rounds_the_model_must_answer_without_tools(make_client, upstream, lookup_tool):
    client = await make_client(tools=[lookup_tool], max_rounds=2)
    upstream.queue(tool_call(("lookup", {"term": "1"})), tool_call(("lookup", {"term": "2"})), text("final"))
    resp = await client.post("/v1/chat/completions", json={"messages": USER})
    assert (await resp.json())["choices"][0]["message"]["content"] == "final"
    assert len(upstream.requests) == 3
    assert "tools" not in upstream.requests[2]
    # the note joins the one system message: templates such as Gemma's refuse a second one
    assert [m["role"] for m in upstream.requests[2]["messages"]].count("system") == 1
    assert "tool rounds" in upstream.requests[2]["messages"][0]["content"]


async def test_background_task_runs_without_agent_tools(client, upstream):
    prompt = "### Task:\nGenerate a concise title for the chat.\n### Output:\nJSON {\"title\": ...}"
    upstream.queue(text('{"title": "Sky colour"}'))
    resp = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": prompt}]})
    assert (await resp.json())["choices"][0]["message"]["content"] == '{"title": "Sky colour"}'
    assert "tools" not in upstream.requests[-1]


CLIENT_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


async def test_client_tool_call_goes_back_to_the_client(client, upstream, lookup_tool):
    upstream.queue(tool_call(("get_weather", {"city": "Oslo"})))
    resp = await client.post("/v1/chat/completions", json={"messages": USER, "tools": [CLIENT_TOOL]})
    body = await resp.json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    call = choice["message"]["tool_calls"][0]
    assert call["type"] == "function" and call["function"] == {"name": "get_weather", "arguments": '{"city": "Oslo"}'}
    assert lookup_tool.calls == []
    offered = [t["function"]["name"] for t in upstream.requests[0]["tools"]]
    assert offered == ["lookup", "get_weather"]


async def test_client_tool_call_streams_as_tool_call_deltas(client, upstream):
    upstream.queue(tool_call(("get_weather", {"city": "Oslo"})))
    resp = await client.post("/v1/chat/completions", json={"messages": USER, "tools": [CLIENT_TOOL], "stream": True})
    chunks = chat_chunks(await resp.text())
    deltas = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks if "tool_calls" in c["choices"][0]["delta"]]
    assert deltas[0]["index"] == 0 and deltas[0]["type"] == "function" and deltas[0]["id"]
    assert deltas[0]["function"] == {"name": "get_weather", "arguments": ""}
    assert "".join(d["function"].get("arguments", "") for d in deltas) == '{"city": "Oslo"}'
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


async def test_client_tool_results_are_accepted_next_turn(client, upstream):
    history = [*USER,
               {"role": "assistant", "content": None, "tool_calls": [{"id": "call_9", "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
               {"role": "tool", "tool_call_id": "call_9", "content": "Sunny, 20C"}]
    upstream.queue(text("It is sunny in Oslo."))
    resp = await client.post("/v1/chat/completions", json={"messages": history, "tools": [CLIENT_TOOL]})
    assert (await resp.json())["choices"][0]["message"]["content"] == "It is sunny in Oslo."
    assert upstream.requests[-1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_9", "content": "Sunny, 20C"}


async def test_client_tool_with_an_agent_tool_name_wins(client, upstream, lookup_tool):
    mine = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    upstream.queue(tool_call(("lookup", {"term": "x"})))
    resp = await client.post("/v1/chat/completions", json={"messages": USER, "tools": [mine]})
    assert (await resp.json())["choices"][0]["finish_reason"] == "tool_calls"
    assert lookup_tool.calls == []
    assert upstream.requests[0]["tools"] == [mine]


@pytest.mark.parametrize("extra", [{}, {"stream": True}, {"tools": [CLIENT_TOOL]}, {"seed": 2**70}],
                         ids=["whole", "stream", "with-client-tools", "body-orjson-refuses"])
async def test_upstream_gets_the_tool_schemas_exactly(client, upstream, lookup_tool, extra):
    """The schemas are encoded once and reused: every request still carries them exactly."""
    for _ in range(2):
        resp = await client.post("/v1/chat/completions", json={"messages": USER, **extra})
        assert resp.status == 200
    clients = extra.get("tools", [])
    assert [r["tools"] for r in upstream.requests] == [[lookup_tool.schema(), *clients]] * 2
    if "seed" in extra:
        assert all(r["seed"] == 2**70 for r in upstream.requests)
