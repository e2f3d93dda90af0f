"""The checks and renderings every request goes through: errors, headers, auth, limits.
gateway/front_door.py calls them in order."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.web_urldispatcher import _default_expect_handler  # the library's own 100 Continue

from gateway.common import json_out
from gateway.config.settings import Settings
from gateway.errors import (
    AuthenticationError,
    GatewayError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    ServiceUnavailableError,
)
from gateway.http import appkeys
from gateway.http.auth import authenticate
from gateway.http.lifecycle import Lifecycle
from gateway.observe.log_limits import printable

log = logging.getLogger("agent_gateway")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
METRICS_PATH = "/metrics"
#: Routes that need no key: health, the API's description, and the admin page's files (the page asks
#: for the admin key and sends it with its own API calls; routes/admin_page.py)
OPEN_PATHS = frozenset({"/health", "/v1/health", "/health/ready", "/openapi.json",
                        "/admin", "/admin/admin.css", "/admin/admin.js", "/admin/chart.js"})
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


def error_response(error: GatewayError) -> web.Response:
    headers = error.headers()
    response = web.Response(
        status=error.status,
        body=json_out.dumps(error.envelope(), ensure_ascii=True),
        content_type="application/json",
        headers=headers,
    )
    if headers.get("Connection") == "close":
        response.force_close()  # no keep-alive after it; aiohttp still drains the body first
    return response


#: How much of an unknown path a 404 repeats (the path is the client's; a log or a body stays short).
_PATH_SHOWN = 200


def from_http_exception(exc: web.HTTPException, request: web.BaseRequest | None = None) -> GatewayError:
    """aiohttp's own refusals (no route, wrong method, body too large) as the OpenAI envelope."""
    if exc.status == 404:
        return _no_route(request)
    if exc.status == 405:
        error = InvalidRequestError(f"method not allowed; allowed: {exc.headers.get('Allow', '?')}",
                                    code="method_not_allowed")
        error.status = 405
        return error
    if exc.status == 413:
        return PayloadTooLargeError("the request body is larger than API_SERVER_MAX_BODY_BYTES allows")
    if exc.status == 417:  # aiohttp's own text repeats the header: ours does not
        error = InvalidRequestError("the Expect header is not supported; only 'Expect: 100-continue' is",
                                    code="expectation_failed")
        error.status = 417
        return error
    error = InvalidRequestError(exc.reason or "invalid request", code=None)
    error.status = exc.status
    return error


def _no_route(request: web.BaseRequest | None) -> NotFoundError:
    """A 404 naming what was asked, as OpenAI's `Invalid URL (GET /v1/...)` does; outside /v1, where
    the API is. The query string is left out (it may carry what a client should not see echoed)."""
    if request is None:
        return NotFoundError("Invalid URL: no such route; the API lives under /v1 (e.g. /v1/chat/completions).")
    path = printable(request.path)
    if len(path) > _PATH_SHOWN:
        path = path[:_PATH_SHOWN] + "..."
    asked = f"Invalid URL ({printable(request.method)} {path})"
    if request.path == "/v1" or request.path.startswith("/v1/"):
        return NotFoundError(f"{asked}: this gateway has no such route; see /openapi.json for the ones it has.")
    return NotFoundError(f"{asked}: the API lives under /v1 (e.g. /v1/chat/completions).")


def internal_error(request: web.Request) -> web.Response:
    """An unexpected exception: logged with its traceback, answered without it."""
    log.exception("unhandled error on %s %s", request.method, printable(request.path))
    return error_response(GatewayError("internal error; see the gateway's log", code="internal_error"))


def admit(request: web.Request, app: web.Application) -> Lifecycle:
    """The checks before routing, in this order: not shutting down (503), declared body size
    (413), key (401, or 429 past its rpm) or, with no key, Host (403). The caller must `leave()` the returned lifecycle
    once the request is done. `app`: the request's (the caller has it at hand)."""
    lifecycle = app[appkeys.LIFECYCLE]
    if lifecycle.draining:
        raise ServiceUnavailableError("the gateway is shutting down; retry shortly", retry_after=1)
    settings = app[appkeys.SETTINGS]
    if request.path == UPLOAD_PATH and request.method == "POST":
        check_upload_size(request, settings)
    else:
        check_body_size(request, settings.max_body_bytes)
    open_path = request.path in OPEN_PATHS or request.method == "OPTIONS" or (
        request.path == METRICS_PATH and is_metrics_scrape(request, settings))  # its own key, not a caller
    ring = app[appkeys.KEYRING]
    # a keyless gateway reads no key: the Authorization header is parsed only when keys exist
    authenticate(ring, None if ring.keyless else presented_key(request), open_path)  # 401/429: http/auth.py
    hosts = app[appkeys.ALLOWED_HOSTS]
    if hosts is not None and ring.keyless:
        check_host(request, hosts)
    lifecycle.enter()
    return lifecycle


def check_body_size(request: web.Request, limit: int) -> None:
    """Refuse a declared oversize body before reading it; chunked bodies hit client_max_size."""
    length = request.content_length
    if length is not None and length > limit:
        raise PayloadTooLargeError(f"the request body is larger than the {limit} bytes allowed")


#: The one route whose body is bounded by API_SERVER_MAX_FILE_MB rather than API_SERVER_MAX_BODY_BYTES
UPLOAD_PATH = "/v1/files"
#: What a multipart upload carries beside the file itself: boundaries, part headers, `purpose`
#: (the file part alone is held to the limit exactly while it streams: http/routes/files.py)
UPLOAD_SLACK = 64 * 1024


def file_limit(settings: Settings) -> int:
    """The largest file an upload may carry, in bytes (API_SERVER_MAX_FILE_MB; MB = 10^6 bytes)."""
    return int(settings.max_file_mb * 1_000_000)


def file_too_large(settings: Settings) -> PayloadTooLargeError:
    return PayloadTooLargeError(f"the file is larger than API_SERVER_MAX_FILE_MB ({settings.max_file_mb:g} MB) "
                                "allows", param="file")


def check_upload_size(request: web.Request, settings: Settings) -> None:
    """An upload whose declared length passes the file limit is refused before a byte of it is read."""
    length = request.content_length
    if length is not None and length > file_limit(settings) + UPLOAD_SLACK:
        raise file_too_large(settings)


def presented_key(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


def is_metrics_scrape(request: web.Request, settings: Settings) -> bool:
    """The request presents API_SERVER_METRICS_KEY: the operator's scraper, which sees the per-key series."""
    expected = settings.metrics_key
    presented = presented_key(request) if expected else None
    return expected is not None and presented is not None and hmac.compare_digest(
        presented.encode("utf-8", "surrogateescape"), expected.encode())


def check_key(request: web.Request, expected: str | None) -> None:
    if expected and request.path not in OPEN_PATHS and request.method != "OPTIONS":
        presented = presented_key(request)
        if presented is None:
            raise AuthenticationError(
                "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.", code=None
            )
        # aiohttp decodes header bytes that are not UTF-8 as surrogates: encode them back as they came
        if not hmac.compare_digest(presented.encode("utf-8", "surrogateescape"), expected.encode()):
            raise AuthenticationError("Incorrect API key provided.")


def allowed_hosts(settings: Settings) -> frozenset[str] | None:
    """The Host names a keyless gateway answers to: loopback names, the bind address and
    API_SERVER_ALLOWED_HOSTS. None when a key is set: a page that rebinds a name to us has no key
    (nor when the store holds live keys: `admit` checks the Host only while the ring is keyless)."""
    if settings.api_key:
        return None
    names = {"localhost", "127.0.0.1", "::1", settings.host, *settings.allowed_hosts}
    return frozenset(name.strip("[]").rstrip(".").lower() for name in names)


def host_name(host: str) -> str:
    """The name part of a Host header: `[::1]:8642` -> `::1`, `Example.COM.:80` -> `example.com`."""
    if host.startswith("["):
        name = host[1:].partition("]")[0]
    else:
        name, colon, port = host.rpartition(":")
        if not colon or not port.isdigit():
            name = host
    return name.rstrip(".").lower()


def check_host(request: web.Request, allowed: frozenset[str]) -> None:
    """No key means anything that reaches the port is trusted, so the name it used must be ours:
    a web page that points a name of its own at 127.0.0.1 (DNS rebinding) is refused."""
    if host_name(request.headers.get("Host", "")) not in allowed:
        raise PermissionDeniedError(
            "this Host is not allowed: a gateway without API_SERVER_KEY answers only to localhost, its bind "
            "address and the names in API_SERVER_ALLOWED_HOSTS", code="host_not_allowed")


def add_security_headers(response: web.StreamResponse) -> None:
    """Part of the response-prepare hook (app.py): JSON, errors and streams alike."""
    response.headers.update(SECURITY_HEADERS)



async def continue_if_a_run_slot_is_free(request: web.Request) -> None:
    """`Expect: 100-continue` on a route that runs the agent (curl sends it for large bodies).
    aiohttp answers it before any middleware runs, so by default such a client was told to send
    its whole body only to get the 429 after it: with every run slot busy, no 100 is sent and the
    front door's 429 is the client's first answer (it then never sends the body)."""
    limiter = request.app[appkeys.LIMITER]
    if limiter.active >= limiter.limit and not limiter.may_read_over_slots(request.method, request.path,
                                                                            request.content_length):
        return None
    return await _default_expect_handler(request)
