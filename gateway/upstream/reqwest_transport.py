"""The upstream transport on pyreqwest (Rust reqwest and hyper, `LLM_HTTP_CLIENT=reqwest`, the
default): one `Client` and its keep-alive pool; the HTTP work runs on pyreqwest's own Tokio thread,
at about 0.4x the instructions of aiohttp's client per call (bench/README.md, issue 33).

reqwest reads `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY`/`NO_PROXY` (either case) when the client is
built, credentials in the proxy's URL; TLS is rustls with the system's roots (OpenSSL's places,
`SSL_CERT_FILE`/`SSL_CERT_DIR` honoured). A connect times out after `connect_timeout`, a read
(the reply's head, then each piece of its body) after `read_timeout` without a byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Mapping
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
    IdleConnections,
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

    __slots__ = ("status", "_request", "_response", "_reader", "_reusable", "_idle", "_open")

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

    def header(self, name: str) -> str | None:
        return self._response.get_header(name)

    async def read_chunk(self) -> bytes:
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
