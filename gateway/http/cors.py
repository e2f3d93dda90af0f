"""CORS: which browser origins may call the gateway (API_SERVER_CORS_ORIGINS).

- Nothing configured: no CORS headers at all, and a browser preflight is refused (403, saying how
  to allow the origin), so browsers never get a grant.
- Exact origins (`https://chat.example.com,http://localhost:3000`): a preflight from a listed origin
  gets 204 with the origin echoed; actual responses (JSON, errors, SSE streams) to it carry
  `Access-Control-Allow-Origin` and expose the headers a browser client reads. Every response then
  says `Vary: Origin`, so caches never hand one origin's grant to another. Other origins: preflight
  403, actual responses without a grant (the browser hides them from the page).
- `*` (an explicit choice): any origin, answered with `Access-Control-Allow-Origin: *`. Unsafe with
  a key: any web page a user opens can then drive the gateway with a key it gets hold of, and
  without a key, any page can drive a gateway on the user's own machine.

No `Access-Control-Allow-Credentials` is ever sent: the key travels in the `Authorization` header
set by the page's script, which needs no cookies or credentialed mode.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from aiohttp import web

from gateway.errors import PermissionDeniedError
from gateway.http.checks import error_response

ALLOW_METHODS = "GET, POST, DELETE, OPTIONS"
# What OpenAI's SDKs (openai-python, openai-node) and browser apps send. The X-Stainless names come
# from the SDKs' sources: platform headers, retry count, timeouts and helper markers.
ALLOW_HEADERS = ", ".join((
    "Authorization", "Content-Type", "Accept", "User-Agent", "Idempotency-Key", "X-Request-Id",
    "OpenAI-Organization", "OpenAI-Project", "OpenAI-Beta",
    "X-Stainless-Lang", "X-Stainless-Package-Version", "X-Stainless-OS", "X-Stainless-Arch",
    "X-Stainless-Runtime", "X-Stainless-Runtime-Version", "X-Stainless-Async", "X-Stainless-Retry-Count",
    "X-Stainless-Timeout", "X-Stainless-Read-Timeout", "X-Stainless-Helper-Method",
    "X-Stainless-Stream-Helper", "X-Stainless-Raw-Response", "X-Stainless-Poll-Helper",
    "X-Stainless-Custom-Poll-Interval", "X-Stainless-Custom-Event-Handler",
))
# Response headers a page may read: ids for support, and the retry hints SDKs act on.
EXPOSE_HEADERS = "X-Request-Id, Retry-After, Idempotent-Replayed, x-should-retry"
MAX_AGE = "600"


@dataclass(frozen=True)
class CorsPolicy:
    origins: frozenset[str] = frozenset()
    any_origin: bool = False

    @classmethod
    def from_origins(cls, configured: Iterable[str]) -> CorsPolicy:
        normalized = {normalize_origin(o) for o in configured if o.strip()}
        return cls(origins=frozenset(normalized - {"*"}), any_origin="*" in normalized)

    @property
    def enabled(self) -> bool:
        return self.any_origin or bool(self.origins)

    def grant(self, origin: str | None) -> str | None:
        """The `Access-Control-Allow-Origin` value for this request's origin, or None (no grant)."""
        if origin is None or not self.enabled:
            return None
        if self.any_origin:
            return "*"
        return origin if origin in self.origins else None


def normalize_origin(origin: str) -> str:
    """Browsers send `scheme://host[:port]` in lowercase with no path; config often has a `/`."""
    return origin.strip().rstrip("/").lower()


def policy_for(request: web.Request) -> CorsPolicy:
    # built once in create_app from the (frozen) settings, not per request
    return request.app[CORS_POLICY]


def is_preflight(request: web.Request) -> bool:
    return (request.method == "OPTIONS" and "Origin" in request.headers
            and "Access-Control-Request-Method" in request.headers)


def preflight_response(request: web.Request) -> web.Response | None:
    """The answer to a browser preflight, before routing (no key needed: browsers never send one
    here); None when the request is not a preflight."""
    if not is_preflight(request):
        return None
    policy = policy_for(request)
    origin = request.headers["Origin"]
    if policy.grant(origin) is None:
        if policy.enabled:
            reason = f"origin {origin!r} is not in API_SERVER_CORS_ORIGINS"
        else:
            reason = f"browser access is not enabled; add {origin!r} to API_SERVER_CORS_ORIGINS to allow it"
        return error_response(PermissionDeniedError(f"CORS preflight refused: {reason}.", code="cors_origin_denied"))
    headers = {
        "Access-Control-Allow-Methods": ALLOW_METHODS,
        "Access-Control-Allow-Headers": ALLOW_HEADERS,
        "Access-Control-Max-Age": MAX_AGE,
    }
    if request.headers.get("Access-Control-Request-Private-Network", "").lower() == "true":
        # Chrome's Private Network Access: a listed public page calling a gateway on localhost/LAN
        headers["Access-Control-Allow-Private-Network"] = "true"
    return web.Response(status=204, headers=headers)


def add_cors_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Part of the response-prepare hook (app.py), so JSON, errors (401/404/413/...) and streams
    all get the grant."""
    policy = policy_for(request)
    if not policy.enabled:
        return
    if not policy.any_origin:
        _add_vary_origin(response)
    allowed = policy.grant(request.headers.get("Origin"))
    if allowed is None:
        return
    response.headers["Access-Control-Allow-Origin"] = allowed
    if not is_preflight(request):
        response.headers["Access-Control-Expose-Headers"] = EXPOSE_HEADERS


def _add_vary_origin(response: web.StreamResponse) -> None:
    current = response.headers.get("Vary")
    if current is None:
        response.headers["Vary"] = "Origin"
    elif "origin" not in {part.strip().lower() for part in current.split(",")}:
        response.headers["Vary"] = f"{current}, Origin"


#: The app's policy, built once in create_app. Kept here, not in appkeys.py, so that the keys module
#: imports no policy back from a module that reads the keys.
CORS_POLICY = web.AppKey("cors_policy", CorsPolicy)
