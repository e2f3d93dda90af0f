"""Configured MCP servers (`mcp_servers:`) offered to every client: a real stdio server
(`mcp-server-time`, PyPI) run by the gateway, called by the fake upstream model, seen through the
official openai SDK as `mcp_list_tools` / `mcp_call` items on the Responses API and as progress in
chat streams; a server that is down costs one failed call and the turn goes on."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import openai
import pytest
from openai.types.responses.response_output_item import McpCall, McpListTools

from gateway.config.mcp_servers import McpServerSpec
from gateway.http.appkeys import AGENT
from tests.conftest import API_KEY
from tests.fakes.upstream import text, tool_call
from tests.support.mcp_servers import time_stdio

TIME_TOOL = "time__get_current_time"


def time_server(**kw: Any) -> McpServerSpec:
    command, args = time_stdio()
    return McpServerSpec("time", command=command, args=tuple(args), timeout=30, **kw)


def dead_server() -> McpServerSpec:
    # a program that exits at once: the stdio server is "down"
    return McpServerSpec("dead", command=sys.executable, args=("-c", "pass"), timeout=5)


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
async def client(make_client: Any, lookup_tool: Any) -> Any:
    return await make_client(tools=[lookup_tool], mcp_servers=(time_server(),))


@pytest.fixture
async def sdk(client: Any) -> Any:
    made = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=API_KEY, max_retries=0)
    yield made
    await made.close()


def offered_names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


async def test_a_configured_servers_tools_are_offered_next_to_the_agents_own(sdk, upstream):
    upstream.queue(text("Hello."))
    await sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    names = offered_names(upstream.requests[0])
    assert "lookup" in names and TIME_TOOL in names and "time__convert_time" in names


async def test_a_call_is_an_mcp_call_item_after_the_mcp_list_tools_item(sdk, upstream):
    upstream.queue(tool_call((TIME_TOOL, {"timezone": "UTC"})), text("It is late."))
    created = await sdk.responses.create(model="m", input="what time is it?")
    assert [item.type for item in created.output] == ["mcp_list_tools", "mcp_call", "message"]
    listed, call = created.output[0], created.output[1]
    assert isinstance(listed, McpListTools) and listed.server_label == "time" and listed.error is None
    assert {"get_current_time", "convert_time"} <= {tool.name for tool in listed.tools}
    assert isinstance(call, McpCall) and call.server_label == "time" and call.name == "get_current_time"
    assert json.loads(call.arguments) == {"timezone": "UTC"} and call.error is None and call.status == "completed"
    assert call.output is not None and json.loads(call.output)["timezone"] == "UTC"
    # the model read the server's answer as the tool result
    tool_message = upstream.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and json.loads(tool_message["content"])["timezone"] == "UTC"
    assert (await sdk.responses.retrieve(created.id)).model_dump() == created.model_dump()


async def test_the_stream_has_openais_mcp_events_in_order(sdk, upstream):
    upstream.queue(tool_call((TIME_TOOL, {"timezone": "UTC"})), text("Done."))
    events = []
    async with sdk.responses.stream(model="m", input="time?") as stream:
        async for event in stream:
            events.append(event)
        final = await stream.get_final_response()
    assert [e.sequence_number for e in events] == list(range(len(events)))
    listed, call = final.output[0], final.output[1]

    def of(item_id: str) -> list[str]:
        return [e.type for e in events if getattr(e, "item_id", None) == item_id
                or getattr(getattr(e, "item", None), "id", None) == item_id]

    assert of(listed.id) == ["response.output_item.added", "response.mcp_list_tools.in_progress",
                             "response.mcp_list_tools.completed", "response.output_item.done"]
    assert of(call.id) == ["response.output_item.added", "response.mcp_call.in_progress",
                           "response.mcp_call_arguments.delta", "response.mcp_call_arguments.done",
                           "response.mcp_call.completed", "response.output_item.done"]
    added = next(e for e in events if e.type == "response.output_item.added" and e.item.id == listed.id)
    assert added.item.tools == []
    done = next(e for e in events if e.type == "response.mcp_call_arguments.done")
    assert json.loads(done.arguments) == {"timezone": "UTC"}


async def test_a_chat_stream_shows_the_call_as_inline_progress(sdk, upstream):
    upstream.queue(tool_call((TIME_TOOL, {"timezone": "UTC"})), text("It is noon."))
    stream = await sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "time?"}],
                                               stream=True)
    content = "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])
    assert "time: get_current_time" in content and content.endswith("It is noon.")


async def test_a_tool_error_from_the_server_fails_the_call_and_the_turn_goes_on(sdk, upstream):
    upstream.queue(tool_call((TIME_TOOL, {"timezone": "Not/AZone"})), text("Sorry, no such zone."))
    created = await sdk.responses.create(model="m", input="time on Mars?")
    call = created.output[1]
    assert isinstance(call, McpCall) and call.status == "failed" and call.error is not None
    assert call.error.type in ("mcp_tool_execution_error", "mcp_protocol_error")
    assert created.output_text == "Sorry, no such zone."


async def test_a_server_that_is_down_costs_a_failed_listing_and_the_turn_goes_on(make_client, lookup_tool, upstream):
    client = await make_client(tools=[lookup_tool], mcp_servers=(dead_server(), time_server()))
    sdk = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=API_KEY, max_retries=0)
    try:
        upstream.queue(tool_call((TIME_TOOL, {"timezone": "UTC"})), text("Fine."))
        created = await sdk.responses.create(model="m", input="time?")
    finally:
        await sdk.close()
    dead, alive = created.output[0], created.output[1]
    assert isinstance(dead, McpListTools) and dead.server_label == "dead" and dead.error
    assert isinstance(alive, McpListTools) and alive.server_label == "time" and alive.error is None
    assert created.output[2].type == "mcp_call" and created.output_text == "Fine."
    assert not any(name.startswith("dead__") for name in offered_names(upstream.requests[0]))


async def test_shutting_the_gateway_down_ends_the_stdio_server(make_client, lookup_tool, upstream):
    client = await make_client(tools=[lookup_tool], mcp_servers=(time_server(),))
    upstream.queue(text("Warm."))
    response = await client.post("/v1/responses", json={"input": "hi"}, headers={"Authorization": f"Bearer {API_KEY}"})
    assert response.status == 200
    pid = client.server.app[AGENT].mcp.registry.server("time").connection.pid
    assert pid is not None and process_exists(pid)
    await client.close()
    assert not process_exists(pid)


async def test_allowed_tools_limits_what_is_offered(make_client, lookup_tool, upstream):
    client = await make_client(tools=[lookup_tool],
                               mcp_servers=(time_server(allowed_tools=("get_current_time",)),))
    upstream.queue(text("Hi."))
    response = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]},
                                 headers={"Authorization": f"Bearer {API_KEY}"})
    assert response.status == 200
    names = offered_names(upstream.requests[0])
    assert TIME_TOOL in names and "time__convert_time" not in names


async def test_with_web_tools_on_request_the_mcp_tools_are_still_offered(make_client, lookup_tool, upstream):
    client = await make_client(tools=[lookup_tool], mcp_servers=(time_server(),), web_tools="on_request")
    upstream.queue(text("Hi."), text("Hi again."))
    headers = {"Authorization": f"Bearer {API_KEY}"}
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    assert (await client.post("/v1/chat/completions", json=chat, headers=headers)).status == 200
    names = offered_names(upstream.requests[0])
    assert TIME_TOOL in names and "lookup" not in names
    # tool_choice "none": no tool at all, MCP included
    none = {**chat, "tool_choice": "none"}
    assert (await client.post("/v1/chat/completions", json=none, headers=headers)).status == 200
    assert offered_names(upstream.requests[1]) == []
