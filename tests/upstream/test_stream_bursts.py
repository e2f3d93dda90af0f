"""Stream frames that arrive together (one network read) against the same frames one per read.

The gateway hands the text deltas of one received piece through the agent and the encoder as one
item; what the client sees must not depend on how the upstream's bytes were cut: the same chunks
(one per upstream frame), the same Responses events and sequence numbers, the same Open WebUI
display. And batching never holds a frame back: a frame that arrives alone leaves at once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

CHAT = "/v1/chat/completions"
HI = {"messages": [{"role": "user", "content": "hi"}]}


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return b"data: " + json.dumps({
        "id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).encode() + b"\n\n"


USAGE = b"data: " + json.dumps({"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 1,
                                "model": "m", "choices": [],
                                "usage": {"prompt_tokens": 7, "completion_tokens": 9}}).encode() + b"\n\n"
DONE = b"data: [DONE]\n\n"
TEXTS = ["Hel", "lo ", "\u00e9t\u00e9 ", 'say "hi"\n', "\\ ", "\U0001f600", "x" * 5000, "end."]


def answer_frames() -> list[bytes]:
    """A reply with every kind of frame among its text: reasoning before and inside the text,
    an empty content delta, a text longer than one client chunk, then finish and usage."""
    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "thinking "}),
        chunk({"reasoning_content": "more"}),
        *(chunk({"content": t}) for t in TEXTS[:4]),
        chunk({"content": ""}),
        chunk({"reasoning_content": "again"}),
        *(chunk({"content": t}) for t in TEXTS[4:]),
        chunk({}, "stop"),
        USAGE,
        DONE,
    ]


def tool_frames() -> list[bytes]:
    """Text, then a call to the client's own tool in fragments, in one reply."""
    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Let me "}),
        chunk({"content": "check."}),
        chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": "lookup", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"x"}'}}]}),
        chunk({}, "tool_calls"),
        USAGE,
        DONE,
    ]


class Sender:
    """An upstream that sends scripted SSE frames: all in one write (`together`), or one write
    each with a pause between (`apart`), or waiting before frame i until `gates[i]` is set."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.mode = "together"
        self.gates: dict[int, asyncio.Event] = {}

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if self.mode == "together":
            await response.write(b"".join(self.frames))
        else:
            for i, frame in enumerate(self.frames):
                if i in self.gates:
                    await asyncio.wait_for(self.gates[i].wait(), 10)
                elif self.mode == "apart" and i:
                    await asyncio.sleep(0.01)
                await response.write(frame)
        await response.write_eof()
        return response


@pytest.fixture
async def sender(aiohttp_server: Any) -> Sender:
    fake = Sender()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.handle)
    server = await aiohttp_server(app)
    fake.base_url = str(server.make_url("/v1"))  # type: ignore[attr-defined]
    return fake


Post = Callable[..., Awaitable[list[Any]]]


@pytest.fixture
async def post(make_client: Any, sender: Sender) -> AsyncIterator[Post]:
    clients: dict[tuple[Any, ...], Any] = {}

    async def run(frames: list[bytes], mode: str, path: str = CHAT, body: dict[str, Any] | None = None,
                  **settings: Any) -> list[Any]:
        """The stream's `data:` payloads as the client got them, ids and times taken out."""
        key = tuple(sorted(settings.items()))
        if key not in clients:
            clients[key] = await make_client(llm_base_url=sender.base_url, **settings)
        sender.frames, sender.mode = frames, mode
        resp = await clients[key].post(path, json={**(HI if path == CHAT else {}), "stream": True, **(body or {})})
        assert resp.status == 200
        return [_neutral(line[6:]) for line in (await resp.text()).split("\n") if line.startswith("data: ")]

    yield run


def _neutral(payload: str) -> Any:
    if payload == "[DONE]":
        return payload
    data = json.loads(payload)
    for key in ("id", "created", "created_at", "item_id", "response"):
        data.pop(key, None)
    if isinstance(data.get("item"), dict):
        data["item"] = {k: v for k, v in data["item"].items() if k != "id"}
    return data


def _content(payloads: list[Any]) -> str:
    return "".join(p["choices"][0]["delta"].get("content") or "" for p in payloads
                   if isinstance(p, dict) and p.get("choices"))


async def test_a_burst_gives_the_client_the_same_chunks_as_frames_one_per_read(post):
    usage = {"stream_options": {"include_usage": True}}
    together = await post(answer_frames(), "together", body=usage)
    apart = await post(answer_frames(), "apart", body=usage)
    assert together == apart
    assert _content(together) == "".join(TEXTS)
    texts = [p["choices"][0]["delta"]["content"] for p in together
             if isinstance(p, dict) and p.get("choices") and p["choices"][0]["delta"].get("content")]
    # one chunk per upstream text, the long one cut at 4,096 characters as always
    assert texts == [*TEXTS[:6], "x" * 4096, "x" * 904, "end."]
    assert together[-2]["usage"]["completion_tokens"] == 9 and together[-1] == "[DONE]"


async def test_a_burst_with_a_client_tool_call_is_the_same_as_frames_one_per_read(post):
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    together = await post(tool_frames(), "together", body={"tools": tools})
    assert together == await post(tool_frames(), "apart", body={"tools": tools})
    assert _content(together) == "Let me check."
    calls = [p["choices"][0]["delta"]["tool_calls"][0] for p in together
             if isinstance(p, dict) and p.get("choices") and p["choices"][0]["delta"].get("tool_calls")]
    assert calls[0]["function"]["name"] == "lookup"
    assert "".join(c["function"]["arguments"] for c in calls) == '{"q": "x"}'
    assert together[-2]["choices"][0]["finish_reason"] == "tool_calls"


async def test_open_webuis_display_is_the_same_for_a_burst(post):
    together = await post(answer_frames(), "together", tool_progress="openwebui")
    assert together == await post(answer_frames(), "apart", tool_progress="openwebui")
    content = _content(together)
    assert "thinking more" in content and content.endswith("".join(TEXTS[4:]))


async def test_a_responses_stream_of_a_burst_has_the_same_events_and_sequence_numbers(post):
    body = {"input": "hi"}
    together = await post(answer_frames(), "together", path="/v1/responses", body=body)
    apart = await post(answer_frames(), "apart", path="/v1/responses", body=body)
    assert together == apart
    assert [e["sequence_number"] for e in together] == list(range(len(together)))
    deltas = [e["delta"] for e in together if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == "".join(TEXTS) and len(deltas) == len(TEXTS) + 1  # the long one in two


async def test_text_before_a_malformed_frame_in_the_same_read_reaches_the_client_first(post):
    frames = [chunk({"content": "first "}), chunk({"content": "second"}), b"data: {not json\n\n", DONE]
    payloads = await post(frames, "together")
    assert _content(payloads) == "first second"
    assert "malformed stream frame" in payloads[-2]["error"]["message"] and payloads[-1] == "[DONE]"


async def test_a_frame_arriving_alone_leaves_at_once_not_with_the_next(make_client, sender):
    """The upstream sends each text frame only once the client has the one before: a frame held
    back for company (the first, or one after it) would stall the stream until the gate's timeout."""
    frames = [chunk({"role": "assistant", "content": ""}), *(chunk({"content": f"t{i} "}) for i in range(4)),
              chunk({}, "stop"), DONE]
    sender.frames, sender.mode = frames, "gated"
    sender.gates = {i: asyncio.Event() for i in (2, 3, 4)}  # before t1, t2, t3
    client = await make_client(llm_base_url=sender.base_url)
    resp = await client.post(CHAT, json={**HI, "stream": True})
    seen = ""
    for i in range(4):
        while f"t{i} " not in seen:
            line = await asyncio.wait_for(resp.content.readline(), 5)
            assert line, "the stream ended early"
            if line.startswith(b"data: {"):
                seen += json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
        if i + 2 in sender.gates:
            sender.gates[i + 2].set()  # only now does the upstream send the next frame
    assert seen == "t0 t1 t2 t3 "
    assert b"[DONE]" in await resp.read()
