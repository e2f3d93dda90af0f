"""Upstream faults become clear errors, and the gateway keeps serving."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from tests.fakes.tools import LookupTool
from tests.fakes.upstream import Reply, error, text, tool_call
from tests.support.helpers import assert_error_envelope, chat_chunks, sse_frames, streamed_text

HI = {"messages": [{"role": "user", "content": "hi"}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def assert_still_serving(client, upstream):
    upstream.queue(text("still here"))
    resp = await client.post("/v1/chat/completions", json=HI)
    assert (await resp.json())["choices"][0]["message"]["content"] == "still here"


async def test_unreachable_upstream_is_502(make_client):
    client = await make_client(llm_base_url=f"http://127.0.0.1:{free_port()}/v1")
    resp = await client.post("/v1/chat/completions", json=HI)
    assert resp.status == 502
    body = await resp.json()
    assert_error_envelope(body, code="upstream_unreachable")
    assert "unreachable" in body["error"]["message"]


@pytest.mark.parametrize("stream", [False, True])
async def test_upstream_500_is_502_naming_its_message(client, upstream, stream):
    upstream.queue(error(500, "model crashed on GPU 3"))
    resp = await client.post("/v1/chat/completions", json={**HI, "stream": stream})
    assert resp.status == 502
    body = await resp.json()
    assert_error_envelope(body, code="upstream_error")
    assert "model crashed on GPU 3" in body["error"]["message"]
    await assert_still_serving(client, upstream)


async def test_upstream_429_keeps_retry_after(client, upstream):
    upstream.queue(error(429, "slow down", headers={"Retry-After": "7"}))
    resp = await client.post("/v1/chat/completions", json=HI)
    assert resp.status == 429
    assert resp.headers["Retry-After"] == "7"
    assert_error_envelope(await resp.json(), code="rate_limit_exceeded")


async def test_upstream_400_is_a_400_with_its_message(client, upstream):
    upstream.queue(error(400, "context length exceeded"))
    resp = await client.post("/v1/chat/completions", json=HI)
    assert resp.status == 400
    assert "context length exceeded" in (await resp.json())["error"]["message"]


async def test_upstream_timeout_is_504(make_client, upstream):
    client = await make_client(llm_timeout=0.2)
    upstream.queue(Reply(delay=2))
    resp = await client.post("/v1/chat/completions", json=HI)
    assert resp.status == 504
    assert_error_envelope(await resp.json(), code="upstream_timeout")
    await assert_still_serving(client, upstream)


async def test_invalid_json_from_upstream_is_502(client, upstream):
    upstream.queue(Reply(raw=b"<html>oops</html>"))
    resp = await client.post("/v1/chat/completions", json=HI)
    assert resp.status == 502
    assert "not JSON" in (await resp.json())["error"]["message"]


async def test_stream_cut_mid_way_ends_with_an_error_frame_then_done(client, upstream):
    upstream.queue(Reply(text="This answer will be cut off somewhere", chunk_size=4, drop_after=3))
    resp = await client.post("/v1/chat/completions", json={**HI, "stream": True})
    assert resp.status == 200
    frames = sse_frames(await resp.text())
    assert frames[-1][1] == "[DONE]"
    err = json.loads(frames[-2][1])
    assert_error_envelope(err)
    assert "mid-reply" in err["error"]["message"]
    await assert_still_serving(client, upstream)


async def test_malformed_stream_frame_is_an_error_frame(client, upstream):
    upstream.queue(Reply(raw=b'data: {"choices": [{"delta": {"content": "ok"}}]}\n\ndata: {broken\n\n',
                         raw_content_type="text/event-stream"))
    resp = await client.post("/v1/chat/completions", json={**HI, "stream": True})
    frames = sse_frames(await resp.text())
    assert frames[-1][1] == "[DONE]"
    assert "malformed" in json.loads(frames[-2][1])["error"]["message"]


async def test_error_after_tools_ran_says_do_not_retry(client, upstream, lookup_tool):
    upstream.queue(tool_call(("lookup", {"term": "x"})), error(500, "died in round two"))
    resp = await client.post("/v1/chat/completions", json=HI)
    assert resp.status == 502
    assert resp.headers["x-should-retry"] == "false"
    assert lookup_tool.calls == [{"term": "x"}]


async def test_error_before_any_work_leaves_retry_to_the_client(client, upstream):
    upstream.queue(error(500))
    resp = await client.post("/v1/chat/completions", json=HI)
    assert "x-should-retry" not in resp.headers


async def test_keepalive_comments_during_silence(make_client, upstream):
    client = await make_client(tools=[LookupTool(delay=0.35)], keepalive_interval=0.1)
    upstream.queue(tool_call(("lookup", {"term": "x"})), text("done"))
    resp = await client.post("/v1/chat/completions", json={**HI, "stream": True})
    raw = await resp.text()
    assert ": keepalive\n\n" in raw
    assert streamed_text(chat_chunks(raw)).endswith("done")


async def test_run_timeout_ends_a_stream_with_an_error_frame(make_client, upstream):
    client = await make_client(tools=[LookupTool(delay=5)], run_timeout=1.0, keepalive_interval=0.05)
    upstream.queue(tool_call(("lookup", {"term": "x"})), text("never"))
    resp = await client.post("/v1/chat/completions", json={**HI, "stream": True})
    frames = sse_frames(await resp.text())
    assert frames[-1][1] == "[DONE]"
    assert json.loads(frames[-2][1])["error"]["code"] == "run_timeout"


async def test_concurrency_limit_answers_429_with_retry_after(make_client, upstream):
    client = await make_client(max_concurrent_runs=1)
    upstream.queue(Reply(delay=0.5))
    first = asyncio.ensure_future(client.post("/v1/chat/completions", json=HI))
    while not upstream.requests:
        await asyncio.sleep(0.01)
    second = await client.post("/v1/chat/completions", json=HI)
    assert second.status == 429
    assert second.headers["Retry-After"] == "1"
    assert_error_envelope(await second.json(), code="rate_limit_exceeded")
    assert (await first).status == 200
    third = await client.post("/v1/chat/completions", json=HI)
    assert third.status == 200


async def test_client_disconnect_cancels_the_upstream_request(client, upstream):
    upstream.queue(Reply(text="a long answer " * 50, chunk_size=5, chunk_delay=0.05))
    resp = await client.post("/v1/chat/completions", json={**HI, "stream": True})
    await resp.content.readline()
    resp.close()
    for _ in range(100):
        if upstream.disconnects:
            break
        await asyncio.sleep(0.02)
    assert upstream.disconnects == 1
    assert upstream.completed == 0
