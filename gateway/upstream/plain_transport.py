"""The upstream transport for a plain `http://` upstream reached without a proxy (vLLM, Ollama,
llama.cpp on the host or the LAN): HTTP/1.1 on asyncio's protocols (uvloop's when it runs), replies
parsed by httptools (llhttp, the parser uvicorn uses). Issue 33: aiohttp's client was a third of a
chat request's instructions; with this one a chat request costs 0.75x, a 50-chunk stream 0.9x
(bench/README.md, "Round 3 session 4").

A keep-alive pool of idle connections per (scheme, host, port), each closed after KEEPALIVE idle seconds;
no cap on connections. A connect times out after `connect_timeout`, a read after `read_timeout`
without a byte. A task cancelled while it waits for a reply (the gateway's client left) closes the
connection at once, so the upstream stops working for nobody. A reply not read to its end never
goes back to the pool. The upstream's HTTPS and proxies are aiohttp's
(gateway/upstream/aiohttp_transport.py); one connection, its parser and its reply's state:
gateway/upstream/http1_connection.py.

The MCP client (gateway/agent/mcp/http.py) shares it with two more parts: `addresses`, a
resolver whose answer is where the connection goes (its checks decide, so a name cannot resolve
again to somewhere else), and `https://` over asyncio's TLS (`tls`, or the default context),
the certificate checked against the URL's host.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from urllib.parse import urlsplit

from gateway.upstream.http1_connection import Http1Connection
from gateway.upstream.transport import (
    JSON,
    KEEPALIVE,
    Disconnected,
    TransportFault,
    TransportSettings,
    Unreachable,
    Unreadable,
    os_reason,
    too_large,
)

#: sent with every request, as aiohttp's client does: a server that compresses anyway is decoded
_ACCEPT_ENCODING = b"Accept-Encoding: gzip, deflate\r\n"
#: a body's own header lines and the head's end
_JSON_BODY = f"Content-Type: {JSON}\r\nContent-Length: %d\r\n\r\n".encode("latin-1")
_DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}

Key = tuple[str, str, int]  # scheme, host, port
#: a host's addresses to connect to, in order (its exceptions reach `send`'s caller as they are)
Addresses = Callable[[str, int], Awaitable[Sequence[str]]]
_PORTS = {"http": 80, "https": 443}


class PlainReply:
    """One reply on a pooled connection: back to the pool when read to its end, closed otherwise."""

    __slots__ = ("status", "read_chunk", "_conn", "_pool", "_key", "_decoder", "_open")

    def __init__(self, conn: Http1Connection, pool: PlainTransport, key: Key) -> None:
        self.status = conn.status
        self._conn = conn
        self._pool = pool
        self._key = key
        self._open = True
        # the headers are split into a dict only for a reply that may name an encoding (few do)
        coding = conn.headers.get("content-encoding") \
            if conn.head_lines.lower().find(b"content-encoding") != -1 else None
        wbits = _DECODERS.get(coding.strip().lower()) if coding else None
        self._decoder = zlib.decompressobj(wbits) if wbits is not None else None
        self.read_chunk: Callable[[], Awaitable[bytes]] = conn.read if wbits is None else self._read_decoded

    def header(self, name: str) -> str | None:
        return self._conn.headers.get(name.lower())

    async def _read_decoded(self) -> bytes:
        decoder = self._decoder
        while decoder is not None:
            piece = await self._conn.read()
            try:
                if not piece:
                    self._decoder = None
                    return decoder.flush()
                if out := decoder.decompress(piece):
                    return out
            except zlib.error as exc:
                raise Unreadable(f"a body that does not decode ({exc})") from exc
        return b""

    async def read_whole(self, limit: int) -> bytes:
        parts = []
        size = 0
        read = self.read_chunk
        try:
            while piece := await read():
                parts.append(piece)
                size += len(piece)
                if size > limit:
                    raise too_large(limit)
                if self._decoder is None and self._conn.read_to_end:  # it came whole: no read to learn it ended
                    break
        finally:
            self._release()  # not `await self.close()`: no coroutine made for it
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def finish(self, seconds: float, most: int) -> None:
        if not self._conn.read_to_end:  # usually it is: the chunked terminator came with the last frame
            drained = 0
            try:
                async with asyncio.timeout(seconds):
                    while drained <= most and (piece := await self._conn.read()):
                        drained += len(piece)
            except (TimeoutError, TransportFault):
                pass
        await self.close()

    async def close(self) -> None:
        self._release()

    def _release(self) -> None:
        if self._open:
            self._open = False
            conn = self._conn
            if conn.read_to_end and conn.keep_alive and not conn.closed:
                self._pool.keep(self._key, conn)
            else:
                conn.abort()


class PlainTransport:
    """Idle keep-alive connections per (host, port), and the requests' heads made once per URL."""

    errors: tuple[type[BaseException], ...] = (TransportFault, TimeoutError, OSError)

    def __init__(self, settings: TransportSettings, *, addresses: Addresses | None = None,
                 tls: ssl.SSLContext | None = None) -> None:
        self._addresses = addresses
        self._tls = tls
        self._connect_timeout = settings.connect_timeout
        self._read_timeout = settings.read_timeout
        self._common = b"".join(_header_line(name, value) for name, value in settings.headers.items()) \
            + _ACCEPT_ENCODING
        self._heads: dict[tuple[str, str], tuple[Key, bytes]] = {}
        self._idle: dict[Key, list[Http1Connection]] = {}
        self._open: set[Http1Connection] = set()
        self._sweeper: asyncio.TimerHandle | None = None
        self._closed = False

    async def send(self, method: str, url: str, body: bytes | None,
                   headers: Mapping[str, str] | None, *, stream: bool = False) -> PlainReply:
        key, head = self._heads.get((method, url)) or self._head_of(method, url)
        if headers:  # e.g. a trace's `traceparent`
            head += b"".join(_header_line(name, value) for name, value in headers.items())
        conn = self._pooled(key) or await self._connect(key)
        head_came = conn.send(head + b"\r\n" if body is None else b"".join((head, _JSON_BODY % len(body), body)))
        try:
            await head_came
        except asyncio.CancelledError:
            conn.abort()  # the gateway's client left: the upstream stops working for nobody
            raise
        return PlainReply(conn, self, key)

    def neutral(self, exc: BaseException) -> BaseException:
        if isinstance(exc, TimeoutError | TransportFault):
            return exc
        fault = Disconnected(str(exc) or type(exc).__name__)  # an OSError writing or reading
        fault.__cause__ = exc
        return fault

    def keep(self, key: Key, conn: Http1Connection) -> None:
        """`conn`'s reply was read to its end and the server keeps it open: the next request's."""
        if self._closed:
            conn.abort()
            return
        loop = asyncio.get_running_loop()
        conn.idle_since = loop.time()
        self._idle.setdefault(key, []).append(conn)
        if self._sweeper is None:
            self._sweeper = loop.call_at(conn.idle_since + KEEPALIVE, self._sweep)

    async def close(self) -> None:
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        self._idle.clear()
        for conn in list(self._open):
            conn.abort()
        self._open.clear()

    def _head_of(self, method: str, url: str) -> tuple[Key, bytes]:
        parts = urlsplit(url)
        if parts.scheme not in _PORTS or not parts.hostname:
            raise ValueError(f"the plain transport speaks to http:// and https:// URLs only, not {url!r}")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        key = (parts.scheme, parts.hostname, parts.port or _PORTS[parts.scheme])
        host = parts.netloc.rpartition("@")[2]
        head = f"{method} {target} HTTP/1.1\r\n".encode("latin-1") + _header_line("Host", host) + self._common
        self._heads[(method, url)] = key, head
        return key, head

    def _pooled(self, key: Key) -> Http1Connection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        now = asyncio.get_running_loop().time()
        while idle:
            conn = idle.pop()  # the last one kept: the least likely the server closed
            if not conn.closed and now - conn.idle_since < KEEPALIVE:
                conn.reused = True
                return conn
            conn.abort()
        return None

    async def _connect(self, key: Key) -> Http1Connection:
        loop = asyncio.get_running_loop()
        read_timeout, on_lost = self._read_timeout, self._open.discard
        scheme, host, port = key
        tls = None
        if scheme == "https":
            if self._tls is None:
                self._tls = ssl.create_default_context()
            tls = self._tls
        async with asyncio.timeout(self._connect_timeout):
            targets = [host] if self._addresses is None else await self._addresses(host, port)
            failure: OSError | None = None
            for address in targets:  # one after the other, as aiohttp's connector tries a name's addresses
                try:
                    _, conn = await loop.create_connection(
                        lambda: Http1Connection(loop, read_timeout, on_lost), address, port,
                        ssl=tls, server_hostname=host if tls is not None else None)
                except OSError as exc:  # ssl.SSLError (a certificate refused) is one too
                    failure = exc
                    continue
                self._open.add(conn)
                return conn
        raise Unreachable(_reason(failure) if failure is not None else f"no address for {host}") from failure

    def _sweep(self) -> None:
        """Close the connections idle for KEEPALIVE seconds; come back for the next oldest."""
        self._sweeper = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        oldest = None
        for key, idle in list(self._idle.items()):
            kept = [conn for conn in idle if not conn.closed and now - conn.idle_since < KEEPALIVE]
            for conn in idle:
                if conn not in kept:
                    conn.abort()
            if kept:
                self._idle[key] = kept
                oldest = kept[0].idle_since if oldest is None else min(oldest, kept[0].idle_since)
            else:
                del self._idle[key]
        if oldest is not None:
            self._sweeper = loop.call_at(oldest + KEEPALIVE, self._sweep)


def _reason(error: OSError) -> str:
    if isinstance(error, ssl.SSLError):  # its errno is OpenSSL's, not the OS's
        return f"TLS: {error.reason or error}"
    return os_reason(error)


def _header_line(name: str, value: str) -> bytes:
    if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
        raise ValueError(f"the header {name!r} cannot be sent (a line break in it)")
    return f"{name}: {value}\r\n".encode("latin-1")
