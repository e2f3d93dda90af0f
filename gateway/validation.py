"""Small checks shared by the request parsers; each failure is a 400 naming the field."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from gateway.errors import InvalidRequestError


async def read_json_object(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object, or a 400 saying what is wrong with it."""
    raw = await request.read()
    if not raw.strip():
        raise InvalidRequestError("the request body is empty; send a JSON object")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequestError(f"the request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidRequestError("the request body must be a JSON object")
    return body


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
