"""The model's reasoning relayed: chat `reasoning_content`, Responses `reasoning` items, both
streamed and whole; given back upstream within a turn's tool rounds, never from the client's history."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fakes.upstream import Reply, text, tool_call
from tests.support.helpers import chat_chunks, sse_frames, streamed_text

USER = [{"role": "user", "content": "What is 6 times 7?"}]


def reasoning_of(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in chunks if c.get("choices"))


def responses_events(body: str) -> list[dict[str, Any]]:
    return [json.loads(data) for _, data in sse_frames(body)]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "reasoning_text"])
async def test_chat_stream_relays_reasoning_as_reasoning_content_before_the_text(client, upstream, field):
    upstream.queue(text("42.", reasoning="Six sevens are forty-two.", reasoning_field=field, chunk_size=5))
    resp = await client.post("/v1/chat/completions", json={"messages": USER, "stream": True})
    chunks = chat_chunks(await resp.text())
    assert reasoning_of(chunks) == "Six sevens are forty-two."
    assert streamed_text(chunks) == "42."
    kinds = [next(iter(c["choices"][0]["delta"]), None) for c in chunks if c["choices"]]
    assert kinds.index("reasoning_content") < kinds.index("content", 1)  # [0] is the role chunk


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "reasoning_text"])
async def test_chat_whole_reply_carries_message_reasoning_content(client, upstream, field):
    upstream.queue(text("42.", reasoning="Six sevens.", reasoning_field=field))
    body = await (await client.post("/v1/chat/completions", json={"messages": USER})).json()
    message = body["choices"][0]["message"]
    assert (message["content"], message["reasoning_content"]) == ("42.", "Six sevens.")


async def test_reasoning_comes_in_order_with_tool_progress_in_every_round(client, upstream):
    upstream.queue(tool_call(("lookup", {"term": "sky"}), reasoning="I should look it up."),
                   text("Green.", reasoning="The tool says green."))
    chunks = chat_chunks(await (await client.post(
        "/v1/chat/completions", json={"messages": USER, "stream": True})).text())
    order = []
    for chunk in chunks[1:]:
        delta = chunk["choices"][0]["delta"] if chunk["choices"] else {}
        if delta.get("reasoning_content"):
            order.append(("thinks", delta["reasoning_content"]))
        elif delta.get("content"):
            order.append(("says", delta["content"]))
    joined: list[tuple[str, str]] = []
    for kind, piece in order:
        if joined and joined[-1][0] == kind:
            joined[-1] = (kind, joined[-1][1] + piece)
        else:
            joined.append((kind, piece))
    assert joined == [("thinks", "I should look it up."), ("says", "`🔍 sky`\n\n"),
                      ("thinks", "\n\nThe tool says green."), ("says", "Green.")]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_within_a_turn_the_upstream_gets_its_reasoning_back_under_its_own_field(
        client, upstream, stream, field):
    upstream.queue(tool_call(("lookup", {"term": "sky"}), reasoning="Look it up.", reasoning_field=field),
                   text("Green."))
    resp = await client.post("/v1/chat/completions", json={"messages": USER, "stream": stream})
    assert resp.status == 200
    await resp.read()
    [assistant] = [m for m in upstream.requests[1]["messages"] if m["role"] == "assistant"]
    assert assistant[field] == "Look it up."
    assert [k for k in ("reasoning_content", "reasoning", "reasoning_text") if k in assistant] == [field]


async def test_reasoning_in_the_clients_chat_history_is_not_sent_upstream(client, upstream):
    history = [*USER, {"role": "assistant", "content": "42.", "reasoning_content": "Six sevens.",
                       "reasoning": "Six sevens."},
               {"role": "user", "content": "And 6 times 8?"}]
    await (await client.post("/v1/chat/completions", json={"messages": history})).read()
    [assistant] = [m for m in upstream.requests[0]["messages"] if m["role"] == "assistant"]
    assert assistant == {"role": "assistant", "content": "42."}


async def test_a_previous_responses_reasoning_is_not_sent_upstream_next_turn(client, upstream):
    upstream.queue(text("42.", reasoning="Six sevens."), text("48."))
    first = await (await client.post("/v1/responses", json={"input": "6*7?"})).json()
    assert [item["type"] for item in first["output"]] == ["reasoning", "message"]
    await (await client.post("/v1/responses", json={"input": "6*8?", "previous_response_id": first["id"]})).read()
    sent = upstream.requests[1]["messages"]
    assert not any("reasoning" in key for message in sent for key in message)
    assert "Six sevens." not in json.dumps(sent)


async def test_a_reasoning_input_item_is_kept_with_the_input_but_not_sent_upstream(client, upstream):
    items = [{"role": "user", "content": "6*7?"},
             {"type": "reasoning", "id": "rs_abc", "summary": [],
              "content": [{"type": "reasoning_text", "text": "Six sevens."}]},
             {"role": "assistant", "content": "42."}, {"role": "user", "content": "6*8?"}]
    created = await (await client.post("/v1/responses", json={"input": items})).json()
    assert "Six sevens." not in json.dumps(upstream.requests[0]["messages"])
    listed = await (await client.get(f"/v1/responses/{created['id']}/input_items?order=asc")).json()
    assert [item["type"] for item in listed["data"]] == ["message", "reasoning", "message", "message"]
    assert listed["data"][1]["id"] == "rs_abc"


async def test_a_reasoning_input_item_of_the_wrong_shape_is_a_400(client):
    resp = await client.post("/v1/responses", json={"input": [{"type": "reasoning", "summary": "no"}]})
    assert resp.status == 400
    assert (await resp.json())["error"]["param"] == "input[0].summary"


async def test_responses_whole_reply_has_a_reasoning_item_before_its_message_and_get_returns_it(client, upstream):
    upstream.queue(text("42.", reasoning="Six sevens."))
    body = await (await client.post("/v1/responses", json={"input": "6*7?"})).json()
    reasoning, message = body["output"]
    assert reasoning["id"].startswith("rs_")
    # the summary as OpenAI's service sends it (what the Vercel AI SDK, langchain and pydantic-ai
    # read), and the content (what the Agents SDK, openai-python and litellm read)
    assert reasoning == {"id": reasoning["id"], "type": "reasoning", "status": "completed",
                         "summary": [{"type": "summary_text", "text": "Six sevens."}],
                         "content": [{"type": "reasoning_text", "text": "Six sevens."}]}
    assert body["reasoning"] == {"effort": None, "summary": None}
    assert message["content"][0]["text"] == "42."
    stored = await (await client.get(f"/v1/responses/{body['id']}")).json()
    assert stored["output"] == body["output"]


async def test_responses_stream_sends_the_reasoning_text_events_once_in_order_with_right_indexes(client, upstream):
    upstream.queue(text("42.", reasoning="Six sevens are 42.", chunk_size=6))
    events = responses_events(await (await client.post(
        "/v1/responses", json={"input": "6*7?", "stream": True})).text())
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    deltas = kinds.count("response.reasoning_text.delta")
    assert deltas == 3
    expected = [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added",
        *["response.reasoning_text.delta"] * deltas,
        "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added",
    ]
    assert kinds[:len(expected)] == expected
    assert not any(k.startswith("response.reasoning_summary") for k in kinds)  # not asked for: streamed once
    rs_events = [e for e in events if e["type"].startswith("response.reasoning_text")]
    rs_id = events[2]["item"]["id"]
    assert all((e["item_id"], e["output_index"], e["content_index"]) == (rs_id, 0, 0) for e in rs_events)
    assert "".join(e["delta"] for e in rs_events[:-1]) == rs_events[-1]["text"] == "Six sevens are 42."
    done = events[len(expected) - 3]["item"]
    assert done["content"] == [{"type": "reasoning_text", "text": "Six sevens are 42."}]
    assert done["summary"] == [{"type": "summary_text", "text": "Six sevens are 42."}]  # the item keeps both
    message_added = events[len(expected) - 2]
    assert (message_added["output_index"], message_added["item"]["type"]) == (1, "message")
    final = events[-1]["response"]
    assert [item["type"] for item in final["output"]] == ["reasoning", "message"]


async def test_responses_stream_asked_for_a_summary_sends_the_summary_events_only(client, upstream):
    upstream.queue(text("42.", reasoning="Six sevens are 42.", chunk_size=6))
    events = responses_events(await (await client.post(
        "/v1/responses", json={"input": "6*7?", "stream": True, "reasoning": {"summary": "auto"}})).text())
    kinds = [e["type"] for e in events]
    expected = [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.reasoning_summary_part.added",
        *["response.reasoning_summary_text.delta"] * 3,
        "response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added",
    ]
    assert kinds[:len(expected)] == expected
    assert "response.reasoning_text.delta" not in kinds
    rs_id = events[2]["item"]["id"]
    summary_events = [e for e in events if e["type"].startswith("response.reasoning_summary")]
    assert all((e["item_id"], e["output_index"], e["summary_index"]) == (rs_id, 0, 0) for e in summary_events)
    assert summary_events[0]["part"] == {"type": "summary_text", "text": ""}
    assert "".join(e["delta"] for e in summary_events[1:-2]) == summary_events[-2]["text"] == "Six sevens are 42."
    assert summary_events[-1]["part"] == {"type": "summary_text", "text": "Six sevens are 42."}
    done = events[len(expected) - 3]["item"]
    assert done["content"] == [{"type": "reasoning_text", "text": "Six sevens are 42."}]  # the item keeps both
    assert done["summary"] == [{"type": "summary_text", "text": "Six sevens are 42."}]


async def test_responses_reasoning_of_each_round_leads_its_calls_and_the_answer(client, upstream):
    upstream.queue(tool_call(("lookup", {"term": "sky"}), reasoning="Look it up."),
                   text("Green.", reasoning="It says green."))
    body = await (await client.post("/v1/responses", json={"input": "sky?"})).json()
    assert [item["type"] for item in body["output"]] == [
        "reasoning", "web_search_call", "reasoning", "message"]
    assert [item["content"][0]["text"] for item in body["output"] if item["type"] == "reasoning"] == [
        "Look it up.", "It says green."]


@pytest.mark.parametrize("stream", [False, True])
async def test_api_server_reasoning_hide_drops_it_from_both_apis(make_client, upstream, stream):
    client = await make_client(reasoning="hide")
    upstream.queue(text("42.", reasoning="SECRET-THOUGHT"), text("42.", reasoning="SECRET-THOUGHT"))
    chat = await (await client.post("/v1/chat/completions", json={"messages": USER, "stream": stream})).text()
    responses = await (await client.post("/v1/responses", json={"input": "6*7?", "stream": stream})).text()
    assert "42." in chat and "42." in responses
    assert "SECRET-THOUGHT" not in chat and "SECRET-THOUGHT" not in responses
    assert '"type": "reasoning"' not in responses and '"type":"reasoning"' not in responses


async def test_inline_think_tags_stay_in_the_text(client, upstream):
    upstream.queue(text("<think>hmm</think>42."))
    chunks = chat_chunks(await (await client.post(
        "/v1/chat/completions", json={"messages": USER, "stream": True})).text())
    assert streamed_text(chunks) == "<think>hmm</think>42."
    assert reasoning_of(chunks) == ""


@pytest.mark.parametrize("bad", [{"text": "x"}, 42, ["a"], True])
async def test_a_malformed_reasoning_delta_is_skipped_and_the_stream_goes_on(client, upstream, bad):
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    frames = [
        {**base, "choices": [{"index": 0, "delta": {"reasoning_content": "fine "}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"reasoning_content": bad}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"reasoning": bad, "content": "42."}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    raw = "".join(f"data: {json.dumps(f)}\n\n" for f in frames) + "data: [DONE]\n\n"
    upstream.queue(Reply(raw=raw.encode(), raw_content_type="text/event-stream"),
                   Reply(raw=raw.encode(), raw_content_type="text/event-stream"))
    chunks = chat_chunks(await (await client.post(
        "/v1/chat/completions", json={"messages": USER, "stream": True})).text())
    assert (reasoning_of(chunks), streamed_text(chunks)) == ("fine ", "42.")
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    events = responses_events(await (await client.post(
        "/v1/responses", json={"input": "x", "stream": True})).text())
    assert events[-1]["type"] == "response.completed"
    assert [item["type"] for item in events[-1]["response"]["output"]] == ["reasoning", "message"]


def reasoning_pieces(chunks: list[dict[str, Any]]) -> list[str]:
    return [c["choices"][0]["delta"]["reasoning_content"] for c in chunks
            if c.get("choices") and c["choices"][0]["delta"].get("reasoning_content")]


# (Open WebUI's mode sends each round's reasoning as a <think> block: tests/http/test_openwebui_default.py)
@pytest.mark.parametrize("progress", ["inline", "off"])
async def test_chat_stream_starts_each_later_rounds_reasoning_after_a_blank_line(make_client, lookup_tool,
                                                                                  upstream, progress):
    client = await make_client(tools=[lookup_tool], tool_progress=progress)
    upstream.queue(tool_call(("lookup", {"term": "sky"}), reasoning="I should look it up."),
                   text("Green.", reasoning="The tool says green."))
    body = await (await client.post("/v1/chat/completions", json={"messages": USER, "stream": True})).text()
    pieces = reasoning_pieces(chat_chunks(body))
    # any client joining the deltas shows both rounds as one text
    assert "".join(pieces) == "I should look it up.\n\nThe tool says green."
    # the separator leads the new round's first delta: none before the first round, none trailing
    assert [p for p in pieces if "\n" in p] == ["\n\nThe tool"]
    assert '"reasoning_content":"\\n\\nThe tool"' in body


@pytest.mark.parametrize("stream", [False, True])
async def test_chat_reasoning_of_three_rounds_is_joined_by_blank_lines_skipping_a_round_without_any(
        client, upstream, stream):
    upstream.queue(tool_call(("lookup", {"term": "a"}), reasoning="First."),
                   tool_call(("lookup", {"term": "b"})),
                   tool_call(("lookup", {"term": "c"}), reasoning="Third."),
                   text("Done.", reasoning="Last."))
    resp = await client.post("/v1/chat/completions", json={"messages": USER, "stream": stream})
    if stream:
        reasoning = reasoning_of(chat_chunks(await resp.text()))
    else:
        reasoning = (await resp.json())["choices"][0]["message"]["reasoning_content"]
    assert reasoning == "First.\n\nThird.\n\nLast."


@pytest.mark.parametrize("stream", [False, True])
async def test_chat_reasoning_only_in_a_later_round_has_no_leading_separator(client, upstream, stream):
    upstream.queue(tool_call(("lookup", {"term": "sky"})), text("Green.", reasoning="The tool says green."))
    resp = await client.post("/v1/chat/completions", json={"messages": USER, "stream": stream})
    if stream:
        reasoning = reasoning_of(chat_chunks(await resp.text()))
    else:
        reasoning = (await resp.json())["choices"][0]["message"]["reasoning_content"]
    assert reasoning == "The tool says green."


async def test_chat_whole_reply_joins_the_rounds_reasoning_with_a_blank_line(client, upstream):
    upstream.queue(tool_call(("lookup", {"term": "sky"}), reasoning="Look it up."),
                   text("Green.", reasoning="It says green."))
    body = await (await client.post("/v1/chat/completions", json={"messages": USER})).json()
    assert body["choices"][0]["message"]["reasoning_content"] == "Look it up.\n\nIt says green."


async def test_the_upstream_gets_each_rounds_own_reasoning_back_without_a_separator(client, upstream):
    upstream.queue(tool_call(("lookup", {"term": "a"}), reasoning="First."),
                   tool_call(("lookup", {"term": "b"}), reasoning="Second."), text("Done."))
    await (await client.post("/v1/chat/completions", json={"messages": USER, "stream": True})).read()
    sent = [m.get("reasoning_content") for m in upstream.requests[2]["messages"] if m["role"] == "assistant"]
    assert sent == ["First.", "Second."]


async def test_responses_stream_gives_each_round_its_own_reasoning_item_without_a_separator(client, upstream):
    upstream.queue(tool_call(("lookup", {"term": "sky"}), reasoning="Look it up."),
                   text("Green.", reasoning="It says green."))
    events = responses_events(await (await client.post(
        "/v1/responses", json={"input": "sky?", "stream": True})).text())
    items = [e["item"] for e in events if e["type"] == "response.output_item.done" and e["item"]["type"] == "reasoning"]
    assert [item["content"][0]["text"] for item in items] == ["Look it up.", "It says green."]
    for item in items:
        deltas = [e["delta"] for e in events if e["type"] == "response.reasoning_text.delta"
                  and e["item_id"] == item["id"]]
        assert "".join(deltas) == item["content"][0]["text"]
    assert [i["type"] for i in events[-1]["response"]["output"]] == [
        "reasoning", "web_search_call", "reasoning", "message"]


async def test_hidden_reasoning_of_two_rounds_sends_no_separator(make_client, lookup_tool, upstream):
    client = await make_client(tools=[lookup_tool], reasoning="hide")
    upstream.queue(tool_call(("lookup", {"term": "sky"}), reasoning="A."), text("Green.", reasoning="B."))
    body = await (await client.post("/v1/chat/completions", json={"messages": USER, "stream": True})).text()
    assert "reasoning_content" not in body


@pytest.mark.parametrize(("asked", "summary"), [
    ({"summary": "auto"}, [{"type": "summary_text", "text": "Six sevens."}]),
    ({"summary": "detailed", "effort": "high"}, [{"type": "summary_text", "text": "Six sevens."}]),
    # an upstream that writes no summary: concise gives the whole reasoning too
    ({"summary": "concise"}, [{"type": "summary_text", "text": "Six sevens."}]),
    ({"summary": "none"}, []),
])
async def test_responses_reasoning_summary_follows_the_request(client, upstream, asked, summary):
    upstream.queue(text("42.", reasoning="Six sevens."), text("42.", reasoning="Six sevens."))
    body = await (await client.post("/v1/responses", json={"input": "6*7?", "reasoning": asked})).json()
    assert body["output"][0]["summary"] == summary
    assert body["output"][0]["content"] == [{"type": "reasoning_text", "text": "Six sevens."}]
    assert body["reasoning"] == {"effort": asked.get("effort"), "summary": asked["summary"]}
    events = responses_events(await (await client.post(
        "/v1/responses", json={"input": "6*7?", "reasoning": asked, "stream": True})).text())
    kinds = {e["type"] for e in events}
    # streamed once: as the summary when one is asked for, else as the reasoning text
    assert ("response.reasoning_summary_text.delta" in kinds) == bool(summary)
    assert ("response.reasoning_text.delta" in kinds) == (not summary)


@pytest.mark.parametrize(("asked", "param"), [
    ("high", "reasoning"), ({"summary": "short"}, "reasoning.summary"), ({"effort": 5}, "reasoning.effort")])
async def test_a_bad_reasoning_field_is_a_400(client, asked, param):
    resp = await client.post("/v1/responses", json={"input": "hi", "reasoning": asked})
    assert resp.status == 400
    assert (await resp.json())["error"]["param"] == param
