"""The upstream client (aiohttp's session) through the gateway, against an upstream that answers with
scripted bytes: keep-alive reuse, framing, encodings, TLS, timeouts and the faults a raw socket shows."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from gateway.http.app import create_app
from tests.fakes.raw_upstream import Close, RawUpstream, Script, completion_body, ok
from tests.fakes.upstream import Reply
from tests.support.faults import free_port
from tests.support.helpers import assert_error_envelope
from tests.support.live_gateway import SERVE_RUNNER_OPTIONS

CHAT = "/v1/chat/completions"
HI = {"messages": [{"role": "user", "content": "hi"}]}
StartRaw = Callable[..., Awaitable[RawUpstream]]


@pytest.fixture
async def raw_upstream() -> AsyncIterator[StartRaw]:
    servers: list[RawUpstream] = []

    async def start(script: Script, **kw: Any) -> RawUpstream:
        raw = await RawUpstream.start(script, **kw)
        servers.append(raw)
        return raw

    yield start
    for raw in servers:
        await raw.close()


async def answer(client: Any, **body: Any) -> tuple[int, Any]:
    resp = await client.post(CHAT, json={**HI, **body})
    return resp.status, await resp.json()


def content(data: Any) -> str:
    return data["choices"][0]["message"]["content"]


def sse(*frames: bytes) -> bytes:
    """A chunked text/event-stream reply holding `frames` (each a `data:` payload)."""
    body = b"".join(b"data: " + f + b"\n\n" for f in frames)
    return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))


def text_frame(text: str) -> bytes:
    return json.dumps({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}).encode()


async def test_a_keep_alive_connection_serves_the_next_request(make_client, raw_upstream):
    raw = await raw_upstream(lambda conn, n, req: ok(completion_body(f"answer {n}")))
    client = await make_client(llm_base_url=raw.base_url, llm_api_key="sk-upstream-key")
    for n in (1, 2, 3):
        status, data = await answer(client)
        assert status == 200 and content(data) == f"answer {n}"
    assert raw.connections == 1
    first = raw.requests[0]
    assert first.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"\r\nHost: 127.0.0.1:%d\r\n" % raw.port in first
    assert b"\r\nAuthorization: Bearer sk-upstream-key\r\n" in first
    assert b"\r\nContent-Length: " in first and b"\r\nContent-Type: application/json\r\n" in first


async def test_streams_read_to_done_leave_the_connection_for_the_next_request(make_client, raw_upstream):
    raw = await raw_upstream(lambda conn, n, req: sse(text_frame(f"part {n}"), b"[DONE]"))
    client = await make_client(llm_base_url=raw.base_url)
    for n in (1, 2, 3):
        resp = await client.post(CHAT, json={**HI, "stream": True})
        assert f"part {n}" in await resp.text()
    assert raw.connections == 1


async def test_stream_text_reaches_the_client_before_the_upstream_reply_ends(client, upstream):
    upstream.queue(Reply(text="slow words " * 4, chunk_size=5, chunk_delay=0.2))
    resp = await client.post(CHAT, json={**HI, "stream": True})
    while True:
        line = await resp.content.readline()
        assert line, "the stream ended before any text"
        if line.startswith(b"data: {") and json.loads(line[6:])["choices"][0]["delta"].get("content"):
            break
    assert upstream.active == 1 and upstream.completed == 0  # the upstream is still writing
    assert b"[DONE]" in await resp.read()


async def test_the_tool_schemas_reach_the_upstream_exactly_request_after_request(client, upstream, lookup_tool):
    """Encoded once (gateway/common/json_out.Encoded), written into each body by either transport."""
    for stream in (False, True, False):
        resp = await client.post(CHAT, json={**HI, "stream": stream})
        assert resp.status == 200
        await resp.read()
    assert [r["tools"] for r in upstream.requests] == [[lookup_tool.schema()]] * 3


async def test_a_reply_framed_by_the_connection_closing_is_read_whole(make_client, raw_upstream):
    reply = Close(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + completion_body("until the end"))
    raw = await raw_upstream(lambda conn, n, req: reply)
    client = await make_client(llm_base_url=raw.base_url)
    for _ in range(2):
        status, data = await answer(client)
        assert status == 200 and content(data) == "until the end"
    assert raw.connections == 2  # HTTP/1.0 without keep-alive: never reused


async def test_gzip_replies_are_decoded(make_client, raw_upstream):
    packed = gzip.compress(completion_body("packed " * 100))
    raw = await raw_upstream(lambda conn, n, req: ok(packed, extra=b"Content-Encoding: gzip\r\n"))
    client = await make_client(llm_base_url=raw.base_url)
    status, data = await answer(client)
    assert status == 200 and content(data) == "packed " * 100
    accept = next(line for line in raw.requests[0].split(b"\r\n") if line.lower().startswith(b"accept-encoding:"))
    assert b"gzip" in accept


async def test_interim_100_continue_is_skipped(make_client, raw_upstream):
    raw = await raw_upstream(lambda conn, n, req: b"HTTP/1.1 100 Continue\r\n\r\n" + ok(completion_body("final")))
    client = await make_client(llm_base_url=raw.base_url)
    status, data = await answer(client)
    assert status == 200 and content(data) == "final"


@pytest.mark.parametrize("reply", [b"SSH-2.0-OpenSSH_9.6\r\n\r\n", ok(b"xx", extra=b"Content-Encoding: br\r\n"),
                                   b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Encoding: gzip\r\n\r\nnotgz"])
async def test_bytes_that_are_not_a_readable_reply_are_a_502(make_client, raw_upstream, reply):
    raw = await raw_upstream(lambda conn, n, req: reply)
    client = await make_client(llm_base_url=raw.base_url)
    status, data = await answer(client)
    assert status == 502
    assert_error_envelope(data, code="upstream_error")


async def test_a_pooled_connection_closed_unanswered_is_retried_once_on_a_new_one(make_client, raw_upstream):
    raw = await raw_upstream(lambda conn, n, req: None if (conn, n) == (1, 2) else ok(completion_body(f"conn {conn}")))
    client = await make_client(llm_base_url=raw.base_url)
    assert content((await answer(client))[1]) == "conn 1"
    status, data = await answer(client)
    assert status == 200 and content(data) == "conn 2"
    assert raw.connections == 2 and len(raw.requests) == 3


async def test_a_new_connection_closed_unanswered_is_a_502_not_retried(make_client, raw_upstream):
    raw = await raw_upstream(lambda conn, n, req: None)
    client = await make_client(llm_base_url=raw.base_url)
    status, data = await answer(client)
    assert status == 502 and "closed the connection" in data["error"]["message"]
    assert len(raw.requests) == 1  # a POST is not repeated when the server may have acted on it


@pytest.mark.parametrize("stream", [False, True])
async def test_a_client_leaving_before_the_upstream_answers_closes_the_upstream_connection(
        aiohttp_client, make_settings, raw_upstream, stream):
    # an upstream still working on its answer (no byte of the reply yet), as a model thinking is
    raw = await raw_upstream(lambda conn, n, req: b"")
    client = await aiohttp_client(create_app(make_settings(llm_base_url=raw.base_url)),
                                  server_kwargs=SERVE_RUNNER_OPTIONS)
    pending = asyncio.ensure_future(client.post(CHAT, json={**HI, "stream": stream}))
    while not raw.requests:
        await asyncio.sleep(0.01)
    pending.cancel()  # the client goes away
    with pytest.raises(asyncio.CancelledError):
        await pending
    for _ in range(50):  # within a second: the upstream stops working for nobody
        if raw.closed_by_client:
            break
        await asyncio.sleep(0.02)
    assert raw.closed_by_client == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_headers_then_silence_time_out_as_504_and_close_the_connection(make_client, raw_upstream, stream):
    raw = await raw_upstream(lambda conn, n, req: b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")
    client = await make_client(llm_base_url=raw.base_url, llm_timeout=0.2)
    status, data = await answer(client, stream=stream)
    assert status == 504
    assert_error_envelope(data, code="upstream_timeout")
    for _ in range(50):
        if raw.closed_by_client:
            break
        await asyncio.sleep(0.02)
    assert raw.closed_by_client == 1


async def test_no_answer_at_all_times_out_as_504(make_client, raw_upstream):
    raw = await raw_upstream(lambda conn, n, req: b"")
    client = await make_client(llm_base_url=raw.base_url, llm_timeout=0.2)
    status, data = await answer(client)
    assert status == 504 and "timed out" in data["error"]["message"]


async def test_a_refused_connection_says_why(make_client):
    client = await make_client(llm_base_url=f"http://127.0.0.1:{free_port()}/v1")
    status, data = await answer(client)
    assert status == 502 and "refused" in data["error"]["message"].lower()


async def test_a_connect_that_hangs_is_a_504_after_the_connect_timeout(make_client):
    # a listener whose accept queue is full: the kernel drops the next SYN, so the connect hangs
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = [socket.socket() for _ in range(3)]
        for filler in fillers:
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
        try:
            client = await make_client(llm_base_url=f"http://127.0.0.1:{port}/v1", llm_connect_timeout=0.3,
                                       llm_timeout=30)
            started = time.monotonic()
            status, data = await answer(client)
            assert status == 504, data
            assert_error_envelope(data, code="upstream_timeout")
            assert time.monotonic() - started < 3
        finally:
            for filler in fillers:
                filler.close()


@pytest.fixture
def tls_ca(tmp_path: Any, monkeypatch: Any) -> Any:
    """A throwaway CA that OpenSSL trusts through SSL_CERT_FILE, as a self-hoster's private CA would be."""
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    return ca


async def test_https_upstreams_are_verified_and_spoken_to_over_tls(make_client, raw_upstream, tls_ca):
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls_ca.issue_cert("localhost").configure_cert(server_ctx)
    good = await raw_upstream(lambda conn, n, req: ok(completion_body("over tls")), tls=server_ctx,
                              url_host="localhost")
    status, data = await answer(await make_client(llm_base_url=good.base_url))
    assert status == 200 and content(data) == "over tls"
    assert good.requests[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    # the certificate names localhost only
    wrong = await raw_upstream(lambda conn, n, req: ok(), tls=server_ctx)
    status, data = await answer(await make_client(llm_base_url=wrong.base_url))
    assert status == 502
    assert_error_envelope(data, code="upstream_unreachable")
    assert "TLS" in data["error"]["message"]
