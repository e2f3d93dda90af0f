"""The upstream transport on pyreqwest (Rust reqwest and hyper), for issue 33's A/B only
(bench/reqwest_gateway.py runs the gateway with it; bench/README.md has the figures): one `Client`
and its keep-alive pool, the HTTP work on pyreqwest's own Tokio thread. Not the product's: a request
waiting for its reply's head cannot be aborted (a client that leaves, or `Client.close()`, leaves the
upstream connection open until the upstream answers or LLM_TIMEOUT passes).

reqwest reads `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY`/`NO_PROXY` (either case) when the client is
built, credentials in the proxy's URL; TLS is rustls with the system's roots (OpenSSL's places,
`SSL_CERT_FILE`/`SSL_CERT_DIR` honoured). A connect times out after `connect_timeout`, a read
(the reply's head, then each piece of its body) after `read_timeout` without a byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta

from pyreqwest.client import Client, ClientBuilder
from pyreqwest.exceptions import (
    ConnectError,
    DecodeError,
    DetailedPyreqwestError,
    PyreqwestError,
    ReadError,
    WriteError,
)
from pyreqwest.request import StreamRequest
from pyreqwest.response import Response, ResponseBodyReader

from gateway.upstream.transport import (
    JSON,
    KEEPALIVE,
    ClosedUnanswered,
    Disconnected,
    TransportSettings,
    Unreachable,
    Unreadable,
    too_large,
)

_POST_HEADERS = {"Content-Type": JSON}
#: hyper's words for a connection the server closed before its reply was whole
_CLOSED = "connection closed before message completed"
_OS_ERROR = re.compile(r" \(os error \d+\)$")
_TLS_WORDS = ("certificate", "tls", "handshake", "ssl")


class IdleConnections:
    """An account of the pool's idle connections, for a library that does not say whether a
    request went out on a pooled one: a connection goes idle when a reply on it was read to its
    end (and the server keeps it), a request takes the last one (pools are LIFO), and one idle past
    the pool's timeout is gone. Exact one request at a time; with requests racing for connections,
    or a server closing idle ones, it can be wrong, and then a request that a new connection saw
    closed unanswered is sent once more (as for a pooled one), or one that a pooled connection saw
    so is a 502 rather than retried."""

    __slots__ = ("_idle_since", "_timeout")

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._idle_since: deque[float] = deque()

    def take(self) -> bool:
        """A request goes out: whether it takes a pooled connection."""
        idle = self._idle_since
        if not idle:
            return False
        now = time.monotonic()
        while idle and now - idle[0] >= self._timeout:
            idle.popleft()
        if not idle:
            return False
        idle.pop()
        return True

    def release(self) -> None:
        """A reply was read to its end on a connection the server keeps open."""
        self._idle_since.append(time.monotonic())

    def clear(self) -> None:
        self._idle_since.clear()


def _causes(exc: BaseException) -> list[str]:
    """The chain of reasons pyreqwest gives, outermost first (reqwest's, then hyper's, then the OS's)."""
    details = getattr(exc, "details", None) if isinstance(exc, DetailedPyreqwestError) else None
    causes = (details or {}).get("causes") or []
    return [str(cause.get("message", "")) for cause in causes if isinstance(cause, dict)]


def _connect_reason(causes: list[str]) -> str:
    """A connect failure in the OS's words ("Connection refused", "Name or service not known"),
    or the TLS library's, marked `TLS:`."""
    last = causes[-1] if causes else "connect failed"
    if any(word in cause.lower() for cause in causes for word in _TLS_WORDS):
        return f"TLS: {last}"
    return _OS_ERROR.sub("", last).removeprefix("failed to lookup address information: ")


class ReqwestReply:
    """A streamed pyreqwest reply; hyper puts its connection back in the pool when the body was
    read to its end, and closes it when the reply is let go of before."""

    __slots__ = ("status", "read_chunk", "_request", "_response", "_reader", "_reusable", "_idle", "_open")

    def __init__(self, request: StreamRequest, response: Response, idle: IdleConnections) -> None:
        self.status = response.status
        self._request = request
        self._response = response
        self._reader: ResponseBodyReader = response.body_reader
        # HTTP/1.1 keeps the connection unless the server says otherwise (HTTP/1.0 closes it)
        self._reusable = response.version == "HTTP/1.1" and (
            (response.get_header("connection") or "").lower() != "close")
        self._idle = idle
        self._open = True
        self.read_chunk: Callable[[], Awaitable[bytes]] = self._next_piece

    def header(self, name: str) -> str | None:
        return self._response.get_header(name)

    async def _next_piece(self) -> bytes:
        piece = await self._reader.read_chunk()
        if piece is None:
            self._ended()
            return b""
        return piece.to_bytes()

    def _ended(self) -> None:
        if self._open:
            self._open = False
            if self._reusable:
                self._idle.release()

    async def read_whole(self, limit: int) -> bytes:
        parts = []
        size = 0
        try:
            while piece := await self._reader.read_chunk():
                parts.append(piece.to_bytes())
                size += len(piece)
                if size > limit:
                    raise too_large(limit)
            self._ended()
        finally:
            await self.close()
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def finish(self, seconds: float, most: int) -> None:
        drained = 0
        with contextlib.suppress(TimeoutError, PyreqwestError):
            async with asyncio.timeout(seconds):
                while drained <= most:
                    piece = await self._reader.read_chunk()
                    if piece is None:
                        self._ended()
                        return
                    drained += len(piece)

    async def close(self) -> None:
        request, self._request = self._request, None  # type: ignore[assignment]
        if request is not None:
            self._open = False
            await request.__aexit__(None, None, None)


class ReqwestTransport:
    """One pyreqwest client (its keep-alive connection pool) to the upstream."""

    errors: tuple[type[BaseException], ...] = (PyreqwestError, TimeoutError, OSError)

    def __init__(self, settings: TransportSettings) -> None:
        headers = dict(settings.headers)
        builder = (ClientBuilder()
                   .default_headers({k: v for k, v in headers.items() if k != "User-Agent"})
                   .connect_timeout(timedelta(seconds=settings.connect_timeout))
                   .read_timeout(timedelta(seconds=settings.read_timeout))
                   .pool_idle_timeout(timedelta(seconds=KEEPALIVE)))
        if "User-Agent" in headers:
            builder = builder.user_agent(headers["User-Agent"])
        self._client: Client = builder.build()
        self._idle = IdleConnections(KEEPALIVE)

    async def send(self, method: str, url: str, body: bytes | None,
                   headers: Mapping[str, str] | None, *, stream: bool = False) -> ReqwestReply:
        builder = self._client.request(method, url)
        if body is not None:
            builder = builder.body_bytes(body).headers(_POST_HEADERS)
        if headers:  # e.g. a trace's `traceparent`
            builder = builder.headers(dict(headers))
        if stream:  # each piece as it comes: pyreqwest otherwise reads up to 64 KiB before the head
            builder = builder.streamed_read_buffer_limit(0)
        request = builder.build_streamed()
        reused = self._idle.take()
        try:
            response = await request.__aenter__()
        except (ConnectError, WriteError) as exc:
            if _CLOSED in _causes(exc) or isinstance(exc, WriteError):
                raise ClosedUnanswered(reused) from exc
            raise
        return ReqwestReply(request, response, self._idle)

    def neutral(self, exc: BaseException) -> BaseException:
        if isinstance(exc, TimeoutError):
            return exc
        causes = _causes(exc)
        words = causes[-1] if causes else str(exc)
        fault: BaseException
        if isinstance(exc, ConnectError) and _CLOSED not in causes and any(
                "(Connect)" in cause or "connect error" in cause for cause in causes):
            fault = Unreachable(_connect_reason(causes))
        elif isinstance(exc, ConnectError | ReadError | ConnectionError) and not isinstance(exc, DecodeError):
            fault = Disconnected(words)
        else:
            fault = Unreadable(words or type(exc).__name__)
        fault.__cause__ = exc
        return fault

    async def close(self) -> None:
        self._idle.clear()
        await self._client.close()
