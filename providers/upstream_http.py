"""A lean HTTP/1.1 client for one origin (the upstream model): keep-alive pool, timeouts, streaming.

Why not aiohttp's or httpx's client: the upstream call sits on every request's hot path, and on the
benchmark machine aiohttp's client cost 134-222 us of CPU per request (httpx ~3,800) while this one,
on asyncio's protocol API with httptools' C parser (llhttp, the parser behind uvicorn and Node), costs
25-32 us. It does only what an OpenAI-compatible upstream needs: requests with a whole body, replies
read whole or piece by piece, framing by Content-Length, chunked or connection close, gzip/deflate,
TLS for https. No proxies, cookies or redirects (the aiohttp session it replaces used none either).

Faults are typed (`ConnectFault`, `ConnectTimeout`, `ReadTimeout`, `Disconnected`, `ProtocolFault`) so
the caller can word them; a connection that is cancelled or fails mid-reply is closed, never reused.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import zlib
from collections.abc import Mapping
from typing import Any, cast
from urllib.parse import urlsplit

import httptools

#: Idle connections kept per origin; more than this after a burst are closed when released.
MAX_IDLE = 128
#: Reading pauses while this much unread body is buffered, so a slow consumer cannot fill memory.
HIGH_WATER = 256 * 1024
MAX_BODY = 64 * 1024 * 1024  # a whole (non-streamed) reply larger than this is not a model reply
GZIP_OR_ZLIB = 32 + zlib.MAX_WBITS  # zlib detects the gzip or zlib header itself


class HttpFault(Exception):
    """Any failure to get a whole reply."""


class ConnectFault(HttpFault):
    """No connection: refused, unresolvable host, TLS failure ... (`reason` is the OS's words)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ConnectTimeout(HttpFault):
    """The connection was not established within the connect timeout."""


class ReadTimeout(HttpFault):
    """The server sent nothing for longer than the read timeout."""


class Disconnected(HttpFault):
    """The server closed the connection before the reply was complete."""


class ProtocolFault(HttpFault):
    """The server's bytes are not HTTP/1.1 (or its body is not decodable)."""


class Origin:
    """Scheme, host and port of a base URL, plus its path prefix (`http://h:8000/v1` -> `/v1`)."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        default_port = self.port == (443 if self.tls else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host if default_port else f"{host}:{self.port}"


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection and the reply currently being read on it."""

    def __init__(self, pool: OriginPool) -> None:
        self._pool = pool
        self._loop = pool.loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        # parser <-> protocol is a reference cycle: connection_lost breaks it (and the one with the
        # transport), so a closed connection is freed at once rather than by the cyclic GC, which
        # an idle gateway may not run for a long time (memory kept after a burst of streams)
        self._parser: Any = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        self.received = 0  # bytes of this reply so far (0 = the server never answered)
        self.error: HttpFault | None = None
        self.pieces: list[bytes] = []  # not a deque: an empty one is ~0.6 KB, held per open stream
        self.buffered = 0

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, hence the cast, not a check
        self.transport = cast(asyncio.Transport, transport)
        if self.closed:  # closed (timed out, cancelled) before the transport existed
            self.transport.abort()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
        if self._parser is None:  # closed: nothing more is read
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(ProtocolFault("the server switched protocols"))
        except httptools.HttpParserError as exc:
            self._fail(ProtocolFault(f"the server's reply is not valid HTTP ({exc})"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._parser = None
        self.transport = None
        self._pool.forget(self)
        if self.headers_done and not self.complete and self._reads_to_eof():
            self.complete = True  # a body framed by the connection's end has now ended
        elif not self.complete and self.error is None:
            self.error = Disconnected("the server closed the connection")
        self._wake()

    def pause_writing(self) -> None:  # request bodies are written whole; the transport buffers them
        pass

    def resume_writing(self) -> None:
        pass

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        self.headers[key] = f"{self.headers[key]}, {text}" if key in self.headers else text

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # an interim reply (100 Continue, 103 Early Hints): the real one follows
            self.headers = {}
            return
        self.status = status
        self.headers_done = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        if not self.headers_done:
            return
        self.pieces.append(body)
        self.buffered += len(body)
        if self.buffered > HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if not self.headers_done:
            return
        self.complete = True
        self.keep_alive = self._parser.should_keep_alive()
        self._wake()

    # used by OriginPool and Response

    def _reads_to_eof(self) -> bool:
        return "content-length" not in self.headers and "chunked" not in self.headers.get("transfer-encoding", "")

    def _fail(self, error: HttpFault) -> None:
        if self.error is None:
            self.error = error
        self.close()
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def send(self, head: bytes, body: bytes | None) -> None:
        self._reset()
        assert self.transport is not None
        self.transport.write(head + body if body else head)

    async def wait(self, timeout: float | None) -> None:
        """Until more of the reply (or its end, or a fault) arrives; ReadTimeout after `timeout`."""
        waiter = self._waiter = self._loop.create_future()
        timer = self._loop.call_later(timeout, _expire, waiter) if timeout else None
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def take(self) -> bytes:
        """The body bytes buffered so far (b"" if none), resuming reading if it was paused."""
        pieces = self.pieces
        if not pieces:
            return b""
        data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        pieces.clear()
        self.buffered = 0
        if self._paused and self.transport is not None and not self.closed:
            self._paused = False
            self.transport.resume_reading()
        return data

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(ReadTimeout("no data from the server within the read timeout"))


def _reason(exc: OSError) -> str:
    """A connect failure in the OS's words: "Connection refused", "Name or service not known" ..."""
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or exc}"
    if exc.errno and exc.errno > 0 and not isinstance(exc, socket.gaierror):
        return os.strerror(exc.errno)  # asyncio words it "Connect call failed (...)"
    return exc.strerror or str(exc) or type(exc).__name__


class Response:
    """A reply whose head has arrived; read its body whole (`read`) or piece by piece (`next_piece`).
    Use it as an async context manager (or call `release`) so its connection is reused or closed."""

    def __init__(self, pool: OriginPool, conn: _Connection) -> None:
        self._pool = pool
        self._conn = conn
        self.status = conn.status
        self.headers = conn.headers
        self._done = False
        self._decoder: Any = None
        encoding = conn.headers.get("content-encoding", "").strip().lower()
        if encoding in ("gzip", "x-gzip", "deflate"):
            self._decoder = zlib.decompressobj(GZIP_OR_ZLIB)
        elif encoding not in ("", "identity"):
            self._discard()
            raise ProtocolFault(f"the server used a content encoding that was not asked for ({encoding})")

    async def __aenter__(self) -> Response:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()

    async def next_piece(self) -> bytes:
        """The next body bytes; b"" once the body has ended. Raises an HttpFault on a fault."""
        conn = self._conn
        try:
            while True:
                data = conn.take()
                if data:
                    return self._decode(data)
                if conn.complete:
                    return self._finish()
                if conn.error is not None:
                    raise conn.error
                await conn.wait(self._pool.read_timeout)
        except BaseException:
            self._discard()
            raise

    async def read(self, limit: int = MAX_BODY) -> bytes:
        """The whole body (decoded)."""
        parts = []
        size = 0
        while piece := await self.next_piece():
            parts.append(piece)
            size += len(piece)
            if size > limit:
                self._discard()
                raise ProtocolFault(f"the reply is larger than {limit // (1024 * 1024)} MiB")
        return b"".join(parts)

    def _decode(self, data: bytes) -> bytes:
        if self._decoder is None:
            return data
        try:
            return self._decoder.decompress(data)
        except zlib.error as exc:
            self._discard()
            raise ProtocolFault(f"the reply's compressed body is corrupt ({exc})") from exc

    def _finish(self) -> bytes:
        tail = b""
        if self._decoder is not None:
            tail = self._decoder.flush()
            self._decoder = None
        self.release()
        return tail

    def release_if_ended(self) -> bool:
        """When the whole reply has arrived, drop what is unread and release the connection for
        reuse (True); False while the server is still sending."""
        if not self._conn.complete or self._done:
            return False
        self._conn.take()
        self.release()
        return True

    def release(self) -> None:
        """Back to the pool if the whole reply was read and the server allows it; closed otherwise."""
        if self._done:
            return
        self._done = True
        conn = self._conn
        if conn.complete and conn.keep_alive and not conn.pieces and not conn.closed:
            self._pool.put_back(conn)
        else:
            conn.close()

    def _discard(self) -> None:
        if not self._done:
            self._done = True
            self._conn.close()


class OriginPool:
    """Keep-alive connections to one origin, reused most-recently-released first."""

    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout: float,
        read_timeout: float,
        keepalive: float = 30.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.origin = Origin(base_url)
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.keepalive = keepalive
        self.loop = asyncio.get_running_loop()
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()
        self._sweeper: asyncio.TimerHandle | None = None
        self._ssl = ssl.create_default_context() if self.origin.tls else None
        fixed = {"Host": self.origin.host_header, "Accept-Encoding": "gzip, deflate", **(headers or {})}
        if any(c in text for item in fixed.items() for text in item for c in "\r\n\0"):
            raise ValueError("an HTTP header name or value holds a line break")  # no header injection
        self._heads: dict[tuple[str, str, str | None], bytes] = {}
        self._fixed_headers = "".join(f"{k}: {v}\r\n" for k, v in fixed.items()).encode("latin-1")

    async def request(self, method: str, path: str, body: bytes | None = None,
                      content_type: str | None = None, headers: Mapping[str, str] | None = None) -> Response:
        """Send the request and wait for the reply's head. `path` is appended to the base URL's path;
        `headers` are added to this request only (no line breaks allowed)."""
        head = self._head(method, self.origin.prefix + path, body, content_type)
        if headers:
            if any(c in text for item in headers.items() for text in item for c in "\r\n\0"):
                raise ValueError("an HTTP header name or value holds a line break")
            extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            head = head[:-2] + extra.encode("latin-1") + b"\r\n"  # before the blank line
        fresh = False
        while True:
            conn, reused = await self._connection(fresh)
            conn.send(head, body)
            try:
                while not conn.headers_done:
                    if conn.error is not None:
                        raise conn.error
                    await conn.wait(self.read_timeout)
            except Disconnected:
                conn.close()
                # A pooled connection the server had just closed (its keep-alive ran out as we sent):
                # nothing was answered, so the request never reached it; once more on a new one.
                if reused and conn.received == 0:
                    fresh = True
                    continue
                raise
            except BaseException:
                conn.close()
                raise
            return Response(self, conn)

    def _head(self, method: str, target: str, body: bytes | None, content_type: str | None) -> bytes:
        key = (method, target, content_type)
        start = self._heads.get(key)
        if start is None:  # a handful of distinct requests per app: built once each
            start = f"{method} {target} HTTP/1.1\r\n".encode("latin-1") + self._fixed_headers
            if content_type:
                start += f"Content-Type: {content_type}\r\n".encode("latin-1")
            self._heads[key] = start
        if body is None:
            return start + b"\r\n"
        return start + b"Content-Length: %d\r\n\r\n" % len(body)

    async def _connection(self, fresh: bool) -> tuple[_Connection, bool]:
        now = self.loop.time()
        while self._idle and not fresh:
            conn = self._idle.pop()
            if not conn.closed and now - conn.idle_since < self.keepalive:
                return conn, True
            conn.close()
        return await self._connect(), False

    async def _connect(self) -> _Connection:
        conn = _Connection(self)
        origin = self.origin
        try:
            async with asyncio.timeout(self.connect_timeout):
                transport, _ = await self.loop.create_connection(
                    lambda: conn, origin.host, origin.port, ssl=self._ssl,
                    server_hostname=origin.host if self._ssl is not None else None)
        except TimeoutError as exc:
            conn.close()
            raise ConnectTimeout(f"no connection within {self.connect_timeout:g} s") from exc
        except OSError as exc:  # refused, unreachable, DNS (gaierror) and TLS (SSLError) failures
            conn.close()
            raise ConnectFault(_reason(exc)) from exc
        conn.transport = transport
        self._all.add(conn)
        return conn

    def put_back(self, conn: _Connection) -> None:
        if len(self._idle) >= MAX_IDLE:
            conn.close()
            return
        conn.idle_since = self.loop.time()
        self._idle.append(conn)
        if self._sweeper is None:
            self._sweeper = self.loop.call_later(self.keepalive, self._sweep)

    def forget(self, conn: _Connection) -> None:
        self._all.discard(conn)

    def _sweep(self) -> None:
        """Close connections idle past the keep-alive, so a quiet gateway holds no sockets or buffers."""
        self._sweeper = None
        now = self.loop.time()
        keep = []
        for conn in self._idle:
            if conn.closed or now - conn.idle_since >= self.keepalive:
                conn.close()
            else:
                keep.append(conn)
        self._idle = keep
        if self._idle:
            oldest = min(c.idle_since for c in self._idle)
            self._sweeper = self.loop.call_at(oldest + self.keepalive, self._sweep)

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for conn in list(self._all):
            conn.close()
        self._idle.clear()
        self._all.clear()
        await asyncio.sleep(0)  # let the transports' connection_lost callbacks run
