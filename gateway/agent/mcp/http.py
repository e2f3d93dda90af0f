"""Streamable HTTP to one MCP server, in whichever era it speaks, over aiohttp's client.

The era is found once per connection (and can be handed in when known, `era=`): a 2026-07-28
`server/discover` first; a server that does not answer it with 2026-07-28 among its versions gets
the 2025-11-25 `initialize` handshake. A 2025-11-25 session that the server forgot (404 on a request
carrying its `MCP-Session-Id`) is opened again and the request sent once more.

Connections go only where `policy` allows (providers/urlsafety.py: public addresses unless the
host was allow-listed); redirects are not followed, the proxy environment is not read, a reply is
read up to MAX_REPLY_BYTES. The configured `headers` (authorization included) go on every request
and into no message, log line or error: errors name the host only.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from typing import Any

import aiohttp
from yarl import URL

from gateway.agent.mcp import wire
from gateway.agent.mcp.results import INVALID_REPLY, McpError, McpHttpError, McpProtocolError
from providers.urlsafety import AddressPolicy, BlockedUrlError, CheckedResolver, address_problem, check_url

#: statuses that mean "not this era" when probing with server/discover (auth, rate limits and
#: server errors are answers about the server, not about the era, and fail the call instead)
_NOT_THIS_ERA = frozenset({400, 404, 405, 406, 409, 415, 422})
_ACCEPT = "application/json, text/event-stream"
_SESSION = "Mcp-Session-Id"


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
        self._headers = dict(headers or {})
        self._policy = policy
        self.era = era
        self.protocol_version: str | None = None  # what initialize agreed (2025-11-25 era)
        self._initialized = False
        self._session_id: str | None = None
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self._client: aiohttp.ClientSession | None = None
        self._connect_timeout = connect_timeout

    @property
    def url(self) -> URL:
        return self._url

    def _session(self) -> aiohttp.ClientSession:
        if self._client is None:
            connector = aiohttp.TCPConnector(resolver=CheckedResolver(self._policy), use_dns_cache=False, limit=8)
            self._client = aiohttp.ClientSession(
                connector=connector, trust_env=False,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout))
        return self._client

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
        sent = {**self._headers, **headers, "Accept": _ACCEPT, "Content-Type": "application/json"}
        try:
            async with self._session().post(self._url, data=wire.dumps(message), headers=sent,
                                            allow_redirects=False) as response:
                if initialize and response.headers.get(_SESSION):
                    self._session_id = response.headers[_SESSION]
                if response.status >= 300:
                    await self._raise_for_status(response)
                if not reply or response.status == 202:
                    return None
                if response.content_type == "text/event-stream":
                    async for received in wire.sse_messages(response.content.iter_any()):
                        if wire.is_response_to(received, message["id"]):
                            return received
                    raise McpProtocolError(INVALID_REPLY, "the server's event stream ended without a reply")
                return wire.load(await _read_capped(response))
        except McpError:
            raise
        except BlockedUrlError as exc:  # from CheckedResolver, which also reports names that do not resolve
            if str(exc).startswith("cannot resolve"):
                raise McpHttpError(502, f"cannot resolve the MCP server's host {self._host}") from None
            raise McpBlockedUrlError(400, str(exc)) from None
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, BlockedUrlError):
                raise McpBlockedUrlError(400, str(exc.os_error)) from None
            raise McpHttpError(502, f"cannot connect to the MCP server at {self._host}") from exc
        except (aiohttp.ClientError, ValueError) as exc:
            raise McpHttpError(502, f"the MCP server at {self._host} broke off the reply "
                                    f"({type(exc).__name__})") from exc

    async def _raise_for_status(self, response: aiohttp.ClientResponse) -> None:
        if response.content_type == "application/json":
            try:  # a JSON-RPC error at an HTTP status (2026-07-28 pairs them) says more than the status
                wire.outcome(wire.load(await _read_capped(response, 64 * 1024)))
            except McpProtocolError as exc:
                if response.status != 404:
                    raise
                raise McpHttpError(404, exc.message) from None
            except McpError:
                pass
        raise McpHttpError(response.status, f"the MCP server at {self._host} answered HTTP {response.status}")

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        if self._session_id is not None:
            try:  # ends the 2025-11-25 session on the server; a server may refuse it (405)
                async with asyncio.timeout(2):
                    async with client.delete(self._url, headers={**self._headers, **self._legacy_headers()},
                                             allow_redirects=False):
                        pass
            except (aiohttp.ClientError, TimeoutError, OSError):
                pass
            self._session_id = None
        await client.close()


async def _read_capped(response: aiohttp.ClientResponse, limit: int = wire.MAX_REPLY_BYTES) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise McpProtocolError(INVALID_REPLY, f"the server's reply is over {limit:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
