"""A client-run `tool_search` tool in a Responses request (Codex CLI's search of its deferred tools):
what the model is offered, the `tool_search_call` item a call comes back as (checked by the openai
SDK's own types), what replayed `tool_search_call` / `tool_search_output` items read as, and the
400s for what the gateway cannot run. Also `reasoning.context`, which Codex sends beside it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.responses import ResponseStreamEvent, ResponseToolSearchCall, ToolSearchTool
from openai.types.responses.response_input_item import ToolSearchCall
from openai.types.responses.response_tool_search_output_item_param import ResponseToolSearchOutputItemParam
from pydantic import TypeAdapter

from gateway.agent.events import ClientToolCall, Finished
from gateway.errors import InvalidRequestError
from gateway.wire.responses_output import ResponseBuilder
from gateway.wire.responses_request import parse_responses_request

EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)

SEARCH_PARAMETERS = {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "number"}},
                     "required": ["query"], "additionalProperties": False}
TOOL_SEARCH = {"type": "tool_search", "execution": "client", "description": "Search the deferred MCP tools.",
               "parameters": SEARCH_PARAMETERS}
SHELL = {"type": "function", "name": "shell", "description": "Run a command.",
         "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}
CRM = {"type": "namespace", "name": "crm", "description": "The CRM's tools.", "tools": [
    {"type": "function", "name": "lookup", "description": "Find a customer.",
     "parameters": {"type": "object", "properties": {"email": {"type": "string"}}}},
    {"type": "function", "name": "shell", "description": "The CRM's own shell."}]}


def names_offered(request: Any) -> list[str]:
    return [tool["function"]["name"] for tool in request.chat_tools]


def replayed_turn() -> list[dict[str, Any]]:
    """Codex's `store: false` replay after a tool search (OpenAI's input item shapes)."""
    call = ToolSearchCall(type="tool_search_call", call_id="call_s", execution="client", status="completed",
                          arguments={"query": "customer lookup", "limit": 3})
    output = ResponseToolSearchOutputItemParam.model_validate(
        {"type": "tool_search_output", "call_id": "call_s", "execution": "client", "status": "completed",
         "tools": [CRM]})
    return [{"role": "user", "content": "Who is ada@example.org?"},
            call.model_dump(exclude_none=True), output.model_dump(exclude_none=True)]


def test_a_client_tool_search_is_offered_as_a_function_with_its_parameters() -> None:
    ToolSearchTool.model_validate(TOOL_SEARCH)  # the shape is OpenAI's
    request = parse_responses_request({"input": "hi", "tools": [SHELL, TOOL_SEARCH]})
    assert names_offered(request) == ["shell", "tool_search"]
    function = request.chat_tools[1]["function"]
    assert function["parameters"] == SEARCH_PARAMETERS
    assert function["description"] == "Search the deferred MCP tools."
    assert request.tools == [SHELL, TOOL_SEARCH]  # echoed as sent


@pytest.mark.parametrize("execution", ["server", None, "both"])
def test_a_tool_search_not_run_by_the_client_is_a_400_naming_its_execution(execution: str | None) -> None:
    tool = {**TOOL_SEARCH, "execution": execution} if execution is not None else {"type": "tool_search"}
    with pytest.raises(InvalidRequestError) as caught:
        parse_responses_request({"input": "hi", "tools": [SHELL, tool]})
    assert caught.value.param == "tools[1].execution"
    assert "hosted tool type" not in caught.value.message and "client" in caught.value.message


def test_a_tool_search_call_is_a_tool_search_call_item_added_and_done() -> None:
    request = parse_responses_request({"input": "hi", "tools": [SHELL, TOOL_SEARCH], "stream": True})
    builder = ResponseBuilder(request, model="m")
    events = builder.start()
    events += builder.feed(ClientToolCall("call_s", "tool_search", json.dumps({"query": "crm", "limit": 2})))
    events += builder.feed(Finished("tool_calls"))
    events += builder.finish()
    [item] = builder.response()["output"]
    call = ResponseToolSearchCall.model_validate(item)
    assert (call.type, call.call_id, call.execution, call.status) == ("tool_search_call", "call_s", "client",
                                                                      "completed")
    assert call.arguments == {"query": "crm", "limit": 2} and call.id.startswith("tsc_")
    parsed = [EVENTS.validate_python(event) for event in events]
    kinds = [event.type for event in parsed]
    assert kinds[2:-1] == ["response.output_item.added", "response.output_item.done"]
    assert parsed[2].item.status == "in_progress" and parsed[3].item == call


def test_replayed_tool_search_items_reach_the_model_as_a_call_and_the_tools_it_loaded() -> None:
    request = parse_responses_request({"tools": [SHELL, TOOL_SEARCH], "store": False, "input": replayed_turn()})
    assert request.messages[1] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_s", "type": "function",
         "function": {"name": "tool_search", "arguments": json.dumps({"query": "customer lookup", "limit": 3})}}]}
    tool_message = request.messages[2]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_s"
    assert "lookup" in tool_message["content"] and "crm__shell" in tool_message["content"]
    # the loaded tools are offered, a name already taken renamed as for any namespace
    assert names_offered(request) == ["shell", "tool_search", "lookup", "crm__shell"]
    kept = request.input_items[1:]
    assert [item["type"] for item in kept] == ["tool_search_call", "tool_search_output"]
    assert kept[0]["id"].startswith("tsc_") and kept[1]["id"].startswith("tso_") and kept[1]["tools"] == [CRM]


def test_a_tool_loaded_by_two_searches_is_offered_once() -> None:
    turn = replayed_turn()
    again = [{**turn[1], "call_id": "call_t"}, {**turn[2], "call_id": "call_t"}]
    request = parse_responses_request({"tools": [SHELL, TOOL_SEARCH], "store": False, "input": turn + again})
    assert names_offered(request) == ["shell", "tool_search", "lookup", "crm__shell"]


@pytest.mark.parametrize(("item", "param"), [
    ({"type": "tool_search_call", "call_id": "c", "execution": "server", "arguments": {}}, "input[0].execution"),
    ({"type": "tool_search_call", "execution": "client", "arguments": {}}, "input[0].call_id"),
    ({"type": "tool_search_call", "call_id": "c", "execution": "client"}, "input[0].arguments"),
    ({"type": "tool_search_output", "call_id": "c", "execution": "client"}, "input[0].tools"),
    ({"type": "tool_search_output", "call_id": "c", "execution": "client", "tools": [{"type": "mcp"}]},
     "input[0].tools[0].type"),
    ({"type": "tool_search_output", "call_id": "c", "execution": "client",
      "tools": [{"type": "function", "name": "bad name"}]}, "input[0].tools[0].name"),
])
def test_a_malformed_tool_search_item_is_a_400_naming_the_field(item: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        parse_responses_request({"input": [item], "tools": [TOOL_SEARCH]})
    assert caught.value.param == param


def test_reasoning_context_is_echoed_and_not_sent_upstream() -> None:
    request = parse_responses_request({"input": "hi", "reasoning": {"effort": "high", "context": "all_turns"}})
    assert request.reasoning == {"effort": "high", "summary": None, "context": "all_turns"}
    params = request.upstream_params()
    assert params["reasoning_effort"] == "high" and "context" not in json.dumps(params)
    with pytest.raises(InvalidRequestError) as caught:
        parse_responses_request({"input": "hi", "reasoning": {"context": "forever"}})
    assert caught.value.param == "reasoning.context"
