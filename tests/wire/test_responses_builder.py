"""Agent events -> Responses objects and stream events, checked against the official SDK's types.

What a stored response keeps of the conversation is the agent's transcript, not the builder's:
tests/http/test_responses_transcript.py pins it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseFunctionWebSearch, ResponseStreamEvent
from openai.types.responses.response_function_web_search import ActionOpenPage, ActionSearch
from pydantic import TypeAdapter

from gateway.agent.events import (
    ClientToolCall,
    Finished,
    Source,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
)
from gateway.wire.responses_event_json import event_json
from gateway.wire.responses_output import ResponseBuilder
from gateway.wire.responses_request import parse_responses_request

EVENTS = TypeAdapter(ResponseStreamEvent)


def run(
    body: dict[str, Any], agent_events: list[Any], end: str = "finish"
) -> tuple[ResponseBuilder, list[dict]]:
    request = parse_responses_request(body)
    builder = ResponseBuilder(request, model="agent-gateway")
    stream = builder.start()
    for event in agent_events:
        stream += builder.feed(event)
    stream += getattr(builder, end)() if end != "fail" else builder.fail("upstream went away")
    return builder, stream


def check_with_sdk(stream: list[dict], input_tools: Any = omit) -> Response:
    """Every event validates, sequence numbers rise from 0, and the SDK's stream helper accepts them."""
    assert [event["sequence_number"] for event in stream] == list(range(len(stream)))
    state = ResponseStreamState(input_tools=input_tools, text_format=omit)
    for raw in stream:
        state.handle_event(EVENTS.validate_python(raw))
    final = Response.model_validate(stream[-1]["response"])
    return final


def kinds(stream: list[dict]) -> list[str]:
    return [event["type"].removeprefix("response.") for event in stream]


def test_text_only_answer_streams_in_openai_order() -> None:
    builder, stream = run(
        {"input": "hi", "metadata": {"k": "v"}},
        [
            TextDelta("Hel"),
            TextDelta(""),
            TextDelta("lo"),
            Usage(12, 3),
            Finished("stop"),
        ],
    )
    assert kinds(stream) == [
        "created",
        "in_progress",
        "output_item.added",
        "content_part.added",
        "output_text.delta",
        "output_text.delta",
        "output_text.done",
        "content_part.done",
        "output_item.done",
        "completed",
    ]
    assert stream[0]["response"]["output"] == [] and stream[0]["response"]["status"] == "in_progress"
    item_id = stream[2]["item"]["id"]
    assert item_id.startswith("msg_")
    assert {e.get("item_id", item_id) for e in stream[3:9]} == {item_id}
    assert all(e["output_index"] == 0 for e in stream[2:9])
    assert stream[4]["logprobs"] == []
    final = check_with_sdk(stream)
    assert final.status == "completed" and final.output_text == "Hello"
    assert final.id.startswith("resp_") and final.metadata == {"k": "v"}
    assert final.usage is not None and final.usage.total_tokens == 15
    assert final.usage.input_tokens_details.cached_tokens == 0
    assert final.usage.output_tokens_details.reasoning_tokens == 0
    assert builder.response() == stream[-1]["response"]


def test_a_search_by_the_gateway_is_a_web_search_call_item_then_the_message() -> None:
    builder, stream = run(
        {"input": "news?"},
        [
            ToolCallStarted("call_1", "web_search", '{"query":"news"}', "🔍 news", queries=("news",)),
            ToolCallFinished("call_1", "web_search", '{"results": []}', True,
                             sources=(Source("https://a.example/1", "A"),)),
            TextDelta("Nothing new."),
            Usage(40, 5),
            Finished("stop"),
        ],
    )
    assert kinds(stream) == [
        "created",
        "in_progress",
        "output_item.added",
        "web_search_call.in_progress",
        "web_search_call.searching",
        "web_search_call.completed",
        "output_item.done",
        "output_item.added",
        "content_part.added",
        "output_text.delta",
        "output_text.done",
        "content_part.done",
        "output_item.done",
        "completed",
    ]
    assert [e["output_index"] for e in stream[2:13]] == [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
    assert stream[2]["item"]["status"] == "in_progress" and stream[6]["item"]["status"] == "completed"
    assert {e["item_id"] for e in stream[3:6]} == {stream[2]["item"]["id"]}
    final = check_with_sdk(stream)
    assert [item.type for item in final.output] == ["web_search_call", "message"]
    call = final.output[0]
    assert isinstance(call, ResponseFunctionWebSearch) and isinstance(call.action, ActionSearch)
    assert call.id.startswith("ws_") and call.status == "completed"
    assert call.action.query == "news" and call.action.queries == ["news"]
    assert call.action.sources is None  # not asked for in `include`
    assert final.output_text == "Nothing new."


def test_include_sources_puts_the_search_hits_in_the_action() -> None:
    _, stream = run(
        {"input": "news?", "include": ["web_search_call.action.sources"]},
        [
            ToolCallStarted("c", "web_search", "{}", None, queries=("news",)),
            ToolCallFinished("c", "web_search", "r", True,
                             sources=(Source("https://a.example/1", "A"), Source("https://b.example/", "B"))),
            Finished("stop"),
        ],
    )
    action = check_with_sdk(stream).output[0].action
    assert isinstance(action, ActionSearch) and action.sources is not None
    assert [source.url for source in action.sources] == ["https://a.example/1", "https://b.example/"]


def test_a_page_read_is_one_open_page_item_per_url_and_a_failed_call_is_failed() -> None:
    _, stream = run(
        {"input": "q", "include": ["web_search_call.action.sources"]},
        [
            ToolCallStarted("a", "web_search", "{}", None, queries=("q",)),
            ToolCallStarted("b", "web_extract", "{}", None, urls=("https://x.example/", "https://y.example/")),
            ToolCallFinished("a", "web_search", "provider down", False),
            ToolCallFinished("b", "web_extract", "rb", True),
            TextDelta("done"),
            Finished("stop"),
        ],
    )
    final = check_with_sdk(stream)
    assert [(item.type, item.status) for item in final.output] == [
        ("web_search_call", "failed"), ("web_search_call", "completed"), ("web_search_call", "completed"),
        ("message", "completed"),
    ]
    search, first, second, _ = final.output
    assert isinstance(search.action, ActionSearch) and search.action.sources == []
    assert isinstance(first.action, ActionOpenPage) and first.action.url == "https://x.example/"
    assert isinstance(second.action, ActionOpenPage) and second.action.url == "https://y.example/"
    # all three start before any ends (the calls run in parallel), in output order
    added = [e["output_index"] for e in stream if e["type"] == "response.output_item.added"]
    assert added == [0, 1, 2, 3]


def test_a_response_cut_short_during_a_search_leaves_the_call_incomplete() -> None:
    _, stream = run({"input": "q"}, [ToolCallStarted("a", "web_search", "{}", None, queries=("q",))],
                    end="interrupt")
    final = check_with_sdk(stream)
    assert final.status == "incomplete" and final.output[0].status == "incomplete"


def test_client_tool_call_ends_with_a_function_call_item_for_the_client() -> None:
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]
    _, stream = run(
        {"input": "weather?", "tools": tools},
        [
            ClientToolCall("call_9", "get_weather", '{"city":"Oslo"}'),
            Usage(10, 2),
            Finished("tool_calls"),
        ],
    )
    assert kinds(stream) == [
        "created",
        "in_progress",
        "output_item.added",
        "function_call_arguments.delta",
        "function_call_arguments.done",
        "output_item.done",
        "completed",
    ]
    assert stream[2]["item"]["status"] == "in_progress" and stream[2]["item"]["arguments"] == ""
    final = check_with_sdk(stream, input_tools=tools)
    [call] = final.output
    assert call.type == "function_call" and call.status == "completed" and call.call_id == "call_9"
    assert final.tools[0].type == "function" and final.tools[0].name == "get_weather"


def test_preamble_text_before_a_tool_call_is_its_own_message_item() -> None:
    _, stream = run(
        {"input": "q"},
        [
            TextDelta("Let me look. "),
            ToolCallStarted("a", "web_search", "{}", None),
            ToolCallFinished("a", "web_search", "r", True),
            TextDelta("Found it."),
            Finished("stop"),
        ],
    )
    final = check_with_sdk(stream)
    assert [item.type for item in final.output] == ["message", "web_search_call", "message"]
    assert final.output_text == "Let me look. Found it."


def test_hitting_the_token_limit_is_an_incomplete_response() -> None:
    _, stream = run({"input": "q", "max_output_tokens": 5}, [TextDelta("partial"), Finished("length")])
    assert stream[-1]["type"] == "response.incomplete"
    final = check_with_sdk(stream)
    assert final.status == "incomplete" and final.incomplete_details is not None
    assert final.incomplete_details.reason == "max_output_tokens" and final.max_output_tokens == 5
    assert final.output[0].status == "incomplete"


def test_a_failure_mid_stream_is_a_failed_response_with_an_error() -> None:
    _, stream = run({"input": "q"}, [TextDelta("part")], end="fail")
    assert stream[-1]["type"] == "response.failed"
    final = check_with_sdk(stream)
    assert final.status == "failed" and final.error is not None
    assert final.error.code == "server_error" and final.error.message == "upstream went away"


def test_an_interrupted_response_keeps_what_was_produced() -> None:
    _, stream = run({"input": "q"}, [TextDelta("half an ans")], end="interrupt")
    final = check_with_sdk(stream)
    assert final.status == "incomplete" and final.output_text == "half an ans"


def test_chained_request_echoes_its_links() -> None:
    request = parse_responses_request({"input": "two", "conversation": "chat", "instructions": "terse"})
    builder = ResponseBuilder(request, model="m", created_at=123)
    builder.start()
    builder.feed(TextDelta("2"))
    builder.finish()
    final = Response.model_validate(builder.response())
    assert final.conversation is not None and final.conversation.id == "chat"
    assert final.instructions == "terse" and final.created_at == 123 and final.previous_response_id is None


def test_a_run_that_ends_after_tool_results_is_a_complete_response() -> None:
    _, stream = run(
        {"input": "q"},
        [
            ToolCallStarted("a", "web_search", "{}", None),
            ToolCallFinished("a", "web_search", "r", True),
            Finished("stop"),
        ],
    )
    final = check_with_sdk(stream)
    assert final.status == "completed" and [item.type for item in final.output] == ["web_search_call"]


@pytest.mark.parametrize("previous", [None, "resp_prev"])
def test_previous_response_id_is_echoed(previous: str | None) -> None:
    body: dict[str, Any] = {"input": "x"}
    if previous:
        body["previous_response_id"] = previous
    _, stream = run(body, [TextDelta("y"), Finished("stop")])
    assert check_with_sdk(stream).previous_response_id == previous


@pytest.mark.parametrize("text", ['tok0 ', 'quote " backslash \\ /', 'new\nline\t\x00', 'é 中文 😀 \u2028',
                                  "lone \ud800 surrogate", "x" * 5000])
def test_every_stream_event_is_written_as_json_dumps_writes_it(text):
    _, stream = run({"model": "m", "input": "hi", "stream": True},
                    [TextDelta(text), ToolCallStarted("c1", "web_search", '{"q": "é"}', None),
                     ToolCallFinished("c1", "web_search", "found", True), TextDelta(text), Usage(3, 4),
                     Finished("stop")])
    assert any(event["type"] == "response.output_text.delta" for event in stream)
    for event in stream:
        assert event_json(event) == json.dumps(event, ensure_ascii=False)


def test_many_small_deltas_add_up_in_every_place_the_text_shows():
    first = [f"a{i} " for i in range(300)]
    second = [f"b{i} " for i in range(300)]
    builder, stream = run(
        {"model": "m", "input": "hi", "stream": True},
        [*map(TextDelta, first), ToolCallStarted("c1", "web_search", "{}", None),
         ToolCallFinished("c1", "web_search", "found", True), *map(TextDelta, second), Usage(1, 2),
         Finished("stop")],
    )
    check_with_sdk(stream)
    done = [event["text"] for event in stream if event["type"] == "response.output_text.done"]
    assert done == ["".join(first), "".join(second)]
    assert builder.output_text == "".join(first) + "".join(second)
    final = stream[-1]["response"]
    assert [item["content"][0]["text"] for item in final["output"] if item["type"] == "message"] == done


@pytest.mark.parametrize("end", ["finish", "fail", "interrupt"])
def test_without_events_the_response_is_the_same(end: str) -> None:
    # a request without `stream` builds no events, and must end with exactly what a stream would
    body = {"input": "find it", "tools": [{"type": "function", "name": "lookup", "parameters": {}}]}
    agent_events = [
        TextDelta("Looking "), ToolCallStarted("call_1", "web_search", '{"query": "otters"}', "🔍 otters"),
        ToolCallFinished("call_1", "web_search", '{"success": true}', True), TextDelta("Found "), TextDelta("it."),
        ClientToolCall("call_2", "lookup", '{"term": "x"}'), Usage(10, 5), Finished("tool_calls"),
    ]
    streamed, stream = run(body, agent_events, end)
    request = parse_responses_request(body)
    quiet = ResponseBuilder(request, model="agent-gateway", events=False,
                            response_id=streamed.id, created_at=streamed.created_at)
    produced = quiet.start()
    for event in agent_events:
        produced += quiet.feed(event)
    produced += getattr(quiet, end)() if end != "fail" else quiet.fail("upstream went away")
    assert stream and produced == []

    def without_ids(value: Any) -> Any:  # item ids are random per builder; the clock may tick between
        text = json.dumps({**value, "completed_at": value["completed_at"] is not None}, sort_keys=True)
        for builder in (streamed, quiet):
            for item in builder.response()["output"]:
                text = text.replace(item["id"], "ID")
        return json.loads(text)

    streamed_response, quiet_response = streamed.response(), quiet.response()
    assert without_ids(quiet_response) == without_ids(streamed_response)
