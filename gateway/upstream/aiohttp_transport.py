"""The upstream transport on aiohttp's client: one `ClientSession`. An `https://` upstream's, or
one reached through a proxy; every upstream's with `LLM_HTTP_CLIENT=aiohttp` (gateway/upstream/
transport.py says which gets which).

The session honours `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` (read at start, with ~/.netrc for the
proxy's credentials), keeps connections alive between requests, and times out a connect after
`connect_timeout` and a read after `read_timeout` without a byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import weakref
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import Any

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from gateway.upstream.transport import (
    JSON,
    KEEPALIVE,
    ClosedUnanswered,
    Disconnected,
    TransportSettings,
    Unreachable,
    Unreadable,
    os_reason,
    too_large,
)

_POST_HEADERS = {"Content-Type": JSON}

#: Whether the upstream request this task made last went out on a pooled connection. A context
#: variable (per task), not shared state: each request's task reads the answer its own connect set.
_REUSED: ContextVar[bool] = ContextVar("upstream_connection_reused", default=False)


class _PoolConnector(aiohttp.TCPConnector):
    """aiohttp's connector, telling (in `_REUSED`) whether a connection came from the pool: a
    pooled connection the server closed unanswered (its keep-alive ran out as the request went)
    is retried once, where aiohttp itself retries only idempotent methods. (A TraceConfig's
    `on_connection_reuseconn` says the same at several times the cost per request.)"""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._used: weakref.WeakSet[Any] = weakref.WeakSet()

    async def connect(self, req: Any, traces: Any, timeout: aiohttp.ClientTimeout) -> Any:
        connection = await super().connect(req, traces, timeout)
        protocol = connection.protocol
        if protocol is not None:
            _REUSED.set(protocol in self._used)
            self._used.add(protocol)
        return connection


def connect_reason(exc: aiohttp.ClientConnectorError) -> str:
    """A connect failure in the OS's words: "Connection refused", "Name or service not known" ..."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"TLS: {getattr(exc.certificate_error, 'reason', None) or exc.certificate_error}"
    error = exc.os_error
    if isinstance(error, ssl.SSLError):
        return f"TLS: {error.reason or error}"
    return os_reason(error)


class AiohttpReply:
    """An aiohttp reply; its connection goes back to the pool once the body was read whole."""

    __slots__ = ("status", "read_chunk", "_response", "_content")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.status = response.status
        self._response = response
        self._content = response.content
        self.read_chunk: Callable[[], Awaitable[bytes]] = self._content.readany

    def header(self, name: str) -> str | None:
        return self._response.headers.get(name)

    async def read_whole(self, limit: int) -> bytes:
        content = self._content
        parts = []
        size = 0
        try:
            while piece := await content.readany():
                parts.append(piece)
                size += len(piece)
                if size > limit:
                    raise too_large(limit)
                if content.at_eof():  # the usual case, a reply that came whole: no second read to learn it ended
                    break
        finally:
            self._response.release()  # back to the pool when read whole, closed otherwise
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def finish(self, seconds: float, most: int) -> None:
        content = self._content
        if content.at_eof():  # the usual case: the chunked terminator came with the last frame
            self._response.release()
            return
        drained = 0
        with contextlib.suppress(TimeoutError, aiohttp.ClientError):
            async with asyncio.timeout(seconds):
                while drained <= most:
                    piece = await content.readany()
                    if not piece:
                        self._response.release()
                        return
                    drained += len(piece)

    async def close(self) -> None:
        self._response.close()  # a no-op once the reply was read whole and its connection released


class AiohttpTransport:
    """One aiohttp session (its keep-alive connection pool) to the upstream."""

    errors: tuple[type[BaseException], ...] = (aiohttp.ClientError, TimeoutError, OSError)

    def __init__(self, settings: TransportSettings) -> None:
        url = URL(settings.url)
        # built here, not aiohttp's context made at import: SSL_CERT_FILE set since is honoured
        tls = ssl.create_default_context() if url.scheme == "https" else True
        connector = _PoolConnector(limit=0, keepalive_timeout=KEEPALIVE, ssl=tls)
        # The proxy the environment names for the upstream (HTTP(S)_PROXY, NO_PROXY, ~/.netrc for
        # its credentials), looked up once by the function `trust_env=True` would call on every
        # request: there it is two thread-pool hops per request (the proxy, then ~/.netrc).
        # Its credentials go as a Proxy-Authorization header, as aiohttp's deprecated `proxy_auth`
        # sent them: with each request to an http:// upstream (sent to the proxy in absolute
        # form), on the CONNECT for an https:// one (the request in the tunnel never carries them).
        self._proxy: URL | None = None
        self._proxy_headers: dict[str, str] | None = None  # the CONNECT's
        # each request's own headers, with the credentials for an http:// upstream: made once here
        self._post_headers: dict[str, str] = _POST_HEADERS
        self._get_headers: dict[str, str] | None = None
        try:
            self._proxy, auth = get_env_proxy_for_url(url)
        except LookupError:
            auth = None
        if auth is not None:
            if url.scheme == "https":
                self._proxy_headers = {"Proxy-Authorization": auth.encode()}
            else:
                self._get_headers = {"Proxy-Authorization": auth.encode()}
                self._post_headers = {**_POST_HEADERS, **self._get_headers}
        self._urls: dict[str, URL] = {}  # the few URLs a client calls, parsed once
        self._session = aiohttp.ClientSession(
            connector=connector, headers=dict(settings.headers), trust_env=False,
            cookie_jar=aiohttp.DummyCookieJar(),  # an API client keeps no cookies (and filters none per request)
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=settings.connect_timeout,
                                          sock_read=settings.read_timeout))

    async def send(self, method: str, url: str, body: bytes | None,
                   headers: Mapping[str, str] | None, *, stream: bool = False) -> AiohttpReply:
        sent = self._post_headers if body is not None else self._get_headers
        if headers:  # e.g. a trace's `traceparent`
            sent = {**(sent or {}), **headers}
        parsed = self._urls.get(url)
        if parsed is None:
            parsed = self._urls[url] = URL(url)
        _REUSED.set(False)
        try:
            response = await self._session.request(method, parsed, data=body, headers=sent,
                                                   proxy=self._proxy, proxy_headers=self._proxy_headers)
        except aiohttp.ServerDisconnectedError as exc:
            raise ClosedUnanswered(_REUSED.get()) from exc
        return AiohttpReply(response)

    def neutral(self, exc: BaseException) -> BaseException:
        if isinstance(exc, TimeoutError):
            return exc
        if isinstance(exc, aiohttp.ClientConnectorError):
            fault: BaseException = Unreachable(connect_reason(exc))
        elif isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError | ConnectionError):
            fault = Disconnected(str(exc))
        else:
            fault = Unreadable(str(exc) or type(exc).__name__)
        fault.__cause__ = exc
        return fault

    async def close(self) -> None:
        await self._session.close()
