"""Lone UTF-16 surrogates (`\\ud800` escapes) from the upstream or a client never break a reply."""

from __future__ import annotations

import json

import pytest

from gateway.common.json_in import loads, scrub_surrogates
from tests.fakes.upstream import Reply
from tests.support.helpers import chat_chunks, streamed_text

LONE = b'"a\\ud800b"'


def test_loads_replaces_lone_surrogates_and_keeps_escaped_pairs():
    assert loads(b'{"t": "a\\ud800b", "e": "\\ud83d\\ude00", "k\\udfff": 1}') == {
        "t": "a\ufffdb", "e": "😀", "k\ufffd": 1}
    assert scrub_surrogates(["x\udc00"]) == ["x\ufffd"]


def _stream_with_lone_surrogate() -> bytes:
    frame = b'{"choices": [{"index": 0, "delta": {"content": "a\\ud800b"}, "finish_reason": null}]}'
    return b"data: " + frame + b"\n\ndata: [DONE]\n\n"


@pytest.mark.parametrize("stream", [False, True])
async def test_lone_surrogate_from_the_upstream_reaches_the_client_as_replacement(client, upstream, stream):
    if stream:
        upstream.queue(Reply(raw=_stream_with_lone_surrogate(), raw_content_type="text/event-stream"))
    else:
        body = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "a\\ud800b"}, ' \
               b'"finish_reason": "stop"}]}'
        upstream.queue(Reply(raw=body))
    resp = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}],
                                                           "stream": stream})
    assert resp.status == 200
    if stream:
        assert streamed_text(chat_chunks(await resp.text())) == "a\ufffdb"
    else:
        assert (await resp.json())["choices"][0]["message"]["content"] == "a\ufffdb"


async def test_lone_surrogate_in_a_client_input_is_stored_and_answered(client, upstream):
    raw = b'{"input": "hello \\udc00 there", "store": true}'
    resp = await client.post("/v1/responses", data=raw, headers={"Content-Type": "application/json"})
    assert resp.status == 200, await resp.text()
    body = await resp.json()
    stored = await client.get(f"/v1/responses/{body['id']}/input_items")
    assert stored.status == 200
    items = (await stored.json())["data"]
    assert "hello \ufffd there" in json.dumps(items, ensure_ascii=False)
    assert upstream.requests[-1]["messages"][-1]["content"] == "hello \ufffd there"
