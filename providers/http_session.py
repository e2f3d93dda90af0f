"""The providers' HTTP client: one pooled aiohttp session per provider, answers read whole.

aiohttp, not httpx: the gateway already loads it (server, upstream, SafeFetcher), and one provider
call through it costs a fraction of httpx's instructions (issue 33; bench/README.md, "Round 3
session 3"). A provider gets a `ServiceResponse` (status, case-insensitive headers, the body) and
never an aiohttp type, so the kit's client can change again without touching a plugin.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import ssl
from collections.abc import Mapping
from typing import Any, NamedTuple

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from multidict import CIMultiDictProxy
from yarl import URL

from providers.errors import AgentGatewayError

try:  # a default dependency (the gateway's JSON is orjson's too), but the kit runs without it
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - depends on the environment
    _fast_loads = None  # type: ignore[assignment]

DEFAULT_SECONDS = 30.0
# aiohttp keeps idle connections without polling them (httpcore poll()ed each one per request), so
# idling costs a later call nothing. But a connection kept past the server's own keep-alive is a
# POST sent into a closing socket, which aiohttp does not retry (only idempotent methods): Node's
# and uvicorn's servers (self-hosted Firecrawl, SearXNG behind granian ...) close idle connections
# after 5 s. 4 s stays under them and still spans the rounds of one agent turn that follow quickly.
IDLE_SECONDS = 4.0
#: The most of an answer a provider reads: search and extract answers are kilobytes to a few MiB.
MAX_BODY_BYTES = 16 * 1024 * 1024
USER_AGENT = {"User-Agent": "agent-gateway"}


class BodyTooLarge(AgentGatewayError):
    """The answer's body exceeded MAX_BODY_BYTES (providers/http.py words it as a ProviderError)."""


def http_timeout(seconds: float) -> aiohttp.ClientTimeout:
    """A total budget whose connect phase never waits longer than 10 s (or the budget itself)."""
    return aiohttp.ClientTimeout(total=seconds, sock_connect=min(10.0, seconds))


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The verified TLS context all provider clients share: certifi's CAs, or SSL_CERT_FILE /
    SSL_CERT_DIR when set (what httpx did before), built on the first client. A context per
    client would load the CA bundle again, memory and start-up time, for each provider used."""
    paths = ssl.get_default_verify_paths()  # names OpenSSL's own variables, SSL_CERT_FILE / _DIR
    if os.environ.get(paths.openssl_cafile_env) or os.environ.get(paths.openssl_capath_env):
        return ssl.create_default_context()  # OpenSSL loads what they name instead of the system's CAs
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def connect_reason(exc: aiohttp.ClientConnectorError) -> str:
    """A connect failure in the OS's words: "Connection refused", "Name or service not known" ..."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"TLS: {getattr(exc.certificate_error, 'reason', None) or exc.certificate_error}"
    error = exc.os_error
    if isinstance(error, ssl.SSLError):
        return f"TLS: {error.reason or error} ({error})"
    if error.errno and error.errno > 0 and not isinstance(error, socket.gaierror):
        return os.strerror(error.errno)  # asyncio words it "Connect call failed (...)"
    return error.strerror or str(error) or type(error).__name__


class ServiceResponse:
    """A service's answer, read whole: what `describe_error` / `http_error` are handed."""

    __slots__ = ("status_code", "headers", "content", "url")

    def __init__(self, status_code: int, headers: CIMultiDictProxy[str], content: bytes, url: str) -> None:
        self.status_code = status_code
        self.headers = headers  # case-insensitive: headers.get("retry-after") finds Retry-After
        self.content = content
        self.url = url

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON; ValueError when it is not.

        orjson first (a few times quicker on a search answer), the stdlib for what orjson refuses
        (NaN, a byte-order mark, a lone surrogate's escape) so those read as they always did."""
        if _fast_loads is not None:
            try:
                return _fast_loads(self.content)
            except ValueError:  # orjson.JSONDecodeError
                pass
        return json.loads(self.content)


def _query(params: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Query pairs; a list value becomes repeated keys (as httpx sent them), None is left out."""
    pairs: list[tuple[str, str]] = []
    for key, value in params.items():
        for item in value if isinstance(value, list | tuple) else (value,):
            if item is None:
                continue
            pairs.append((key, "true" if item is True else "false" if item is False else str(item)))
    return pairs


class Route(NamedTuple):
    """How one URL is reached: its parsed form and the environment's proxy for its origin.

    The proxy's credentials (`http://user:pass@proxy:3128`) go as a `Proxy-Authorization` header:
    in the request itself for an `http://` target (sent to the proxy in absolute form), on the
    CONNECT for an `https://` one (the request inside the tunnel never carries them), which is
    what aiohttp's deprecated `proxy_auth` did."""

    url: URL
    proxy: URL | None = None
    #: Headers added to the request (an http target's Proxy-Authorization), or None.
    headers: Mapping[str, str] | None = None
    #: Headers of the CONNECT (an https target's Proxy-Authorization), or None.
    proxy_headers: Mapping[str, str] | None = None


#: URLs whose route a client keeps: a provider calls a handful of endpoints, a few more with paging links.
MAX_ROUTES = 64


def route_for(url: URL) -> Route:
    """The environment's proxy for `url` (HTTP(S)_PROXY, NO_PROXY), its credentials as headers."""
    try:
        proxy, auth = get_env_proxy_for_url(url)
    except LookupError:
        return Route(url)
    if auth is None:
        return Route(url, proxy)
    credentials = {"Proxy-Authorization": auth.encode()}
    if url.scheme == "https":
        return Route(url, proxy, proxy_headers=credentials)
    return Route(url, proxy, headers=credentials)


class ServiceClient:
    """One provider's aiohttp session (its keep-alive pool), opened in the running loop on first use."""

    def __init__(self, timeout: aiohttp.ClientTimeout | float = DEFAULT_SECONDS) -> None:
        self._timeout = http_timeout(timeout) if isinstance(timeout, int | float) else timeout
        self._session: aiohttp.ClientSession | None = None
        # Each URL's route, worked out once: parsing the URL and deciding its proxy were a part of
        # every call, and `trust_env=True` would look the proxy (and ~/.netrc) up in the thread
        # pool on every request. Bounded: cleared when full (URLs built per call churn it).
        self._routes: dict[str, Route] = {}

    @property
    def is_closed(self) -> bool:
        return self._session is None or self._session.closed

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(keepalive_timeout=IDLE_SECONDS, ssl=tls_context())
            self._session = aiohttp.ClientSession(
                connector=connector, headers=USER_AGENT, timeout=self._timeout, trust_env=False,
                cookie_jar=aiohttp.DummyCookieJar())  # an API client keeps no cookies
        return self._session

    def _route(self, url: str) -> Route:
        route = self._routes.get(url)
        if route is None:
            route = route_for(URL(url))
            if len(self._routes) >= MAX_ROUTES:
                self._routes.clear()
            self._routes[url] = route
        return route

    async def request(self, method: str, url: str, *, headers: Mapping[str, str] | None = None,
                      json: Any = None, params: Mapping[str, Any] | None = None,
                      timeout: aiohttp.ClientTimeout | float | None = None) -> ServiceResponse:
        """Send one request (no redirects followed) and read its answer whole (at most MAX_BODY_BYTES)."""
        route = self._route(url)
        kwargs: dict[str, Any] = {}
        if timeout is not None:
            kwargs["timeout"] = http_timeout(timeout) if isinstance(timeout, int | float) else timeout
        if params:
            kwargs["params"] = _query(params)
        if route.proxy is not None:
            kwargs["proxy"] = route.proxy
            if route.headers is not None:
                headers = {**headers, **route.headers} if headers else route.headers
            if route.proxy_headers is not None:
                kwargs["proxy_headers"] = route.proxy_headers
        async with self._open().request(method, route.url, headers=headers, json=json, allow_redirects=False,
                                        **kwargs) as response:
            declared = response.content_length
            if declared is not None and declared > MAX_BODY_BYTES:
                raise BodyTooLarge
            parts: list[bytes] = []
            size = 0
            while piece := await response.content.readany():
                size += len(piece)
                if size > MAX_BODY_BYTES:
                    raise BodyTooLarge
                parts.append(piece)
            return ServiceResponse(response.status, response.headers, b"".join(parts), str(response.url))

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
