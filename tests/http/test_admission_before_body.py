"""A request that cannot get a run slot is refused (429) before the gateway reads its body: a real
server, every slot held by a slow fake upstream, and a raw socket that sends the headers of an
8 MB body and only its first kilobyte, then waits for the answer."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.fakes.upstream import text

BODY_BYTES = 8_000_000


@pytest.mark.parametrize(("path", "extra_header"), [
    ("/v1/chat/completions", ""),
    ("/v1/responses", ""),
    ("/v1/responses", "Idempotency-Key: k-1\r\n"),  # the Idempotency-Key check reads the body too
    # curl's way with a large body: the answer is the 429, not a "100 Continue" asking for the body
    ("/v1/chat/completions", "Expect: 100-continue\r\n"),
])
async def test_a_request_over_the_run_limit_gets_its_429_before_sending_its_body(
        make_client: Any, upstream: Any, path: str, extra_header: str) -> None:
    client = await make_client(tools=[], max_concurrent_runs=1, body_timeout=120.0, max_body_bytes=10_000_000)
    upstream.queue(text("slow", delay=60))
    running = asyncio.ensure_future(client.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "hold the only slot"}]}))
    try:
        async with asyncio.timeout(10):
            while not upstream.requests:
                await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"{extra_header}Content-Length: {BODY_BYTES}\r\n\r\n")
        # a client waiting for 100 Continue sends nothing of its body yet
        first_kilobyte = b'{"input": "' + b"x" * 1000 if "Expect" not in extra_header else b""
        writer.write(head.encode() + first_kilobyte)
        await writer.drain()
        try:
            # a guard against a hang, not a measure: the gateway must answer now, the rest of the
            # body never being sent
            async with asyncio.timeout(20):
                status_line = await reader.readline()
                headers = {}
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.decode().partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers["content-length"]))
        finally:
            writer.close()
        assert status_line.startswith(b"HTTP/1.1 429"), status_line
        assert "retry-after" in headers
        assert json.loads(body)["error"]["code"] == "rate_limit_exceeded"
    finally:
        running.cancel()


async def test_with_a_run_slot_free_an_expect_100_continue_client_is_asked_for_its_body(
        make_client: Any, upstream: Any) -> None:
    client = await make_client(tools=[], max_concurrent_runs=1)
    upstream.queue(text("fine"))
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    writer.write(f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 f"Expect: 100-continue\r\nContent-Length: {len(body)}\r\n\r\n".encode())
    try:
        async with asyncio.timeout(20):
            assert (await reader.readline()).startswith(b"HTTP/1.1 100 Continue")
            assert await reader.readline() == b"\r\n"
            writer.write(body)
            assert (await reader.readline()).startswith(b"HTTP/1.1 200")
    finally:
        writer.close()
