"""The client's namespace, custom and additional tools in a Responses request (Codex CLI's shapes):
what the model is offered, what a replayed call reads as, the items and events a call comes back as
(each checked by the openai SDK's own types), and images in a tool's output."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.responses import (
    ResponseCustomToolCall,
    ResponseFunctionToolCall,
    ResponseStreamEvent,
)
from pydantic import TypeAdapter

from gateway.agent.events import ClientToolCall, Finished
from gateway.errors import InvalidRequestError
from gateway.wire.images import IMAGE_NOTE
from gateway.wire.responses_input import input_to_messages
from gateway.wire.responses_output import ResponseBuilder
from gateway.wire.responses_request import parse_responses_request

EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)

SPAWN = {"type": "function", "name": "spawn_agent", "description": "Start a sub-agent.",
         "parameters": {"type": "object", "properties": {"task": {"type": "string"}}}}
AGENTS = {"type": "namespace", "name": "agents", "description": "Sub-agents you can run.",
          "tools": [SPAWN, {"type": "function", "name": "shell", "description": "Run in a sub-agent's shell."}]}
SHELL = {"type": "function", "name": "shell", "description": "Run a command.",
         "parameters": {"type": "object", "properties": {"command": {"type": "array"}}}}
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "Edit files with a patch.",
               "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch" body'}}
PICTURE = "data:image/png;base64,iVBORw0KGgo="


def names_offered(request: Any) -> list[str]:
    return [tool["function"]["name"] for tool in request.chat_tools]


def test_a_namespace_is_offered_flat_and_only_a_colliding_name_is_renamed() -> None:
    request = parse_responses_request({"input": "hi", "tools": [AGENTS, SHELL]})
    assert names_offered(request) == ["shell", "spawn_agent", "agents__shell"]
    spawn = request.chat_tools[1]["function"]
    assert spawn["parameters"] == SPAWN["parameters"] and "Sub-agents you can run." in spawn["description"]
    renamed = request.client_tools.get("agents__shell")
    assert renamed is not None and (renamed.name, renamed.namespace) == ("shell", "agents")
    assert request.tools == [AGENTS, SHELL]  # echoed as sent


def test_a_custom_tool_is_a_function_of_one_string_with_its_grammar_told() -> None:
    request = parse_responses_request({"input": "hi", "tools": [APPLY_PATCH]})
    [offered] = request.chat_tools
    function = offered["function"]
    assert function["name"] == "apply_patch"
    assert function["parameters"] == {"type": "object", "properties": {"input": {"type": "string"}},
                                      "required": ["input"]}
    assert "Edit files with a patch." in function["description"]
    assert 'lark grammar' in function["description"] and '"*** Begin Patch" body' in function["description"]


@pytest.mark.parametrize(("tool", "hosted"), [
    ({"type": "file_search", "vector_store_ids": []}, True),
    ({"type": "computer_use_preview"}, False),
    ({"type": "telepathy"}, False),
])
def test_an_unsupported_tool_type_is_a_400_naming_the_param(tool: dict[str, Any], hosted: bool) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        parse_responses_request({"input": "hi", "tools": [SHELL, AGENTS, APPLY_PATCH, tool]})
    assert caught.value.param == "tools[3].type"
    assert ("hosted tool type" in caught.value.message) == hosted
    assert repr(tool["type"]) in caught.value.message


@pytest.mark.parametrize(("tool", "param"), [
    ({"type": "namespace", "name": "ns", "description": "d", "tools": [{"type": "web_search"}]},
     "tools[0].tools[0].type"),
    ({"type": "namespace", "name": "n s", "description": "d", "tools": []}, "tools[0].name"),
    ({"type": "custom", "name": "x", "format": {"type": "grammar", "syntax": "ebnf", "definition": "a"}},
     "tools[0].format"),
    ({"type": "custom", "name": "x", "format": {"type": "json"}}, "tools[0].format"),
])
def test_a_malformed_namespace_or_custom_tool_is_a_400_naming_the_field(tool: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        parse_responses_request({"input": "hi", "tools": [tool]})
    assert caught.value.param == param


def test_additional_tools_items_are_offered_and_kept_as_input_items() -> None:
    item = {"type": "additional_tools", "role": "developer", "tools": [APPLY_PATCH, AGENTS]}
    request = parse_responses_request({"input": [item, {"role": "user", "content": "hi"}], "tools": [SHELL]})
    assert names_offered(request) == ["shell", "apply_patch", "spawn_agent", "agents__shell"]
    assert request.input_items[0]["type"] == "additional_tools" and request.input_items[0]["tools"] == item["tools"]
    assert request.input_items[0]["id"]
    assert request.messages == [{"role": "user", "content": "hi"}]  # the tools say nothing to the model
    assert request.tools == [SHELL]
    with pytest.raises(InvalidRequestError) as caught:
        parse_responses_request({"input": [{"type": "additional_tools", "role": "developer",
                                            "tools": [{"type": "code_interpreter"}]}]})
    assert caught.value.param == "input[0].tools[0].type"


def test_replayed_namespace_and_custom_calls_reach_the_model_under_its_names() -> None:
    request = parse_responses_request({"tools": [AGENTS, SHELL, APPLY_PATCH], "store": False, "input": [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "shell", "namespace": "agents", "arguments": "{}"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch\n"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "Done!"}]},
    ]})
    assert request.messages[1] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "agents__shell", "arguments": "{}"}},
        {"id": "c2", "type": "function", "function": {"name": "apply_patch",
                                                      "arguments": json.dumps({"input": "*** Begin Patch\n"})}},
    ]}
    assert request.messages[2:] == [{"role": "tool", "tool_call_id": "c1", "content": "ok"},
                                    {"role": "tool", "tool_call_id": "c2", "content": "Done!"}]
    assert request.input_items[1]["namespace"] == "agents"
    assert request.input_items[2]["type"] == "custom_tool_call" and request.input_items[2]["id"].startswith("ctc_")


def test_tool_choice_may_name_a_custom_tool_and_reaches_the_model_as_its_function() -> None:
    request = parse_responses_request({"input": "hi", "tools": [APPLY_PATCH],
                                       "tool_choice": {"type": "custom", "name": "apply_patch"}})
    assert request.upstream_params()["tool_choice"] == {"type": "function", "function": {"name": "apply_patch"}}
    with pytest.raises(InvalidRequestError):
        parse_responses_request({"input": "hi", "tools": [APPLY_PATCH],
                                 "tool_choice": {"type": "function", "name": "apply_patch"}})


# ---- the calls coming back ----------------------------------------------------------------------


def calls_of(request: Any, *calls: ClientToolCall) -> tuple[ResponseBuilder, list[dict[str, Any]]]:
    builder = ResponseBuilder(request, model="m")
    events = builder.start()
    for call in calls:
        events += builder.feed(call)
    events += builder.feed(Finished("tool_calls"))
    events += builder.finish()
    return builder, events


def test_a_call_to_a_renamed_namespace_tool_comes_back_under_its_own_name_and_namespace() -> None:
    request = parse_responses_request({"input": "hi", "tools": [AGENTS, SHELL]})
    builder, events = calls_of(request, ClientToolCall("call_1", "agents__shell", '{"cmd": "ls"}'),
                               ClientToolCall("call_2", "shell", "{}"))
    first, second = (ResponseFunctionToolCall.model_validate(item) for item in builder.response()["output"])
    assert (first.name, first.namespace, first.arguments) == ("shell", "agents", '{"cmd": "ls"}')
    assert (second.name, second.namespace) == ("shell", None)
    for event in events:
        EVENTS.validate_python(event)


def test_a_custom_tool_call_is_a_custom_tool_call_item_with_input_events() -> None:
    request = parse_responses_request({"input": "hi", "tools": [APPLY_PATCH], "stream": True})
    patch = "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch"
    builder, events = calls_of(request, ClientToolCall("call_9", "apply_patch", json.dumps({"input": patch})))
    [item] = builder.response()["output"]
    call = ResponseCustomToolCall.model_validate(item)
    assert (call.type, call.call_id, call.name, call.input) == ("custom_tool_call", "call_9", "apply_patch", patch)
    parsed = [EVENTS.validate_python(event) for event in events]
    kinds = [event.type for event in parsed]
    assert kinds[2:-1] == ["response.output_item.added", "response.custom_tool_call_input.delta",
                           "response.custom_tool_call_input.done", "response.output_item.done"]
    assert parsed[3].delta == patch and parsed[4].input == patch and parsed[4].item_id == call.id


@pytest.mark.parametrize(("arguments", "expected"), [
    ('{"input": "raw"}', "raw"), ('{"patch": "raw"}', "raw"), ("not json at all", "not json at all"), ("", "")])
def test_a_custom_call_input_is_read_from_what_the_model_wrote(arguments: str, expected: str) -> None:
    request = parse_responses_request({"input": "hi", "tools": [APPLY_PATCH]})
    builder, _ = calls_of(request, ClientToolCall("c", "apply_patch", arguments))
    assert builder.response()["output"][0]["input"] == expected


# ---- images a tool returned ---------------------------------------------------------------------


def image_turn() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "look"},
        {"type": "function_call", "call_id": "v1", "name": "view_image", "arguments": "{}"},
        {"type": "function_call", "call_id": "v2", "name": "view_image", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "v1",
         "output": [{"type": "input_image", "image_url": PICTURE, "detail": "high"}]},
        {"type": "function_call_output", "call_id": "v2", "output": [
            {"type": "input_text", "text": "second:"}, {"type": "input_image", "image_url": PICTURE}]},
    ]


def test_images_in_a_tool_output_follow_the_tool_messages_on_a_vision_route() -> None:
    request = parse_responses_request({"input": image_turn()})
    request.show_tool_images()
    tool_1, tool_2, user = request.messages[2:]
    assert tool_1["role"] == tool_2["role"] == "tool" and tool_2["content"] == "second:"
    assert tool_1["content"] and "image" in tool_1["content"]
    assert user["role"] == "user"
    assert [part["type"] for part in user["content"]] == ["text", "image_url", "text", "image_url"]
    assert "v1" in user["content"][0]["text"] and "v2" in user["content"][2]["text"]  # which call's image
    assert user["content"][1]["image_url"] == {"url": PICTURE, "detail": "high"}
    kept = request.input_items[3]["output"]
    assert kept == [{"type": "input_image", "image_url": PICTURE, "detail": "high"}]


def test_images_in_a_tool_output_are_notes_on_a_route_without_vision() -> None:
    request = parse_responses_request({"input": image_turn()})
    assert [m["role"] for m in request.messages] == ["user", "assistant", "tool", "tool"]
    assert IMAGE_NOTE in request.messages[2]["content"]
    assert request.messages[3]["content"].startswith("second:") and IMAGE_NOTE in request.messages[3]["content"]
    assert PICTURE not in json.dumps(request.messages)


def test_a_user_message_after_tool_images_comes_after_them() -> None:
    messages = input_to_messages(parse_responses_request({"input": [
        *image_turn(), {"role": "user", "content": "and now?"}]}).input_items, vision=True)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user", "user"]
    assert messages[-1] == {"role": "user", "content": "and now?"}
