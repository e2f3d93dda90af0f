"""Idempotency-Key: a retried POST gets the first answer again instead of a second agent run.

Covers non-streaming `POST /v1/chat/completions` and `POST /v1/responses` (IDEMPOTENT_PATHS), and
the POSTs of the Conversations API (`/v1/conversations...`): a retried create must not make a
second conversation, nor a retried `items` append add the items twice.
- The key is scoped to the owner that sent it (profile and key name, http/auth.py), the
  credential presented (a SHA-256 of it, never the token) and to method and path.
- The first reply (status, body bytes, Content-Type and the route's own headers) is kept for
  API_SERVER_IDEMPOTENCY_TTL seconds (default 300) and replayed byte-identical, with
  `Idempotent-Replayed: true`. Each replay still gets its own `X-Request-Id`.
- The same key with a different body (SHA-256 of the raw bytes) is a 422 `idempotency_key_reused`.
- A duplicate arriving while the first is still running waits for it and gets its reply (with
  PostgreSQL shared by replicas: on any replica, polling up to 60 s, then 409 with Retry-After).
- Replies that invite a retry (5xx, 408, 409, 429) are not kept: a retry should really run again.
  Duplicates that were waiting on such a reply then run on their own, one at a time (the first
  becomes the new owner of the key), exactly as if they had arrived after it.
- Streaming requests (`"stream": true`) ignore the key: a stream cannot be replayed faithfully, and
  the SDKs send streams without one.

The replies sit behind `idempotency_store.IdempotencyCache` (two calls), on the app under
`appkeys.IDEMPOTENCY`: in memory, or in PostgreSQL when API_SERVER_DATABASE_URL is set
(store/postgres/idempotency.py), so a retry that lands on another replica replays the first reply.
"""

from __future__ import annotations

import hashlib
import json

from aiohttp import web

from gateway.errors import GatewayError, InvalidRequestError
from gateway.http import appkeys
from gateway.http.auth import owner_key
from gateway.http.body import read_body
from gateway.http.checks import Handler, error_response, presented_key
from gateway.store.idempotency import CachedReply

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
IDEMPOTENT_PATHS = frozenset({"/v1/chat/completions", "/v1/responses"})
CONVERSATIONS_PATH = "/v1/conversations"
MAX_KEY_LENGTH = 255
RETRYABLE_STATUSES = frozenset({408, 409, 429})
# Headers that belong to one delivery, not to the reply: hooks and aiohttp set them afresh.
_PER_DELIVERY = frozenset({"content-length", "date", "server", "transfer-encoding", "set-cookie", "vary",
                           "x-request-id", REPLAYED_HEADER.lower()})


def credential_scope(request: web.Request) -> str:
    """Who the key belongs to: the caller's owner (profile and key name, never the key), so a
    replay never crosses owners, nor profiles sharing one database."""
    return owner_key(request, presented_key(request))


def cache_key(scope: str, method: str, path: str, idempotency_key: str) -> str:
    # newline cannot occur in any part (HTTP header values and paths exclude it), so no collisions
    return "\n".join((scope, method, path, idempotency_key))


def _valid_key(value: str) -> str:
    if not value or len(value) > MAX_KEY_LENGTH or not value.isascii() or not value.isprintable():
        raise InvalidRequestError(
            f"The Idempotency-Key header must be 1-{MAX_KEY_LENGTH} printable ASCII characters.",
            code="invalid_idempotency_key")
    return value


def _is_stream(raw: bytes) -> bool:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(body, dict) and body.get("stream") is True


def is_cacheable_status(status: int) -> bool:
    return status < 500 and status not in RETRYABLE_STATUSES


def capture(response: web.StreamResponse, fingerprint: str) -> CachedReply | None:
    """What to keep of a finished reply, or None when it must not be replayed."""
    if not isinstance(response, web.Response) or response.prepared or not is_cacheable_status(response.status):
        return None
    body = response.body
    if not isinstance(body, bytes):
        return None  # a streamed payload (file, generator) cannot be replayed byte for byte
    headers = tuple((k, v) for k, v in response.headers.items() if k.lower() not in _PER_DELIVERY)
    return CachedReply(status=response.status, body=body, headers=headers, fingerprint=fingerprint)


def replay(reply: CachedReply) -> web.Response:
    response = web.Response(status=reply.status, body=reply.body)
    for name, value in reply.headers:
        response.headers.add(name, value)
    response.headers[REPLAYED_HEADER] = "true"
    return response


def wants_idempotency(request: web.Request) -> bool:
    """A POST to a covered route that carries the header (whether the key is valid is checked later)."""
    if request.method != "POST" or HEADER not in request.headers:
        return False
    path = request.path
    return path in IDEMPOTENT_PATHS or path == CONVERSATIONS_PATH or path.startswith(CONVERSATIONS_PATH + "/")


async def run_idempotent(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Serves a request that `wants_idempotency`: the kept reply, or the handler's, kept.
    Called after auth, so only accepted credentials ever reach (or evict from) the cache."""
    idempotency_key = _valid_key(request.headers[HEADER])
    # the same reader as the handlers (timeout, size, content type); aiohttp keeps the bytes, so
    # the handler reads the same body again at no cost
    raw = await read_body(request)
    if _is_stream(raw):
        return await handler(request)
    cache = request.app[appkeys.IDEMPOTENCY]
    key = cache_key(credential_scope(request), request.method, request.path, idempotency_key)
    fingerprint = hashlib.sha256(raw).hexdigest()
    kept = await cache.acquire(key, fingerprint)
    if kept is not None:
        return replay(kept)
    reply: CachedReply | None = None
    try:
        try:
            response = await handler(request)
        except GatewayError as exc:
            # rendered here (as the errors middleware would) so a 4xx is replayed like any reply
            response = error_response(exc)
        reply = capture(response, fingerprint)
        return response
    finally:
        await cache.release(key, reply)
