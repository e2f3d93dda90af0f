"""Responses requests: validation errors name the field, input items become chat messages."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.errors import InvalidRequestError
from gateway.wire.responses_input import input_to_messages, normalize_input
from gateway.wire.responses_request import parse_responses_request


def bad_param(body: Any) -> str | None:
    with pytest.raises(InvalidRequestError) as caught:
        parse_responses_request(body)
    assert caught.value.status == 400
    return caught.value.param


def test_string_input_becomes_one_user_message_with_an_id() -> None:
    request = parse_responses_request({"model": "m", "input": "hello"})
    assert request.messages == [{"role": "user", "content": "hello"}]
    [item] = request.input_items
    assert item["id"].startswith("msg_")
    assert item["content"] == [{"type": "input_text", "text": "hello"}]
    assert request.store is True and request.stream is False
    assert request.tool_choice == "auto" and request.parallel_tool_calls is True


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ([], None),
        ({}, "input"),
        ({"input": 3}, "input"),
        ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
        ({"input": [{"role": "user", "content": 5}]}, "input[0].content"),
        ({"input": [{"role": "user", "content": [{"type": "input_audio"}]}]}, "input[0].content[0]"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]},
            "input[0].content[0]",
        ),
        ({"input": [{"type": "function_call", "call_id": "c", "name": "f"}]}, "input[0].arguments"),
        ({"input": [{"type": "function_call_output", "call_id": "c"}]}, "input[0].output"),
        ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0].type"),
        ({"input": "x", "previous_response_id": "resp_1", "conversation": "c"}, "previous_response_id"),
        ({"input": "x", "conversation": {"name": "c"}}, "conversation"),
        ({"input": "x", "conversation": ""}, "conversation"),
        ({"input": "x", "store": "yes"}, "store"),
        ({"input": "x", "stream": 1}, "stream"),
        ({"input": "x", "instructions": ["a"]}, "instructions"),
        ({"input": "x", "temperature": 3}, "temperature"),
        ({"input": "x", "temperature": True}, "temperature"),
        ({"input": "x", "top_p": -0.1}, "top_p"),
        ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "x", "parallel_tool_calls": "no"}, "parallel_tool_calls"),
        ({"input": "x", "metadata": ["a"]}, "metadata"),
        ({"input": "x", "metadata": {f"k{n}": "v" for n in range(17)}}, "metadata"),
        ({"input": "x", "metadata": {"k" * 65: "v"}}, "metadata"),
        ({"input": "x", "metadata": {"k": "v" * 513}}, "metadata.k"),
        ({"input": "x", "metadata": {"k": 1}}, "metadata.k"),
        ({"input": "x", "tools": {"type": "function"}}, "tools"),
        ({"input": "x", "tools": [{"name": "f"}]}, "tools[0]"),
        ({"input": "x", "tools": [{"type": "function", "name": "bad name"}]}, "tools[0].name"),
        ({"input": "x", "tools": [{"type": "function", "function": {"name": "f"}}]}, "tools[0].name"),
        (
            {"input": "x", "tools": [{"type": "function", "name": "f", "parameters": "{}"}]},
            "tools[0].parameters",
        ),
        ({"input": "x", "tool_choice": "always"}, "tool_choice"),
        ({"input": "x", "tool_choice": {"type": "function", "name": "missing"}}, "tool_choice"),
        ({"input": "x", "tool_choice": {"type": "function", "name": ["x"]}}, "tool_choice"),
        ({"input": "x", "tool_choice": {"type": "function", "name": {"x": 1}}}, "tool_choice"),
        ({"input": "x", "text": {"format": {"type": "yaml"}}}, "text.format"),
        ({"input": "x", "background": True, "store": False}, "background"),
        ({"input": "x", "background": "yes"}, "background"),
    ],
)
def test_malformed_fields_are_400_naming_the_field(body: Any, param: str | None) -> None:
    assert bad_param(body) == param


def test_every_field_is_read() -> None:
    request = parse_responses_request(
        {
            "model": "agent",
            "input": "hi",
            "instructions": "be brief",
            "conversation": {"id": "chat-1"},
            "store": False,
            "stream": True,
            "metadata": {"k": "v"},
            "temperature": 0.5,
            "top_p": 1,
            "max_output_tokens": 99,
            "parallel_tool_calls": False,
            "user": "u1",
            "tools": [
                {
                    "type": "function",
                    "name": "get_weather",
                    "description": "Weather",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                    "strict": True,
                },
                {"type": "web_search"},
            ],
            "tool_choice": {"type": "function", "name": "get_weather"},
            "text": {"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}}},
            "include": ["message.output_text.logprobs"],  # unknown extras are ignored
        }
    )
    assert request.conversation == "chat-1" and request.instructions == "be brief"
    assert request.store is False and request.stream is True and request.metadata == {"k": "v"}
    assert request.tools[1] == {"type": "web_search"}  # echoed, not offered to the model
    assert request.chat_tools == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather",
                "strict": True,
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    assert request.upstream_params() == {
        "temperature": 0.5,
        "top_p": 1.0,
        "max_tokens": 99,
        "user": "u1",
        "parallel_tool_calls": False,
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "out", "schema": {"type": "object"}},
        },
    }


def test_chaining_without_new_input_is_allowed() -> None:
    assert parse_responses_request({"previous_response_id": "resp_1"}).messages == []
    assert parse_responses_request({"conversation": "c"}).conversation == "c"


def test_function_call_round_trip_items_become_assistant_tool_calls_and_tool_messages() -> None:
    items = normalize_input(
        [
            {"role": "user", "content": "weather in Paris and Rome?"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Checking."}],
            },
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {
                "type": "function_call",
                "call_id": "call_2",
                "name": "get_weather",
                "arguments": '{"city":"Rome"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
            {
                "type": "function_call_output",
                "call_id": "call_2",
                "output": [{"type": "input_text", "text": "21C"}],
            },
            {"type": "function_call", "call_id": "call_3", "name": "get_time", "arguments": "{}"},
        ]
    )
    assert [item["id"][: item["id"].index("_")] for item in items] == [
        "msg",
        "msg",
        "fc",
        "fc",
        "fco",
        "fco",
        "fc",
    ]
    assert len({item["id"] for item in items}) == len(items)
    assert input_to_messages(items) == [
        {"role": "user", "content": "weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
        {"role": "tool", "tool_call_id": "call_2", "content": "21C"},
        {
            "role": "assistant",
            "content": "",  # not null: Ollama, LM Studio and llama-cpp-python refuse it
            "tool_calls": [
                {"id": "call_3", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
            ],
        },
    ]


def test_images_keep_parts_and_text_only_parts_collapse_to_a_string() -> None:
    items = normalize_input(
        [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "what is this?"},
                    {"type": "input_image", "image_url": "https://x/y.png", "detail": "low"},
                ],
            },
            {
                "role": "developer",
                "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}],
            },
        ]
    )
    assert input_to_messages(items) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
            ],
        },
        {"role": "developer", "content": "a\nb"},
    ]


def test_client_supplied_item_ids_are_kept() -> None:
    [item] = normalize_input([{"type": "message", "id": "msg_mine", "role": "user", "content": "x"}])
    assert item["id"] == "msg_mine"


def test_replayed_web_search_calls_become_a_note_leading_the_answer_they_led_to() -> None:
    items = normalize_input([
        {"role": "user", "content": "otters?"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed",
         "action": {"type": "search", "query": "otter diet", "queries": ["otter diet", "otter food"],
                    "sources": [{"type": "url", "url": "https://a.example/"}]}},
        {"type": "web_search_call", "id": "ws_2", "status": "completed",
         "action": {"type": "open_page", "url": "https://a.example/"}},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Fish."}]},
        {"role": "user", "content": "sure?"},
    ])
    assert [item["id"] for item in items[1:3]] == ["ws_1", "ws_2"]
    assert input_to_messages(items) == [
        {"role": "user", "content": "otters?"},
        {"role": "assistant", "content": "(searched the web for 'otter diet'; 'otter food'; found https://a.example/) "
                                         "(opened https://a.example/)\n\nFish."},
        {"role": "user", "content": "sure?"},
    ]


def test_a_replayed_web_search_call_before_a_client_call_shares_its_assistant_message() -> None:
    items = normalize_input([
        {"role": "user", "content": "weather?"},
        {"type": "web_search_call", "action": {"type": "search", "query": "oslo"}},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "3C"},
    ])
    assert items[1]["id"].startswith("ws_") and items[1]["status"] == "completed"
    messages = input_to_messages(items)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert messages[1]["content"] == "(searched the web for 'oslo')"
    assert messages[1]["tool_calls"][0]["id"] == "c1"


def test_the_open_turns_replayed_searches_become_calls_to_run_again_after_the_rounds_text():
    parsed = parse_responses_request({"store": False, "input": [
        {"role": "user", "content": "old question"},
        {"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "old"}},
        {"role": "assistant", "content": "Old answer."},
        {"role": "user", "content": "Weather and news in Oslo?"},
        {"role": "assistant", "content": "Looking."},
        {"type": "web_search_call", "id": "ws_1", "action": {"type": "search", "query": "oslo weather"}},
        {"type": "web_search_call", "id": "ws_2", "action": {"type": "search", "query": "oslo news"}},
        {"type": "web_search_call", "action": {"type": "open_page", "url": "https://example.org/"}},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]})
    assert [call[:2] for call in parsed.replayed] == [("ws_1", "web_search"), ("ws_2", "web_search")]
    roles = [(m["role"], [c["id"] for c in m.get("tool_calls", [])]) for m in parsed.messages]
    assert roles == [("user", []), ("assistant", []), ("user", []), ("assistant", ["ws_1", "ws_2"]),
                     ("tool", []), ("tool", []), ("assistant", ["c1"]), ("tool", [])]
    assert parsed.messages[1]["content"] == "(searched the web for 'old')\n\nOld answer."
    assert parsed.messages[3]["content"] == "Looking."
    assert parsed.messages[4] == {"role": "tool", "tool_call_id": "ws_1",
                                  "content": "(searched the web for 'oslo weather')"}
    # a page read is a note: only searches are run again
    assert parsed.messages[6]["content"] == "(opened https://example.org/)"
