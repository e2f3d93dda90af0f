"""Streamable HTTP to one MCP server, in whichever era it speaks, over HTTP/1.1 kept alive.

The era is found once per connection (and can be handed in when known, `era=`): a 2026-07-28
`server/discover` first; a server that does not answer it with 2026-07-28 among its versions gets
the 2025-11-25 `initialize` handshake. A 2025-11-25 session that the server forgot (404 on a request
carrying its `MCP-Session-Id`) is opened again and the request sent once more.

The requests go over the upstream's lean transport (gateway/upstream/plain_transport.py: asyncio,
httptools, a keep-alive pool; aiohttp's client cost two thirds of a warm `tools/call`,
bench/README.md "Round 4, session 3: one MCP call on the lean transport"), `https://` over asyncio's
TLS with the context aiohttp's client had (`tls_context`: the system's CAs, or SSL_CERT_FILE /
SSL_CERT_DIR). Connections go only
where `policy` allows (providers/urlsafety.py: public addresses unless the host was allow-listed),
to the address the checked resolver answered; redirects are not followed, the proxy environment is
not read, a reply is read up to MAX_REPLY_BYTES. The configured `headers` (authorization included)
go on every request and into no message, log line or error: errors name the host only.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import socket
import ssl
from collections.abc import Mapping
from typing import Any

from yarl import URL

from gateway import __version__
from gateway.agent.mcp import wire
from gateway.agent.mcp.results import INVALID_REPLY, McpError, McpHttpError, McpProtocolError
from gateway.errors import UpstreamError
from gateway.upstream.plain_transport import PlainReply, PlainTransport
from gateway.upstream.transport import ClosedUnanswered, TransportFault, TransportSettings, Unreachable
from providers.urlsafety import AddressPolicy, BlockedUrlError, CheckedResolver, address_problem, check_url

#: statuses that mean "not this era" when probing with server/discover (auth, rate limits and
#: server errors are answers about the server, not about the era, and fail the call instead)
_NOT_THIS_ERA = frozenset({400, 404, 405, 406, 409, 415, 422})
_ACCEPT = "application/json, text/event-stream"
_SESSION = "Mcp-Session-Id"
#: headers the client writes itself: a configured one of these names is not sent twice
_OWN_HEADERS = frozenset({"accept", "content-type", "content-length", "host", "transfer-encoding", "connection",
                          "accept-encoding", "mcp-protocol-version", "mcp-session-id", "mcp-method", "mcp-name"})
#: at most this many connections to one server at once (aiohttp's connector had the same limit)
MAX_CONNECTIONS = 8
#: after the reply's event, how long (and how much) to read for the stream's end (the upstream's rule)
_DRAIN_SECONDS = 0.05
_DRAIN_BYTES = 64 * 1024


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The verified TLS context of every MCP server, built once per process (loading the CAs costs
    milliseconds): what aiohttp's client used, the system's CAs (or what SSL_CERT_FILE / SSL_CERT_DIR
    name), HTTP/1.1 offered by ALPN."""
    context = ssl.create_default_context()
    context.set_alpn_protocols(["http/1.1"])
    return context


class McpBlockedUrlError(McpHttpError):
    """The server URL is not one the gateway may connect to (a non-public address): a client's 400."""


class HttpConnection:
    """One MCP server over Streamable HTTP; `request()` sends one JSON-RPC request and returns
    its result. Concurrent requests share the era detection and the session."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None, *,
                 policy: AddressPolicy = address_problem, era: str | None = None,
                 connect_timeout: float = 10.0) -> None:
        try:
            self._url = check_url(url, policy)
        except BlockedUrlError as exc:
            raise McpBlockedUrlError(400, str(exc)) from None
        self._host = self._url.host or "?"
        self._target = str(self._url.with_fragment(None))
        self._headers = {"User-Agent": f"agent-gateway/{__version__}"}
        self._headers.update((name, value) for name, value in (headers or {}).items()
                             if name.lower() not in _OWN_HEADERS)
        self._headers["Accept"] = _ACCEPT
        self._policy = policy
        self.era = era
        self.protocol_version: str | None = None  # what initialize agreed (2025-11-25 era)
        self._initialized = False
        self._session_id: str | None = None
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS)
        self._transport: PlainTransport | None = None
        self._connect_timeout = connect_timeout

    @property
    def url(self) -> URL:
        return self._url

    def _pool(self) -> PlainTransport:
        if self._transport is None:
            # no read timeout: each request's deadline is McpServer's (a cancellation closes the connection)
            settings = TransportSettings(self._target, self._headers, self._connect_timeout, None)
            self._transport = PlainTransport(settings, addresses=self._addresses,
                                             tls=tls_context() if self._url.scheme == "https" else None)
        return self._transport

    async def _addresses(self, host: str, port: int) -> list[str]:
        """The host's addresses, each allowed by the policy (else BlockedUrlError): where the
        connection goes, so a second answer from DNS cannot send it elsewhere."""
        answers = await CheckedResolver(self._policy).resolve(host, port, family=socket.AF_UNSPEC)
        return [answer["host"] for answer in answers]

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        if self.era is None:
            async with self._lock:
                if self.era is None:
                    await self._detect()
        if self.era == wire.MODERN:
            params = wire.modern_params(params)
            message = wire.request(next(self._ids), method, params)
            return wire.outcome(await self._post(message, wire.modern_headers(method, params)))
        if not self._initialized:
            async with self._lock:
                if not self._initialized:
                    await self._initialize()
        session = self._session_id
        try:
            return wire.outcome(await self._post(wire.request(next(self._ids), method, params), self._legacy_headers()))
        except McpHttpError as exc:
            if exc.code != 404 or session is None:
                raise
        async with self._lock:  # the server forgot the session: open a new one, once
            if self._session_id == session:
                await self._initialize()
        return wire.outcome(await self._post(wire.request(next(self._ids), method, params), self._legacy_headers()))

    async def _detect(self) -> None:
        params = wire.modern_params(None)
        probe = wire.request(next(self._ids), "server/discover", params)
        try:
            result = wire.outcome(await self._post(probe, wire.modern_headers("server/discover", params)))
        except McpProtocolError:
            result = {}
        except McpHttpError as exc:
            if exc.code not in _NOT_THIS_ERA or isinstance(exc, McpBlockedUrlError):
                raise
            result = {}
        versions = result.get("supportedVersions")
        if isinstance(versions, list) and wire.MODERN in versions:
            self.era = wire.MODERN
            return
        await self._initialize()
        self.era = wire.LEGACY

    async def _initialize(self) -> None:
        self._session_id = None
        self._initialized = False
        message = wire.request(next(self._ids), "initialize", wire.initialize_params())
        result = wire.outcome(await self._post(message, {}, initialize=True))
        version = result.get("protocolVersion")
        if version not in wire.HANDSHAKE_VERSIONS:
            raise McpProtocolError(INVALID_REPLY, f"the server answered initialize with protocol version {version!r}")
        self.protocol_version = version
        await self._post(wire.notification("notifications/initialized"), self._legacy_headers(), reply=False)
        self._initialized = True

    def _legacy_headers(self) -> dict[str, str]:
        headers = {"MCP-Protocol-Version": self.protocol_version or wire.LEGACY}
        if self._session_id is not None:
            headers[_SESSION] = self._session_id
        return headers

    async def _post(self, message: dict[str, Any], headers: dict[str, str], *, initialize: bool = False,
                    reply: bool = True) -> Any:
        try:
            async with self._slots:
                response = await self._send(wire.dumps(message), headers)
                try:
                    return await self._answer(response, message, initialize, reply)
                finally:
                    await response.close()
        except McpError:
            raise
        except BlockedUrlError as exc:  # from CheckedResolver, which also reports names that do not resolve
            if str(exc).startswith("cannot resolve"):
                raise McpHttpError(502, f"cannot resolve the MCP server's host {self._host}") from None
            raise McpBlockedUrlError(400, str(exc)) from None
        except Unreachable as exc:
            raise McpHttpError(502, f"cannot connect to the MCP server at {self._host} ({exc.reason})") from None
        except TimeoutError:  # the connect's own limit (the request's is McpServer's, a cancellation here)
            raise McpHttpError(502, f"cannot connect to the MCP server at {self._host} "
                                    f"within {self._connect_timeout:g} s") from None
        except UpstreamError as exc:  # the transport's "larger than" for a body read whole
            raise McpProtocolError(INVALID_REPLY, f"the server's reply is over {wire.MAX_REPLY_BYTES:,} bytes") from exc
        except (TransportFault, OSError, ValueError) as exc:
            raise McpHttpError(502, f"the MCP server at {self._host} broke off the reply "
                                    f"({type(exc).__name__})") from exc

    async def _send(self, body: bytes, headers: dict[str, str]) -> PlainReply:
        pool = self._pool()
        try:
            return await pool.send("POST", self._target, body, headers)
        except ClosedUnanswered as exc:
            if not exc.reused:
                raise
        # a kept connection the server closed as the request went: it never arrived, send it again
        return await pool.send("POST", self._target, body, headers)

    async def _answer(self, response: PlainReply, message: dict[str, Any], initialize: bool, reply: bool) -> Any:
        if initialize and (session := response.header(_SESSION)):
            self._session_id = session
        if response.status >= 300:
            await self._raise_for_status(response)
        if not reply or response.status == 202:
            return None
        if _media_type(response) == "text/event-stream":
            events = wire.SseEvents()
            read = response.read_chunk
            while True:
                piece = await read()
                for payload in events.feed(piece) if piece else events.end():
                    received = wire.load(payload)
                    if wire.is_response_to(received, message["id"]):
                        # the stream's end usually follows at once: read it, and the connection is kept
                        await response.finish(_DRAIN_SECONDS, _DRAIN_BYTES)
                        return received
                if not piece:
                    raise McpProtocolError(INVALID_REPLY, "the server's event stream ended without a reply")
        return wire.load(await response.read_whole(wire.MAX_REPLY_BYTES))

    async def _raise_for_status(self, response: PlainReply) -> None:
        if _media_type(response) == "application/json":
            try:  # a JSON-RPC error at an HTTP status (2026-07-28 pairs them) says more than the status
                wire.outcome(wire.load(await response.read_whole(64 * 1024)))
            except McpProtocolError as exc:
                if response.status != 404:
                    raise
                raise McpHttpError(404, exc.message) from None
            except McpError:
                pass
            except UpstreamError:  # over 64 KiB: the status says it
                pass
        raise McpHttpError(response.status, f"the MCP server at {self._host} answered HTTP {response.status}")

    async def close(self) -> None:
        transport, self._transport = self._transport, None
        if transport is None:
            return
        if self._session_id is not None:
            try:  # ends the 2025-11-25 session on the server; a server may refuse it (405)
                async with asyncio.timeout(2):
                    response = await transport.send("DELETE", self._target, None, self._legacy_headers())
                    await response.close()
            except (TransportFault, TimeoutError, OSError, BlockedUrlError):
                pass
            self._session_id = None
        await transport.close()


def _media_type(response: PlainReply) -> str:
    return (response.header("content-type") or "").partition(";")[0].strip().lower()

