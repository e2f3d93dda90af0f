"""Client faults: going away mid-answer, trickling a body, and many clients leaving at random."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from typing import Any

import aiohttp
import pytest

from gateway.http.app import create_app
from tests.fakes.tools import LookupTool
from tests.fakes.upstream import Reply, text
from tests.support.faults import MODE_IDS, MODES, ask, request_for
from tests.support.live_gateway import SERVE_RUNNER_OPTIONS
from tests.support.resources import close_idle_pools, no_leaks


@pytest.fixture
def serve(aiohttp_client: Any, make_settings: Any) -> Any:
    """A gateway test client run with `agent-gateway serve`'s runner options (handler cancellation)."""
    async def make(**overrides: Any) -> Any:
        return await aiohttp_client(create_app(make_settings(**overrides), tools=[LookupTool()]),
                                    server_kwargs=SERVE_RUNNER_OPTIONS)
    return make


async def wait_for(predicate: Any, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize(("api", "stream"), MODES, ids=MODE_IDS)
async def test_a_client_going_away_cancels_the_upstream_request_within_a_second(serve, upstream, api, stream):
    client = await serve()
    upstream.queue(text("warm"))
    assert (await ask(client, api, stream)).ok
    async with no_leaks():
        upstream.queue(Reply(endless=True, chunk_delay=0.02))
        path, body = request_for(api, stream)
        if stream:
            resp = await client.post(path, json=body)
            await resp.content.readline()  # the answer has started
            resp.close()
        else:
            pending = asyncio.ensure_future(client.post(path, json=body))
            await wait_for(lambda: upstream.active == 1)
            pending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pending
        gone = time.monotonic()
        await wait_for(lambda: upstream.disconnects == 1, timeout=2)
        assert upstream.disconnect_times[0] - gone < 1.0
        assert upstream.active == 0
    upstream.queue(text("still here"))
    assert (await ask(client, api, stream)).text == "still here"


async def trickle(port: int, body: bytes, every: float) -> tuple[bytes, bytes, float]:
    """Send headers at once, then the body one byte at a time until the server answers;
    return the reply's head, its body and how long it took."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    start = time.monotonic()
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")

    async def send_slowly() -> None:
        for byte in body:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(every)

    sender = asyncio.ensure_future(send_slowly())
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        took = time.monotonic() - start
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")))
        payload = await asyncio.wait_for(reader.readexactly(length), 5)
    finally:
        sender.cancel()
        with contextlib.suppress(BaseException):
            await sender
        writer.close()
    return head, payload, took


async def test_a_body_trickled_slowloris_style_is_cut_with_a_408(serve, upstream):
    client = await serve(body_timeout=0.3)
    body = json.dumps({"messages": [{"role": "user", "content": "hi" * 50}]}).encode()
    async with no_leaks():
        head, payload, took = await trickle(client.port, body, every=0.05)
    assert head.startswith(b"HTTP/1.1 408"), head
    assert b"Connection: close" in head
    error = json.loads(payload)["error"]
    assert error["code"] == "request_timeout" and "API_SERVER_BODY_TIMEOUT" in error["message"]
    assert took < 2.0
    assert upstream.requests == []
    assert (await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})).status \
        == 200


async def test_two_hundred_clients_leaving_at_random_leave_no_leak(serve, upstream, caplog):
    caplog.set_level(logging.WARNING)
    client = await serve(max_concurrent_runs=256, keepalive_interval=0.05)
    upstream.default = Reply(text="a fairly long answer " * 20, chunk_size=6, chunk_delay=0.005)
    assert (await ask(client, "chat", False)).ok
    rng = random.Random(8)

    async def one(session: aiohttp.ClientSession, i: int) -> None:
        api, stream = MODES[i % 4]
        path, body = request_for(api, stream, prompt=f"q{i}")
        leave_after = rng.uniform(0.0, 0.4)
        try:
            async with session.post(client.make_url(path), json=body) as resp:
                if stream:
                    # a streaming client leaves after its first bytes: mid-stream for sure, however
                    # slow a loaded machine is to get the request that far
                    await resp.content.readany()
                async with asyncio.timeout(leave_after):
                    await resp.read()
        except TimeoutError:
            pass  # this client left mid-way

    async with no_leaks(fd_slack=4, timeout=5.0):
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            await asyncio.gather(*(one(session, i) for i in range(200)))
        await wait_for(lambda: upstream.active == 0, timeout=5)
        await close_idle_pools(client.app)
    assert upstream.disconnects > 0
    # a client leaving is not an error: no "Error handling request" tracebacks from the server
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    for api, stream in MODES:
        upstream.queue(text("still here"))
        assert (await ask(client, api, stream)).text == "still here"


