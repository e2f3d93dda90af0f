"""Codex CLI's client-run `tool_search` through the app and the official openai SDK: the model's call
comes back as a `tool_search_call` item (streamed and not), the replayed `tool_search_call` and
`tool_search_output` continue the turn on the stored (`previous_response_id`) and the `store:
false` paths with the loaded tools offered to the model, and a search the gateway cannot run is
a 400 naming `tools[i].execution`. `reasoning.context` is echoed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from openai import AsyncOpenAI
from openai.types.responses import ResponseFunctionToolCall, ResponseToolSearchCall

from tests.fakes.upstream import FakeUpstream, tool_call
from tests.support.helpers import assert_error_envelope

TOOL_SEARCH = {"type": "tool_search", "execution": "client", "description": "Search the deferred MCP tools.",
               "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}
SHELL = {"type": "function", "name": "shell", "description": "Run a command.",
         "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}
CRM = {"type": "namespace", "name": "crm", "description": "The CRM's tools.", "tools": [
    {"type": "function", "name": "lookup", "description": "Find a customer.",
     "parameters": {"type": "object", "properties": {"email": {"type": "string"}}}}]}


@pytest.fixture
async def sdk(client: Any) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="unused", max_retries=0) as oai:
        yield oai


def offered(upstream: FakeUpstream, index: int = -1) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in upstream.requests[index].get("tools", [])}


async def test_a_streamed_tool_search_call_reaches_the_sdk_as_a_tool_search_call(
    sdk: AsyncOpenAI, upstream: FakeUpstream
) -> None:
    upstream.queue(tool_call(("tool_search", {"query": "customer lookup"})))
    kinds: list[str] = []
    async with sdk.responses.stream(model="m", input="Who is ada@example.org?", tools=[SHELL, TOOL_SEARCH],  # type: ignore[list-item]
                                    reasoning={"effort": "high", "context": "all_turns"}) as stream:  # type: ignore[typeddict-item]
        async for event in stream:
            kinds.append(event.type)
        final = await stream.get_final_response()
    [call] = final.output
    assert isinstance(call, ResponseToolSearchCall)
    assert (call.execution, call.arguments, call.status) == ("client", {"query": "customer lookup"}, "completed")
    assert kinds.count("response.output_item.added") == 1 and kinds.count("response.output_item.done") == 1
    assert not [kind for kind in kinds if "arguments" in kind or "custom_tool_call" in kind]
    assert offered(upstream)["tool_search"]["parameters"] == TOOL_SEARCH["parameters"]
    assert final.reasoning is not None and final.reasoning.context == "all_turns"
    assert "context" not in json.dumps(upstream.requests[-1])  # echoed, not sent upstream


@pytest.mark.parametrize("store", [True, False])
async def test_a_tool_search_and_its_output_continue_the_turn_with_the_loaded_tools(
    sdk: AsyncOpenAI, upstream: FakeUpstream, store: bool
) -> None:
    upstream.queue(tool_call(("tool_search", {"query": "customer lookup"})),
                   tool_call(("lookup", {"email": "ada@example.org"})))
    first = await sdk.responses.create(model="m", input="Who is ada@example.org?", tools=[SHELL, TOOL_SEARCH],  # type: ignore[list-item]
                                       store=store)
    [call] = first.output
    assert isinstance(call, ResponseToolSearchCall) and call.call_id
    output = {"type": "tool_search_output", "call_id": call.call_id, "execution": "client", "status": "completed",
              "tools": [CRM]}
    if store:
        second = await sdk.responses.create(model="m", previous_response_id=first.id, tools=[SHELL, TOOL_SEARCH],  # type: ignore[list-item]
                                            input=[output])  # type: ignore[list-item]
    else:
        second = await sdk.responses.create(model="m", store=False, tools=[SHELL, TOOL_SEARCH], input=[  # type: ignore[list-item]
            {"role": "user", "content": "Who is ada@example.org?"}, call.model_dump(exclude_none=True), output])  # type: ignore[list-item]
    # the model was offered the tool the search loaded, and called it under the namespace
    assert "lookup" in offered(upstream)
    [lookup] = second.output
    assert isinstance(lookup, ResponseFunctionToolCall)
    assert (lookup.name, lookup.namespace) == ("lookup", "crm")
    sent = upstream.requests[-1]["messages"][1:]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "tool_search"
    assert json.loads(sent[1]["tool_calls"][0]["function"]["arguments"]) == {"query": "customer lookup"}
    assert sent[2]["tool_call_id"] == call.call_id and "lookup" in sent[2]["content"]


async def test_a_tool_search_not_run_by_the_client_is_a_400_naming_its_execution(client: Any) -> None:
    for tool in ({**TOOL_SEARCH, "execution": "server"}, {"type": "tool_search"}):
        resp = await client.post("/v1/responses", json={"input": "hi", "tools": [SHELL, tool]})
        body = await resp.json()
        assert resp.status == 400
        assert_error_envelope(body, param="tools[1].execution")
        assert "hosted tool type" not in body["error"]["message"]


async def test_a_malformed_tool_search_output_is_a_400_naming_the_field(client: Any) -> None:
    resp = await client.post("/v1/responses", json={"tools": [TOOL_SEARCH], "store": False, "input": [
        {"type": "tool_search_output", "call_id": "c", "execution": "client", "tools": [{"type": "mcp"}]}]})
    assert resp.status == 400
    assert_error_envelope(await resp.json(), param="input[0].tools[0].type")
