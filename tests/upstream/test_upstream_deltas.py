"""The typed deltas the upstream client hands the agent, from streamed chunks and whole replies alike."""

from __future__ import annotations

import pytest

from gateway.errors import UpstreamError
from gateway.upstream.deltas import Finish, Reasoning, Text, TokenUsage, ToolCallPart, deltas_of
from gateway.upstream.shapes import completion_deltas
from tests.fakes.upstream import Reply


def chunk(delta: dict, finish: str | None = None, **extra: object) -> dict:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "reasoning_text"])
def test_reasoning_is_read_from_each_field_servers_use(field):
    assert deltas_of(chunk({field: "thinking...", "content": "answer"}), "delta") == [
        Reasoning("thinking...", field), Text("answer")]


def test_a_stream_chunk_gives_text_tool_call_fragments_finish_and_usage_in_order():
    data = chunk({"content": "hi", "tool_calls": [
        {"index": 0, "id": "call_a", "function": {"name": "web_search", "arguments": '{"q"'}},
        {"index": 1, "function": {"arguments": ': 1}'}}]}, "tool_calls",
        usage={"prompt_tokens": 7, "completion_tokens": 3})
    assert deltas_of(data, "delta") == [
        Text("hi"), ToolCallPart(0, "call_a", "web_search", '{"q"'), ToolCallPart(1, None, None, ": 1}"),
        Finish("tool_calls"), TokenUsage(7, 3)]


def test_a_whole_reply_gives_the_same_deltas_with_each_call_indexed_by_position():
    data = {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "reasoning_content": "plan",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{}"}},
                       {"id": "c2", "type": "function", "function": {"name": "b", "arguments": ""}}]}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2}}
    assert deltas_of(data, "message") == [
        Reasoning("plan"), ToolCallPart(0, "c1", "a", "{}"), ToolCallPart(1, "c2", "b", None),
        Finish("tool_calls"), TokenUsage(1, 2)]


def test_empty_text_and_non_string_reasoning_give_no_delta():
    assert deltas_of(chunk({"content": "", "reasoning": {"effort": "high"}}), "delta") == []


@pytest.mark.parametrize("stream", [False, True])
async def test_a_reply_with_reasoning_answers_with_its_text_and_relays_the_reasoning(client, upstream, stream):
    frame = b'{"choices": [{"index": 0, "delta": {"reasoning_content": "hmm", "content": "42"}}]}'
    whole = (b'{"choices": [{"index": 0, "finish_reason": "stop",'
             b' "message": {"reasoning_content": "hmm", "content": "42"}}]}')
    upstream.queue(Reply(raw=b"data: " + frame + b"\n\ndata: [DONE]\n\n", raw_content_type="text/event-stream")
                   if stream else Reply(raw=whole))
    resp = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "q"}],
                                                           "stream": stream})
    assert resp.status == 200
    body = await resp.text()
    assert '"content":"42"' in body and '"reasoning_content":"hmm"' in body


def completion(message: object = None, finish: object = "stop", usage: object = None, **choice: object) -> dict:
    body = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None, **choice}]}
    return body if usage is None else {**body, "usage": usage}


@pytest.mark.parametrize("body", [
    completion({"role": "assistant", "content": "Hello."}, usage={"prompt_tokens": 3, "completion_tokens": 2}),
    completion({"role": "assistant", "content": "Hello."}),
    completion({"role": "assistant", "content": ""}, finish=None, usage={"prompt_tokens": None}),
    completion({"role": "assistant", "content": None, "refusal": None}, finish="length", usage={}),
    completion({"role": "assistant", "content": "x", "reasoning_content": None}, usage={"prompt_tokens": 1}),
    completion({"role": "assistant", "content": "x", "tool_calls": []}),
    completion({"content": "x", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]}),
    completion({"content": "x"}, usage={"prompt_tokens": 4, "completion_tokens": 1,
                                        "completion_tokens_details": {"reasoning_tokens": 1}}),
    completion({"content": "x"}, usage={"prompt_tokens": True, "completion_tokens": 1}),
    completion(None, finish="stop"),
], ids=["usual", "no-usage", "empty-text", "null-content", "null-reasoning", "empty-calls", "call", "details",
        "bool-count", "no-message"])
def test_a_whole_completion_reads_as_its_deltas_in_one_pass_or_the_general_way(body):
    assert completion_deltas(body) == deltas_of(body, "message")


@pytest.mark.parametrize("body", [
    completion({"content": 5}),
    completion({"content": "x"}, finish=1),
    completion({"content": "x"}, usage={"prompt_tokens": "3"}),
    completion({"content": "x"}, usage=[1]),
    completion("text"),
], ids=["content-number", "finish-number", "count-string", "usage-list", "message-string"])
def test_a_whole_completion_of_the_wrong_shape_is_an_upstream_error(body):
    with pytest.raises(UpstreamError):
        completion_deltas(body)
