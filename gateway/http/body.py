"""The request body: read once, whatever the route or headers, within the size and time limits.

One reader for every path (the handlers and the Idempotency-Key check alike), so no header can
switch a limit off: the body must be `application/json`, arrive within API_SERVER_BODY_TIMEOUT and
fit API_SERVER_MAX_BODY_BYTES.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from gateway.common import json_in
from gateway.errors import InvalidRequestError, RequestTimeoutError, UndecodableBodyError, UnsupportedMediaTypeError
from gateway.http import appkeys
from gateway.http.lifecycle import OVER_SLOT_BODY_SECONDS, OVER_SLOTS, too_many_runs


async def read_body(request: web.Request) -> bytes:
    """The raw body of a JSON POST: the one reader every route and the Idempotency-Key cache use,
    so the content type (415), the size limit (413, client_max_size) and the body timeout (408)
    hold whatever the headers."""
    if request.content_type != "application/json":
        # A web page may POST text/plain, a form or a bare blob to any origin without a preflight;
        # only JSON (which needs one) gets in, so a page cannot make the agent run.
        raise UnsupportedMediaTypeError("the request body must be JSON, sent with 'Content-Type: application/json'")
    try:
        if request.content.is_eof():
            # the usual case: the whole body came in with the headers, so read() cannot wait and
            # arming a timer for it would cost a request's time for nothing
            return await request.read()
        return await _read_within_timeout(request)
    except web.RequestPayloadError as exc:
        # a body aiohttp could not decode (Content-Encoding: gzip that is not gzip) or whose
        # framing broke: the connection cannot carry another request, so it is closed
        raise UndecodableBodyError("the request body could not be read: it does not match its "
                                   "Content-Encoding or Transfer-Encoding") from exc


async def read_json_object(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object, or a 400 saying what is wrong with it.

    The whole body must arrive within API_SERVER_BODY_TIMEOUT: a client trickling bytes
    (slowloris) would otherwise hold a connection and a handler forever.
    """
    raw = await read_body(request)
    if not raw.strip():
        raise InvalidRequestError("the request body is empty; send a JSON object")
    try:
        body = json_in.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequestError(f"the request body is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise InvalidRequestError("the request body is nested too deeply") from exc
    if not isinstance(body, dict):
        raise InvalidRequestError("the request body must be a JSON object")
    return body


async def _read_within_timeout(request: web.Request) -> bytes:
    """The rest of a body whose bytes are still arriving."""
    timeout = request.app[appkeys.SETTINGS].body_timeout
    over_slots = request.get(OVER_SLOTS, False)  # read past the run slots: one of the few such places
    if over_slots:
        timeout = min(timeout, OVER_SLOT_BODY_SECONDS)
    try:
        async with asyncio.timeout(timeout):
            return await request.read()
    except TimeoutError as exc:
        if over_slots:
            raise too_many_runs(request.app[appkeys.LIMITER].limit) from exc
        # No force-close here: closing with unread bytes makes the kernel send a reset that can
        # destroy the 408 before a slow but honest client reads it. aiohttp drains the rest for at
        # most its lingering time (10 s) and then closes, so the connection stays bounded.
        raise RequestTimeoutError(
            f"the request body did not arrive within API_SERVER_BODY_TIMEOUT ({timeout:g} s)"
        ) from exc
