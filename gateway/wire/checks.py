"""Small checks shared by the request parsers; each failure is a 400 naming the field."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from gateway.errors import InvalidRequestError, RequestTimeoutError
from gateway.http import appkeys
from gateway.wire import jsontext


async def read_json_object(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object, or a 400 saying what is wrong with it.

    The whole body must arrive within API_SERVER_BODY_TIMEOUT: a client trickling bytes
    (slowloris) would otherwise hold a connection and a handler forever.
    """
    if request.content.is_eof():
        # the usual case: the whole body came in with the headers, so read() cannot wait and
        # arming a timer for it (~6 us) would buy nothing
        raw = await request.read()
    else:
        raw = await _read_within_timeout(request)
    if not raw.strip():
        raise InvalidRequestError("the request body is empty; send a JSON object")
    try:
        body = jsontext.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequestError(f"the request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidRequestError("the request body must be a JSON object")
    return body


async def _read_within_timeout(request: web.Request) -> bytes:
    """The rest of a body whose bytes are still arriving."""
    timeout = request.app[appkeys.SETTINGS].body_timeout
    try:
        async with asyncio.timeout(timeout):
            return await request.read()
    except TimeoutError as exc:
        # No force-close here: closing with unread bytes makes the kernel send a reset that can
        # destroy the 408 before a slow but honest client reads it. aiohttp drains the rest for at
        # most its lingering time (10 s) and then closes, so the connection stays bounded.
        raise RequestTimeoutError(
            f"the request body did not arrive within API_SERVER_BODY_TIMEOUT ({timeout:g} s)"
        ) from exc


def expect(value: Any, kinds: type | tuple[type, ...], param: str, what: str) -> Any:
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in _as_tuple(kinds))
    if not ok:
        raise InvalidRequestError(f"'{param}' must be {what}", param=param)
    return value


def _as_tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def optional_number(body: dict[str, Any], name: str, low: float | None = None, high: float | None = None) -> None:
    value = body.get(name)
    if value is None:
        return
    expect(value, (int, float), name, "a number")
    if (low is not None and value < low) or (high is not None and value > high):
        raise InvalidRequestError(f"'{name}' must be between {low:g} and {high:g}", param=name)


def optional_int(body: dict[str, Any], name: str, low: int = 1) -> None:
    value = body.get(name)
    if value is None:
        return
    expect(value, int, name, "an integer")
    if value < low:
        raise InvalidRequestError(f"'{name}' must be at least {low}", param=name)
