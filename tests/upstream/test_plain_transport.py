"""The plain HTTP transport (asyncio + httptools, gateway/upstream/plain_transport.py) on real sockets
against a raw server on 127.0.0.1 writing exact bytes: framing, pooling, the faults and their words,
timeouts, cancellation, shutdown. (tests/upstream/test_upstream_client.py runs the gateway over it.)"""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from gateway.upstream.plain_transport import PlainTransport
from gateway.upstream.transport import (
    ClosedUnanswered,
    Disconnected,
    TransportSettings,
    Unreachable,
    Unreadable,
)
from gateway.upstream.transport_choice import open_transport
from tests.fakes.raw_upstream import Close, RawUpstream, Script, completion_body, ok
from tests.support.faults import free_port
from tests.support.helpers import assert_error_envelope

HEADERS = {"Accept": "application/json", "User-Agent": "agent-gateway/test", "Authorization": "Bearer sk-plain"}
HI = {"messages": [{"role": "user", "content": "hi"}]}


class Pieces:
    """A server that reads one request per turn and answers with `pieces` written one at a time,
    a pause between them (so each arrives on its own), then closes if `close` says so."""

    def __init__(self, pieces: list[bytes], *, close: bool = False, pause: float = 0.01) -> None:
        self.pieces, self.close_after, self.pause = pieces, close, pause
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                for piece in self.pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(self.pause)
                if self.close_after:
                    break
                if not await reader.read(1):  # the client closed (or sent its next request: not here)
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def raw() -> AsyncIterator[Callable[[Script], Awaitable[RawUpstream]]]:
    servers: list[RawUpstream] = []

    async def start(script: Script) -> RawUpstream:
        servers.append(await RawUpstream.start(script))
        return servers[-1]

    yield start
    for server in servers:
        await server.close()


@pytest.fixture
async def pieces() -> AsyncIterator[Callable[..., Awaitable[tuple[Pieces, str]]]]:
    servers: list[Pieces] = []

    async def start(*args: Any, **kw: Any) -> tuple[Pieces, str]:
        servers.append(Pieces(*args, **kw))
        return servers[-1], await servers[-1].start()

    yield start
    for server in servers:
        await server.close()


@pytest.fixture
async def plain(raw: Any, pieces: Any) -> AsyncIterator[Callable[..., Awaitable[PlainTransport]]]:
    """Transports closed before the servers (`raw`) are: no server task is left reading a socket."""
    made: list[PlainTransport] = []

    async def make(url: str, read_timeout: float = 5.0, connect_timeout: float = 5.0) -> PlainTransport:
        transport = PlainTransport(TransportSettings(url, HEADERS, connect_timeout, read_timeout))
        made.append(transport)
        return transport

    yield make
    for transport in made:
        await transport.close()


async def chat(transport: PlainTransport, url: str, body: bytes = b"{}", **kw: Any) -> tuple[int, bytes]:
    reply = await transport.send("POST", url + "/chat/completions", body, kw.get("headers"))
    try:
        return reply.status, await reply.read_whole(1 << 20)
    finally:
        await reply.close()


async def streamed(reply: Any) -> list[bytes]:
    pieces = []
    while piece := await reply.read_chunk():
        pieces.append(piece)
    await reply.close()
    return pieces


async def closed_within_a_second(server: RawUpstream) -> int:
    for _ in range(50):
        if server.closed_by_client:
            break
        await asyncio.sleep(0.02)
    return server.closed_by_client


def test_auto_picks_the_plain_transport_for_http_without_a_proxy_and_aiohttp_otherwise(monkeypatch):
    async def kinds() -> list[str]:
        names = []
        for url, client in (("http://127.0.0.1:9/v1", "auto"), ("https://127.0.0.1:9/v1", "auto"),
                            ("http://127.0.0.1:9/v1", "aiohttp"), ("http://10.1.2.3:9/v1", "auto"),
                            ("http://localhost:9/v1", "auto")):
            transport = open_transport(TransportSettings(url, {}, 1, 1, client))
            names.append(type(transport).__name__)
            await transport.close()
        return names

    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    assert asyncio.run(kinds()) == ["PlainTransport", "AiohttpTransport", "AiohttpTransport",
                                    "AiohttpTransport", "PlainTransport"]  # 10.1.2.3 goes through the proxy


async def test_chunked_reply_cut_at_odd_places_reads_whole_and_piece_by_piece(plain, pieces):
    body = b"data: " + b"x" * 40 + b"\n\n" + b"data: [DONE]\n\n"
    wire = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + \
        b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (17, body[:17], len(body) - 17, body[17:])
    cuts = [0, 3, 71, 72, 90, 101, len(wire) - 2, len(wire)]  # inside the head, a size line, a CRLF ...
    server, url = await pieces([wire[a:b] for a, b in zip(cuts, cuts[1:], strict=False)])
    transport = await plain(url)
    assert await chat(transport, url) == (200, body)
    reply = await transport.send("POST", url + "/chat/completions", b"{}", None, stream=True)
    assert reply.header("content-type") == reply.header("Content-Type") == "text/event-stream"
    assert b"".join(await streamed(reply)) == body
    assert server.connections == 1  # both on one kept-alive connection


async def test_content_length_replies_on_one_connection_for_sequential_requests(plain, raw):
    server = await raw(lambda conn, n, req: ok(completion_body(f"answer {n}")))
    transport = await plain(server.base_url)
    for n in range(1, 6):
        status, body = await chat(transport, server.base_url)
        assert status == 200 and f"answer {n}".encode() in body
    assert server.connections == 1 and len(server.requests) == 5


async def test_the_request_carries_host_length_type_authorization_and_extra_headers(plain, raw):
    server = await raw(lambda conn, n, req: ok())
    transport = await plain(server.base_url)
    await chat(transport, server.base_url, b'{"a": 1}', headers={"traceparent": "00-abc-def-01"})
    sent = server.requests[0]
    head, _, body = sent.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") and body == b'{"a": 1}'
    for line in (b"Host: 127.0.0.1:%d" % server.port, b"Content-Length: 8", b"Content-Type: application/json",
                 b"Authorization: Bearer sk-plain", b"User-Agent: agent-gateway/test",
                 b"Accept-Encoding: gzip, deflate", b"traceparent: 00-abc-def-01"):
        assert b"\r\n" + line + b"\r\n" in head + b"\r\n", line
    with pytest.raises(ValueError, match="line break"):
        await transport.send("GET", server.base_url + "/models", None, {"x-evil": "a\r\nHost: elsewhere"})


async def test_a_reply_framed_by_the_close_is_read_to_the_end_and_not_pooled(plain, raw):
    server = await raw(lambda conn, n, req: Close(b"HTTP/1.1 200 OK\r\n\r\n" + b"until the end " * 1000))
    transport = await plain(server.base_url)
    for _ in range(2):
        assert await chat(transport, server.base_url) == (200, b"until the end " * 1000)
    assert server.connections == 2


@pytest.mark.parametrize("head", [b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n",
                                  b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n"])
async def test_connection_close_and_http_1_0_replies_are_not_pooled(plain, raw, head):
    server = await raw(lambda conn, n, req: head + b"{}")
    transport = await plain(server.base_url)
    for _ in range(3):
        assert await chat(transport, server.base_url) == (200, b"{}")
    assert server.connections == 3


async def test_a_pooled_connection_the_server_closed_unanswered_is_closed_unanswered_reused(plain, raw):
    server = await raw(lambda conn, n, req: None if n == 2 else ok())
    transport = await plain(server.base_url)
    assert (await chat(transport, server.base_url))[0] == 200
    with pytest.raises(ClosedUnanswered) as caught:
        await chat(transport, server.base_url)
    assert caught.value.reused  # the client sends it once more, on a new connection
    assert (await chat(transport, server.base_url))[0] == 200
    silent = await raw(lambda conn, n, req: None)
    with pytest.raises(ClosedUnanswered) as caught:  # and a new connection closed unanswered is not
        await chat(await plain(silent.base_url), silent.base_url)
    assert not caught.value.reused


async def test_an_idle_connection_the_server_closed_is_not_reused(plain, raw):
    server = await raw(lambda conn, n, req: Close(ok()) if conn == 1 else ok())
    transport = await plain(server.base_url)
    for _ in range(2):
        assert (await chat(transport, server.base_url))[0] == 200
        await asyncio.sleep(0.05)  # idle: the server's close has come
    assert server.connections == 2


async def test_a_close_mid_body_is_disconnected(plain, raw):
    server = await raw(lambda conn, n, req: Close(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"partial"))
    transport = await plain(server.base_url)
    with pytest.raises(Disconnected, match="mid-reply"):
        await chat(transport, server.base_url)
    chunked = await raw(lambda conn, n, req: Close(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                                   b"5\r\nhello\r\n"))
    reply = await transport.send("POST", chunked.base_url + "/chat/completions", b"{}", None, stream=True)
    assert await reply.read_chunk() == b"hello"
    with pytest.raises(Disconnected):
        await reply.read_chunk()


@pytest.mark.parametrize("wire", [b"SSH-2.0-OpenSSH_9.6\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                                  b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"])
async def test_bytes_that_are_not_http_are_unreadable(plain, raw, wire):
    server = await raw(lambda conn, n, req: wire)
    transport = await plain(server.base_url)
    with pytest.raises(Unreadable, match="not a readable HTTP reply"):
        await chat(transport, server.base_url)


async def test_gzip_and_deflate_bodies_are_decoded(plain, raw):
    text = completion_body("packed " * 200)
    replies = [gzip.compress(text), zlib.compress(text)]
    server = await raw(lambda conn, n, req: ok(replies[n - 1], extra=b"Content-Encoding: %s\r\n"
                                               % (b"gzip" if n == 1 else b"deflate")))
    transport = await plain(server.base_url)
    assert await chat(transport, server.base_url) == (200, text)
    reply = await transport.send("POST", server.base_url + "/chat/completions", b"{}", None, stream=True)
    assert b"".join(await streamed(reply)) == text
    assert server.connections == 1


async def test_interim_replies_are_skipped(plain, raw):
    server = await raw(lambda conn, n, req: b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n"
                       b"Link: </a>\r\n\r\n" + ok(b"{}", extra=b"X-Final: yes\r\n"))
    transport = await plain(server.base_url)
    reply = await transport.send("GET", server.base_url + "/models", None, None)
    assert reply.status == 200 and reply.header("x-final") == "yes" and reply.header("link") is None
    assert await reply.read_whole(100) == b"{}"


#: a head with what llhttp accepts and reads its own way: names in any case, a repeated header,
#: spaces and tabs before a value (dropped) and after it (kept), an empty value, a Latin-1 byte
ODD_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Rep: one\r\nx-rep:two\r\n"
            b"X-Spaced: \t lead and trail  \r\nX-Empty:\r\nX-Latin: caf\xe9\r\nRETRY-AFTER: 7\r\n"
            b"Content-Length: 2\r\n\r\n")


def httptools_headers(wire: bytes) -> dict[str, str]:
    """The headers as httptools' per-header callback gives them (what the transport read before)."""
    import httptools

    class Collect:
        def __init__(self) -> None:
            self.headers: dict[str, str] = {}

        def on_header(self, name: bytes, value: bytes) -> None:
            key, text = name.decode("latin-1").lower(), value.decode("latin-1")
            self.headers[key] = f"{self.headers[key]}, {text}" if key in self.headers else text

    collect = Collect()
    httptools.HttpResponseParser(collect).feed_data(wire)
    return collect.headers


@pytest.mark.parametrize("cuts", [[], [5, 22, 60, 93, len(ODD_HEAD) - 1]],
                         ids=["whole", "cut in the status line, a name, between CR and LF, a value, the blank line"])
async def test_headers_are_read_as_httptools_reads_them_whole_or_cut_anywhere(plain, pieces, cuts):
    wire = ODD_HEAD + b"{}"
    expected = httptools_headers(wire)
    assert expected["x-rep"] == "one, two" and expected["x-spaced"] == "lead and trail  "
    edges = [0, *cuts, len(wire)]
    _, url = await pieces([wire[a:b] for a, b in zip(edges, edges[1:], strict=False)], pause=0.005)
    transport = await plain(url)
    for _ in range(2):  # a second reply on the kept connection reads its own head
        reply = await transport.send("POST", url + "/chat/completions", b"{}", None)
        assert reply.status == 200
        for name, value in expected.items():
            assert reply.header(name) == reply.header(name.upper()) == value
        assert reply.header("x-absent") is None
        assert await reply.read_whole(100) == b"{}"


async def test_a_reply_without_headers_has_none_and_its_body(plain, raw):
    server = await raw(lambda conn, n, req: Close(b"HTTP/1.1 200 OK\r\n\r\n{\"a\": 1}"))
    transport = await plain(server.base_url)
    reply = await transport.send("GET", server.base_url + "/models", None, None)
    assert reply.status == 200 and reply.header("content-type") is None
    assert await reply.read_whole(100) == b'{"a": 1}'


async def test_a_later_reply_on_a_kept_connection_times_out_after_the_read_timeout(plain, raw):
    # the first reply leaves its read timer armed: the second, unanswered, still waits its full timeout
    server = await raw(lambda conn, n, req: ok() if n == 1 else b"")
    transport = await plain(server.base_url, read_timeout=0.4)
    assert (await chat(transport, server.base_url))[0] == 200
    await asyncio.sleep(0.3)  # most of the first timer's span gone before the second request
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(TimeoutError):
        await chat(transport, server.base_url)
    assert 0.39 < loop.time() - started < 2.0
    assert server.connections == 1


@pytest.mark.parametrize("wire", [b"", b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345"])
async def test_read_timeout_is_a_timeout_error_and_closes_the_connection(plain, raw, wire):
    server = await raw(lambda conn, n, req: wire)
    transport = await plain(server.base_url, read_timeout=0.2)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(TimeoutError):
        await chat(transport, server.base_url)
    assert 0.19 < loop.time() - started < 1.5
    assert await closed_within_a_second(server) == 1


async def test_bytes_that_keep_coming_hold_off_the_read_timeout(plain, pieces):
    _, url = await pieces([b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n", *[b"x"] * 8], pause=0.1)
    transport = await plain(url, read_timeout=0.3)  # 0.8 s in all, never 0.3 s without a byte
    assert await chat(transport, url) == (200, b"x" * 8)


@pytest.mark.parametrize("wire", [b"", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"])
async def test_a_cancelled_wait_closes_the_connection_at_once(plain, raw, wire):
    server = await raw(lambda conn, n, req: wire)
    transport = await plain(server.base_url, read_timeout=30)

    async def ask() -> None:
        reply = await transport.send("POST", server.base_url + "/chat/completions", b"{}", None, stream=True)
        await streamed(reply)

    task = asyncio.ensure_future(ask())
    while not server.requests:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # waiting for the head, or for the body's next bytes
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await closed_within_a_second(server) == 1


async def test_a_reply_let_go_before_its_end_is_not_pooled(plain, raw):
    server = await raw(lambda conn, n, req: ok(b"x" * 100))
    transport = await plain(server.base_url)
    reply = await transport.send("POST", server.base_url + "/chat/completions", b"{}", None)
    await reply.close()
    assert await closed_within_a_second(server) == 1
    assert (await chat(transport, server.base_url))[0] == 200
    assert server.connections == 2


async def test_a_large_body_read_slowly_arrives_whole(plain, raw):
    big = b"y" * (3 * 1024 * 1024)
    server = await raw(lambda conn, n, req: ok(big))
    transport = await plain(server.base_url)
    reply = await transport.send("GET", server.base_url + "/models", None, None)
    got = bytearray()
    while piece := await reply.read_chunk():
        got += piece
        await asyncio.sleep(0.001)  # a slow reader: the socket is paused, not buffered whole
    assert bytes(got) == big


async def test_shutdown_closes_idle_connections(plain, raw):
    server = await raw(lambda conn, n, req: ok())
    transport = await plain(server.base_url)
    await chat(transport, server.base_url)
    await transport.close()
    assert await closed_within_a_second(server) == 1


async def test_a_refused_connection_is_unreachable_in_the_os_words(plain):
    for host in ("127.0.0.1", "localhost"):  # localhost: every address refused, still said once
        transport = await plain(f"http://{host}:{free_port()}/v1")
        with pytest.raises(Unreachable) as caught:
            await transport.send("GET", f"http://{host}:{free_port()}/v1/models", None, None)
        assert caught.value.reason == "Connection refused"


async def test_the_words_a_user_sees_for_each_fault(make_client, raw):
    cases: list[tuple[bytes | None, int, str]] = [
        (None, 502, "the upstream model closed the connection mid-reply"),
        (Close(b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n{"), 502,
         "the upstream model closed the connection mid-reply"),
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", 502, "the upstream model failed: not a readable HTTP reply"),
    ]
    for wire, status, words in cases:
        server = await raw(lambda conn, n, req, wire=wire: wire)  # type: ignore[misc]
        client = await make_client(llm_base_url=server.base_url)
        resp = await client.post("/v1/chat/completions", json=HI)
        data = await resp.json()
        assert resp.status == status and data["error"]["message"].startswith(words), data
        assert_error_envelope(data)
    client = await make_client(llm_base_url=f"http://127.0.0.1:{free_port()}/v1")
    resp = await client.post("/v1/chat/completions", json=HI)
    data = await resp.json()
    assert resp.status == 502
    assert data["error"]["message"] == "the upstream model is unreachable (Connection refused)"
