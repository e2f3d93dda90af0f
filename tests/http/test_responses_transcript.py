"""What a stored response keeps of its turn, seen where it matters: the conversation the model gets
when a client continues from it (`previous_response_id`), streamed or not, finished or cut short."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.fakes.upstream import error, text, tool_call
from tests.support.helpers import sse_frames

NEXT = {"role": "user", "content": "and then?"}
WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}


def lookup_output(term: str) -> str:
    return json.dumps({"success": True, "term": term, "fact": "the sky is green"})


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


async def create(client: Any, body: dict[str, Any], stream: bool) -> str:
    resp = await client.post("/v1/responses", json={**body, "stream": stream})
    assert resp.status == 200, await resp.text()
    if not stream:
        return str((await resp.json())["id"])
    frames = sse_frames(await resp.text())
    return str(json.loads(frames[0][1])["response"]["id"])


async def sent_when_continued(client: Any, upstream: Any, response_id: str,
                              next_input: Any = "and then?") -> list[dict[str, Any]]:
    """The conversation the model receives for a turn continuing `response_id` (its system prompt left out)."""
    upstream.queue(text("ok"))
    resp = await client.post("/v1/responses", json={"input": next_input, "previous_response_id": response_id})
    assert resp.status == 200, await resp.text()
    return list(upstream.requests[-1]["messages"][1:])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_text_answer_is_kept_as_one_assistant_message(client: Any, upstream: Any, stream: bool) -> None:
    upstream.queue(text("Hello"))
    response_id = await create(client, {"input": "hi"}, stream)
    assert await sent_when_continued(client, upstream, response_id) == [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"}, NEXT,
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_tool_round_is_kept_as_the_call_its_result_and_the_answer(
    client: Any, upstream: Any, stream: bool
) -> None:
    upstream.queue(tool_call(("lookup", {"term": "news"})), text("Nothing new."))
    response_id = await create(client, {"input": "news?"}, stream)
    assert await sent_when_continued(client, upstream, response_id) == [
        {"role": "user", "content": "news?"},
        {"role": "assistant", "content": "", "tool_calls": [call("call_0", "lookup", {"term": "news"})]},
        {"role": "tool", "tool_call_id": "call_0", "content": lookup_output("news")},
        {"role": "assistant", "content": "Nothing new."},
        NEXT,
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_parallel_calls_share_one_assistant_message_and_a_preamble_stays_with_them(
    client: Any, upstream: Any, stream: bool
) -> None:
    upstream.queue(tool_call(("lookup", {"term": "a"}), ("lookup", {"term": "b"}), text="Let me look. "),
                   text("Found it."))
    response_id = await create(client, {"input": "q"}, stream)
    assert await sent_when_continued(client, upstream, response_id) == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "Let me look. ",
         "tool_calls": [call("call_0", "lookup", {"term": "a"}), call("call_1", "lookup", {"term": "b"})]},
        {"role": "tool", "tool_call_id": "call_0", "content": lookup_output("a")},
        {"role": "tool", "tool_call_id": "call_1", "content": lookup_output("b")},
        {"role": "assistant", "content": "Found it."},
        NEXT,
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_client_tool_call_is_kept_for_the_client_s_result_to_follow(
    client: Any, upstream: Any, stream: bool
) -> None:
    upstream.queue(tool_call(("get_weather", {"city": "Oslo"})))
    response_id = await create(client, {"input": "weather?", "tools": [WEATHER]}, stream)
    result = [{"type": "function_call_output", "call_id": "call_0", "output": "sunny"}]
    assert await sent_when_continued(client, upstream, response_id, result) == [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": [call("call_0", "get_weather", {"city": "Oslo"})]},
        {"role": "tool", "tool_call_id": "call_0", "content": "sunny"},
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_turn_whose_last_round_wrote_nothing_still_ends_on_an_assistant_message(
    client: Any, upstream: Any, stream: bool
) -> None:
    upstream.queue(tool_call(("lookup", {"term": "x"})), text(""))
    response_id = await create(client, {"input": "q"}, stream)
    sent = await sent_when_continued(client, upstream, response_id)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[3] == {"role": "assistant", "content": ""}


async def test_a_stream_that_failed_mid_answer_keeps_what_was_written(client: Any, upstream: Any) -> None:
    upstream.queue(text("This answer will be cut off somewhere", chunk_size=4, drop_after=3))
    response_id = await create(client, {"input": "q"}, True)
    assert await sent_when_continued(client, upstream, response_id) == [
        {"role": "user", "content": "q"}, {"role": "assistant", "content": "This ans"}, NEXT,
    ]


async def test_a_stream_that_failed_after_a_tool_ran_keeps_the_call_and_its_result(client: Any, upstream: Any) -> None:
    upstream.queue(tool_call(("lookup", {"term": "x"})), error(500, "died in round two"))
    response_id = await create(client, {"input": "q"}, True)
    assert await sent_when_continued(client, upstream, response_id) == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [call("call_0", "lookup", {"term": "x"})]},
        {"role": "tool", "tool_call_id": "call_0", "content": lookup_output("x")},
        NEXT,
    ]


async def test_a_stream_the_client_left_keeps_the_partial_answer(client: Any, upstream: Any) -> None:
    upstream.queue(text("word " * 40, chunk_size=5, chunk_delay=0.02))
    resp = await client.post("/v1/responses", json={"input": "long please", "stream": True})
    seen = b""
    while seen.count(b"response.output_text.delta") < 2:
        seen += await resp.content.readany()
    response_id = json.loads(sse_frames(seen.decode())[0][1])["response"]["id"]
    resp.close()
    for _ in range(200):
        got = await client.get(f"/v1/responses/{response_id}")
        if got.status == 200:
            break
        await asyncio.sleep(0.02)
    sent = await sent_when_continued(client, upstream, response_id)
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    partial = sent[1]["content"]
    assert partial and ("word " * 40).startswith(partial) and len(partial) < len("word " * 40)
