"""The lean upstream HTTP client against a raw TCP server that answers with scripted bytes, on both
asyncio's own loop and uvloop: framing, keep-alive reuse, faults, timeouts and cancellation."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from providers.upstream_http import (
    ConnectFault,
    Disconnected,
    OriginPool,
    ProtocolFault,
    ReadTimeout,
)
from tests.faults import free_port

uvloop = pytest.importorskip("uvloop")

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


class Close(bytes):
    """Bytes to send, after which the server closes the connection."""


#: answer(connection number, request number on that connection, request bytes) -> bytes to send
#: (a `Close` to send them and close); None closes the connection without answering.
Script = Callable[[int, int, bytes], bytes | None]


@dataclass
class RawServer:
    """Reads one request at a time (head + Content-Length body) and sends what the script says."""

    script: Script
    port: int = 0
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    closed_by_client: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                served += 1
                answer = self.script(number, served, request)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if isinstance(answer, Close):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed_by_client += 1
        finally:
            writer.close()


Scenario = Callable[[Callable[[Script], Awaitable[RawServer]]], Awaitable[None]]


def on_both_loops(scenario: Scenario) -> Callable[[str], None]:
    """A test running `scenario(raw_server)` once on asyncio's loop and once on uvloop's (the
    gateway runs on uvloop when it is installed); `raw_server(script)` starts a scripted server."""

    async def with_servers() -> None:
        servers: list[asyncio.Server] = []

        async def raw_server(script: Script) -> RawServer:
            raw = RawServer(script)
            server = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
            servers.append(server)
            raw.port = server.sockets[0].getsockname()[1]
            return raw

        try:
            await scenario(raw_server)
        finally:
            for server in servers:
                server.close()
                await server.wait_closed()

    @pytest.mark.parametrize("loop", LOOPS)
    def test(loop: str) -> None:
        with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
            runner.run(with_servers())

    test.__name__ = scenario.__name__
    test.__doc__ = scenario.__doc__
    return test


def ok(body: bytes = b'{"ok": true}', *, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s" % (
        len(body), extra, body)


def pool_for(raw: RawServer, **kw: Any) -> OriginPool:
    return OriginPool(f"http://127.0.0.1:{raw.port}/v1", connect_timeout=2, read_timeout=kw.pop("read_timeout", 2),
                      headers={"Authorization": "Bearer k"}, **kw)


@on_both_loops
async def test_a_keep_alive_connection_serves_the_next_request(raw_server):
    raw = await raw_server(lambda conn, n, req: ok(b'{"n": %d}' % n))
    pool = pool_for(raw)
    for n in (1, 2, 3):
        async with await pool.request("POST", "/chat/completions", b"{}", "application/json") as response:
            assert response.status == 200
            assert response.headers["content-type"] == "application/json"
            assert await response.read() == b'{"n": %d}' % n
    assert raw.connections == 1
    first = raw.requests[0]
    assert first.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"\r\nHost: 127.0.0.1:%d\r\n" % raw.port in first
    assert b"\r\nAuthorization: Bearer k\r\n" in first and b"\r\nContent-Length: 2\r\n" in first
    await pool.close()


@on_both_loops
async def test_a_chunked_body_arrives_piece_by_piece_before_it_ends(raw_server):
    def script(conn: int, n: int, req: bytes) -> bytes:
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n"

    raw = await raw_server(script)
    pool = pool_for(raw)
    response = await pool.request("GET", "/models")
    assert await response.next_piece() == b"first"  # while the body has not ended
    response.release()  # not read to the end: the connection is closed, not reused
    assert (await pool.request("GET", "/models")).status == 200
    assert raw.connections == 2
    await pool.close()


@on_both_loops
async def test_a_body_framed_by_the_connection_closing_is_read_whole(raw_server):
    raw = await raw_server(lambda conn, n, req: Close(b"HTTP/1.0 200 OK\r\n\r\nuntil the end"))
    pool = pool_for(raw)
    for _ in range(2):
        async with await pool.request("GET", "/models") as response:
            assert await response.read() == b"until the end"
    assert raw.connections == 2  # HTTP/1.0 without keep-alive: never reused
    await pool.close()


@on_both_loops
async def test_gzip_bodies_are_decoded(raw_server):
    packed = gzip.compress(b'{"hello": "world"}' * 100)
    raw = await raw_server(lambda conn, n, req: ok(packed, extra=b"Content-Encoding: gzip\r\n"))
    pool = pool_for(raw)
    async with await pool.request("GET", "/models") as response:
        assert await response.read() == b'{"hello": "world"}' * 100
    assert b"Accept-Encoding: gzip, deflate" in raw.requests[0]
    await pool.close()


async def request_fails(raw_server: Any, answer: bytes, fault: type[Exception], says: str, **kw: float) -> None:
    """The server answers every request with `answer`: the request raises `fault` saying `says`."""
    raw = await raw_server(lambda conn, n, req: answer)
    pool = pool_for(raw, **kw)
    with pytest.raises(fault, match=says):
        await pool.request("GET", "/models")
    await pool.close()


@on_both_loops
async def test_an_unrequested_content_encoding_is_a_protocol_fault(raw_server):
    await request_fails(raw_server, ok(b"xx", extra=b"Content-Encoding: br\r\n"), ProtocolFault, "br")


@on_both_loops
async def test_a_reply_cut_mid_body_is_disconnected_and_the_next_request_works(raw_server):
    cut = Close(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")
    raw = await raw_server(lambda conn, n, req: cut if conn == 1 else ok())
    pool = pool_for(raw)
    response = await pool.request("GET", "/models")
    with pytest.raises(Disconnected):
        await response.read()
    async with await pool.request("GET", "/models") as again:
        assert await again.read() == b'{"ok": true}'
    await pool.close()


@on_both_loops
async def test_a_pooled_connection_closed_unanswered_is_retried_once_on_a_new_one(raw_server):
    raw = await raw_server(lambda conn, n, req: None if (conn, n) == (1, 2) else ok(b'{"conn": %d}' % conn))
    pool = pool_for(raw)
    async with await pool.request("POST", "/chat/completions", b"{}", "application/json") as response:
        assert await response.read() == b'{"conn": 1}'
    async with await pool.request("POST", "/chat/completions", b"{}", "application/json") as response:
        assert await response.read() == b'{"conn": 2}'
    assert raw.connections == 2 and len(raw.requests) == 3
    await pool.close()


@on_both_loops
async def test_a_new_connection_closed_unanswered_is_not_retried(raw_server):
    raw = await raw_server(lambda conn, n, req: None)
    pool = pool_for(raw)
    with pytest.raises(Disconnected):
        await pool.request("POST", "/chat/completions", b"{}", "application/json")
    assert len(raw.requests) == 1  # a POST is not repeated when the server may have acted on it
    await pool.close()


@on_both_loops
async def test_headers_without_a_body_time_out_and_close_the_connection(raw_server):
    raw = await raw_server(lambda conn, n, req: b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")
    pool = pool_for(raw, read_timeout=0.2)
    response = await pool.request("GET", "/models")
    with pytest.raises(ReadTimeout):
        await response.read()
    await asyncio.sleep(0.1)
    assert raw.closed_by_client == 1
    await pool.close()


@on_both_loops
async def test_no_answer_at_all_times_out(raw_server):
    await request_fails(raw_server, b"", ReadTimeout, "read timeout", read_timeout=0.2)


@on_both_loops
async def test_a_refused_connection_says_why(raw_server):
    pool = OriginPool(f"http://127.0.0.1:{free_port()}", connect_timeout=2, read_timeout=2)
    with pytest.raises(ConnectFault, match="(?i)refused"):
        await pool.request("GET", "/models")
    await pool.close()


@on_both_loops
async def test_cancelling_a_read_closes_the_connection(raw_server):
    raw = await raw_server(lambda conn, n, req: b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
    pool = pool_for(raw, read_timeout=30)
    response = await pool.request("GET", "/models")
    assert await response.next_piece() == b"abc"
    reader = asyncio.ensure_future(response.next_piece())
    await asyncio.sleep(0.05)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    await asyncio.sleep(0.1)
    assert raw.closed_by_client == 1  # the server sees the upstream call end
    await pool.close()


@on_both_loops
async def test_interim_100_continue_is_skipped(raw_server):
    raw = await raw_server(lambda conn, n, req: b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"final"))
    pool = pool_for(raw)
    async with await pool.request("GET", "/models") as response:
        assert response.status == 200 and await response.read() == b"final"
    await pool.close()


@on_both_loops
async def test_bytes_that_are_not_http_are_a_protocol_fault(raw_server):
    await request_fails(raw_server, b"SSH-2.0-OpenSSH_9.6\r\n\r\n", ProtocolFault, "not valid HTTP")


@on_both_loops
async def test_idle_connections_are_closed_after_the_keep_alive(raw_server):
    raw = await raw_server(lambda conn, n, req: ok())
    pool = pool_for(raw, keepalive=0.2)
    async with await pool.request("GET", "/models") as response:
        await response.read()
    await asyncio.sleep(0.5)
    assert raw.closed_by_client == 1
    async with await pool.request("GET", "/models") as response:
        assert await response.read() == b'{"ok": true}'
    assert raw.connections == 2
    await pool.close()


@on_both_loops
async def test_a_slow_reader_of_a_large_body_gets_all_of_it(raw_server):
    body = bytes(range(256)) * 8192  # 2 MiB, past the pause threshold many times over
    raw = await raw_server(lambda conn, n, req: ok(body))
    pool = pool_for(raw)
    got = bytearray()
    async with await pool.request("GET", "/models") as response:
        while piece := await response.next_piece():
            got += piece
            await asyncio.sleep(0)
    assert bytes(got) == body
    await pool.close()


@pytest.fixture
def tls_ca(tmp_path: Any, monkeypatch: Any) -> Any:
    """A throwaway CA that OpenSSL trusts through SSL_CERT_FILE, as a self-hoster's private CA would be."""
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    return ca


def test_https_upstreams_are_verified_and_spoken_to_over_tls(tls_ca):
    import ssl

    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls_ca.issue_cert("localhost").configure_cert(server_ctx)
    seen: list[bytes] = []

    async def scenario() -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(ok(b'{"tls": true}'))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        try:
            pool = OriginPool(f"https://localhost:{port}/v1", connect_timeout=5, read_timeout=5)
            async with await pool.request("GET", "/models") as response:
                assert await response.read() == b'{"tls": true}'
            await pool.close()
            untrusted = OriginPool(f"https://127.0.0.1:{port}/v1", connect_timeout=5, read_timeout=5)
            with pytest.raises(ConnectFault, match="TLS"):  # the certificate names localhost only
                await untrusted.request("GET", "/models")
            await untrusted.close()
        finally:
            server.close()
            await server.wait_closed()

    for loop in LOOPS.values():
        with asyncio.Runner(loop_factory=loop) as runner:
            runner.run(scenario())
    assert seen[0].startswith(b"GET /v1/models HTTP/1.1\r\n")
    assert b"\r\nHost: localhost:" in seen[0] and len(seen) == 2
