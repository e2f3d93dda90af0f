"""The one run loop behind both routes: when `x-should-retry: false` is sent, and what a failure
looks like once a stream has started (an error frame / `response.failed`, then a clean end of body)."""

from __future__ import annotations

import asyncio
import json
import resource
import sys
from typing import Any

import aiohttp
import pytest

from tests.fakes.tools import LookupTool
from tests.fakes.upstream import Reply, error, text, tool_call
from tests.support.gateway_process import LISTENING, REPO, GatewayProcess, gateway_env
from tests.support.helpers import assert_error_envelope, sse_frames

ROUTES = {
    "chat": ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
    "responses": ("/v1/responses", {"input": "hi"}),
}


def body_for(route: str, stream: bool) -> tuple[str, dict[str, Any]]:
    path, body = ROUTES[route]
    return path, {**body, "stream": stream}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("route", ["chat", "responses"])
async def test_a_failure_before_any_tool_ran_is_an_http_error_that_leaves_retry_to_the_client(
    client: Any, upstream: Any, route: str, stream: bool
) -> None:
    upstream.queue(error(500, "died at once"))
    path, body = body_for(route, stream)
    resp = await client.post(path, json=body)
    assert resp.status == 502
    assert resp.content_type == "application/json"
    assert "x-should-retry" not in resp.headers
    assert_error_envelope(await resp.json())


@pytest.mark.parametrize("route", ["chat", "responses"])
async def test_a_whole_reply_failing_after_a_tool_ran_says_do_not_retry(
    client: Any, upstream: Any, lookup_tool: Any, route: str
) -> None:
    upstream.queue(tool_call(("lookup", {"term": "x"})), error(500, "died in round two"))
    path, body = body_for(route, False)
    resp = await client.post(path, json=body)
    assert resp.status == 502
    assert resp.headers["x-should-retry"] == "false"
    assert_error_envelope(await resp.json())
    assert lookup_tool.calls == [{"term": "x"}]


async def test_a_chat_stream_failing_after_a_tool_ran_ends_with_an_error_frame_and_done(
    client: Any, upstream: Any, lookup_tool: Any
) -> None:
    upstream.queue(tool_call(("lookup", {"term": "x"})), error(500, "died in round two"))
    path, body = body_for("chat", True)
    resp = await client.post(path, json=body)
    # the status line left with the first event: what the client can still see is the last frames
    assert resp.status == 200 and resp.content_type == "text/event-stream"
    assert "x-should-retry" not in resp.headers
    frames = sse_frames((await resp.read()).decode())
    assert frames[-1] == (None, "[DONE]")
    error_frame = json.loads(frames[-2][1])
    assert_error_envelope(error_frame)
    assert "died in round two" in error_frame["error"]["message"]
    assert lookup_tool.calls == [{"term": "x"}]


async def test_a_responses_stream_failing_after_a_tool_ran_ends_with_response_failed(
    client: Any, upstream: Any, lookup_tool: Any
) -> None:
    upstream.queue(tool_call(("lookup", {"term": "x"})), error(500, "died in round two"))
    path, body = body_for("responses", True)
    resp = await client.post(path, json=body)
    assert resp.status == 200 and resp.content_type == "text/event-stream"
    assert "x-should-retry" not in resp.headers
    frames = sse_frames((await resp.read()).decode())
    assert [name for name, _ in frames][:2] == ["response.created", "response.in_progress"]
    name, payload = frames[-1]
    assert name == "response.failed"
    failed = json.loads(payload)["response"]
    assert failed["status"] == "failed" and "died in round two" in failed["error"]["message"]
    assert lookup_tool.calls == [{"term": "x"}]


async def test_a_store_failing_after_a_responses_stream_started_is_response_failed_and_a_clean_end(
    make_client: Any, settings: Any, upstream: Any
) -> None:
    # the database file is garbage: the store opens lazily and fails on the save that comes after
    # the stream's first bytes (a disk full or a read-only file fails at the same point)
    settings.db_path.write_bytes(b"not a database" * 100)
    # with API_SERVER_KEY: a store whose keys cannot be read serves no keyless request (issue 42)
    auth = {"Authorization": "Bearer broken-store-key"}
    client = await make_client(tools=[], api_key="broken-store-key")
    upstream.queue(text("an answer that cannot be stored"))
    resp = await client.post("/v1/responses", json={"input": "x", "stream": True, "store": True}, headers=auth)
    assert resp.status == 200 and resp.content_type == "text/event-stream"
    # read to the end with aiohttp's strict chunked parser: a second HTTP head inside the body
    # ("HTTP/1.1 503 ...") fails here as an illegal chunk header, or the read hangs
    async with asyncio.timeout(10):
        raw = await resp.read()
    frames = sse_frames(raw.decode())
    assert b"HTTP/1.1" not in raw
    names = [name for name, _ in frames]
    assert names[0] == "response.created" and names[-1] == "response.failed"
    assert "response.completed" not in names
    sequence = [json.loads(payload)["sequence_number"] for _, payload in frames]
    assert sequence == list(range(len(frames)))
    failed = json.loads(frames[-1][1])["response"]
    assert failed["status"] == "failed"
    assert failed["error"]["message"] == "The response store is unavailable; retry shortly."
    # the gateway is still serving on the same connection pool
    chat = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]},
                             headers=auth)
    assert chat.status == 200


async def test_a_full_disk_under_a_responses_stream_is_response_failed_and_a_clean_end(tmp_path, upstream):
    """Issue 15's reproduction: a real gateway process whose file writes fail past 2 MB
    (RLIMIT_FSIZE, as on a full disk), streamed stored responses until the store refuses one."""
    limit = 2 * 1024 * 1024

    def small_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    upstream.default = text("an answer")
    # a window that takes the big inputs: the disk, not the context, is what runs out
    env = gateway_env(tmp_path, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                                 "LLM_CONTEXT_WINDOW": "1000000"})
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "serve", "--port", "0", env=env, cwd=str(REPO),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, preexec_fn=small_disk)
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
    match = LISTENING.search(line)
    assert match, line
    gateway = GatewayProcess(proc, match.group(1))
    try:
        endings = []
        async with aiohttp.ClientSession() as session:
            for _ in range(12):
                body = {"input": "x" * 400_000, "stream": True, "store": True}
                async with session.post(f"{gateway.base_url}/v1/responses", json=body) as resp:
                    assert resp.status == 200
                    async with asyncio.timeout(20):
                        raw = await resp.read()  # strict chunked parsing: no second head inside
                frames = sse_frames(raw.decode())
                endings.append(frames[-1][0])
                if endings[-1] == "response.failed":
                    failed = json.loads(frames[-1][1])["response"]
                    assert "response store" in failed["error"]["message"]
                    break
            assert endings[-1] == "response.failed", endings
            assert set(endings[:-1]) <= {"response.completed"}
            async with session.post(f"{gateway.base_url}/v1/chat/completions",
                                    json={"messages": [{"role": "user", "content": "hi"}]}) as resp:
                assert resp.status == 200
        assert proc.returncode is None
    finally:
        await gateway.stop()


async def test_a_store_failing_under_a_whole_reply_is_still_a_503(
    make_client: Any, settings: Any, upstream: Any
) -> None:
    settings.db_path.write_bytes(b"not a database" * 100)
    client = await make_client(tools=[])
    resp = await client.post("/v1/responses", json={"input": "x", "stream": False, "store": True})
    assert resp.status == 503
    assert_error_envelope(await resp.json(), code="service_unavailable")


async def test_a_stream_the_client_reads_to_the_end_has_a_well_formed_chunked_body(client: Any, upstream: Any) -> None:
    upstream.queue(text("fine"))
    path, body = body_for("responses", True)
    resp = await client.post(path, json=body)
    try:
        raw = await resp.read()
    except aiohttp.ClientPayloadError as exc:  # pragma: no cover - what the bug looks like
        pytest.fail(f"the body is not well-formed chunked encoding: {exc}")
    assert sse_frames(raw.decode())[-1][0] == "response.completed"


@pytest.mark.parametrize("route", ["chat", "responses"])
async def test_a_whole_reply_cut_by_the_run_timeout_while_a_tool_ran_says_do_not_retry(
    make_client: Any, upstream: Any, route: str
) -> None:
    slow = LookupTool(delay=5)
    client = await make_client(tools=[slow], run_timeout=0.5)
    upstream.queue(tool_call(("lookup", {"term": "x"})), text("never"))
    path, body = body_for(route, False)
    resp = await client.post(path, json=body)
    assert resp.status == 504
    assert resp.headers["x-should-retry"] == "false"
    assert_error_envelope(await resp.json(), code="run_timeout")


DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize("route", ["chat", "responses"])
async def test_an_unexpected_fault_after_a_stream_started_is_an_error_frame_not_a_second_http_head(
    client: Any, upstream: Any, route: str
) -> None:
    # a first good frame starts the stream; the next one nests past Python's recursion limit
    upstream.queue(Reply(raw=b'data: {"choices": [{"delta": {"content": "ok"}}]}\n\ndata: ' + DEEP + b"\n\n",
                         raw_content_type="text/event-stream"))
    path, body = body_for(route, True)
    resp = await client.post(path, json=body)
    assert resp.status == 200 and resp.content_type == "text/event-stream"
    async with asyncio.timeout(10):
        raw = await resp.read()
    assert b"HTTP/1.1" not in raw
    frames = sse_frames(raw.decode())
    if route == "chat":
        assert frames[-1] == (None, "[DONE]")
        assert_error_envelope(json.loads(frames[-2][1]))
    else:
        assert frames[-1][0] == "response.failed"
