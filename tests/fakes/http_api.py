"""Shared machinery for the fake web services: recording requests and scripted replies.

Each service module (tests/fakes/tavily.py, ...) builds a real aiohttp app that checks requests
the way the real API does and answers with its real shapes. This module holds what they share:
the request log and a per-route queue of one-shot replies ("answer the next /search with a 429
and Retry-After: 7"), so tests can script error cases without touching provider code.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    query: dict[str, str]
    body: Any


@dataclass
class Reply:
    status: int = 200
    json: Any = None
    text: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class FakeService:
    """Base for fakes: a request log, scripted replies, and the base URL once started."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._queued: dict[str, list[Reply]] = {}
        self.base_url = ""

    # -- scripting -------------------------------------------------------------------------
    def reply(
        self,
        route: str,
        status: int = 200,
        json: Any = None,
        *,
        text: str | None = None,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
    ) -> None:
        """Answer the next request to `route` with this reply instead of the default."""
        self._queued.setdefault(route, []).append(Reply(status, json, text, headers or {}, delay))

    def requests_to(self, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.path == path]

    # -- helpers for subclasses ------------------------------------------------------------
    async def record(self, request: web.Request) -> Recorded:
        raw = await request.read()
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        entry = Recorded(request.method, request.path, dict(request.headers), dict(request.query), body)
        self.requests.append(entry)
        return entry

    async def scripted(self, route: str) -> web.StreamResponse | None:
        """The queued reply for `route`, if any (after its delay)."""
        queue = self._queued.get(route)
        if not queue:
            return None
        reply = queue.pop(0)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.text is not None:
            return web.Response(status=reply.status, text=reply.text, headers=reply.headers)
        return web.json_response(reply.json, status=reply.status, headers=reply.headers)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def endpoint(
    fake: FakeService,
    route: str,
    *,
    authorized: Callable[[Recorded], bool],
    validate: Callable[[Recorded], str | None],
    answer: Callable[[Recorded], Any],
    error: Callable[[int, str], web.StreamResponse],
) -> Handler:
    """A handler that records, checks auth (401) then the request (400), then answers.

    A reply scripted for `route` wins over `answer`, but only for requests that passed the
    checks: a fake that answered a malformed request with success would hide provider bugs.
    """

    async def handler(request: web.Request) -> web.StreamResponse:
        recorded = await fake.record(request)
        if not authorized(recorded):
            return error(401, "missing or invalid API key")
        problem = validate(recorded)
        if problem:
            return error(400, problem)
        scripted = await fake.scripted(route)
        if scripted is not None:
            return scripted
        result = answer(recorded)
        return result if isinstance(result, web.StreamResponse) else web.json_response(result)

    return handler


def unknown_fields(body: Any, allowed: set[str]) -> str | None:
    """The body must be a JSON object with only known fields (the real APIs reject typos)."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    unknown = set(body) - allowed
    return f"unknown fields: {sorted(unknown)}" if unknown else None


def json_error(status: int, payload: Any) -> web.Response:
    return web.json_response(payload, status=status)
