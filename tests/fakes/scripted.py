"""What every fake web service shares: a request log, scripted replies and checked endpoints.

Each service module (tests/fakes/tavily.py, ...) builds a real aiohttp app that checks requests
the way the real API does and answers with its real shapes. This module holds the rest: the log
of recorded requests, a queue of one-shot replies ("answer the next /search with a 429 and
Retry-After: 7"), the handler that checks the key and the request before answering, and serving
a fake on 127.0.0.1 from a fixture, so tests can script error cases without touching provider code.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import web


@dataclass
class Reply:
    """One scripted answer: a status with a JSON (or raw text) body, extra headers, an optional delay."""

    status: int = 200
    json: Any = None
    text: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    content_type: str = "text/plain"  # for `text` bodies

    def response(self) -> web.Response:
        if self.text is not None:
            return web.Response(
                status=self.status, text=self.text, headers=self.headers, content_type=self.content_type
            )
        return web.json_response(self.json, status=self.status, headers=self.headers)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    query: dict[str, str]
    body: Any


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Check = Callable[[Recorded], str | None]
Answer = Callable[[Recorded], Any]


class FakeService:
    """Base of a fake: records every request and answers scripted replies before its own.

    Subclasses build `app()` from `endpoint(...)` handlers and say how the service checks keys
    (`key_header` / `key_value`, or `authorized`) and how it words errors (`error`).
    """

    #: The header that must carry `key_value` on every request; None for a service without keys.
    key_header: str | None = None
    key_value: str = ""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._queued: dict[str | None, list[Reply]] = {}
        self.base_url = ""

    # -- for tests ---------------------------------------------------------------------------
    def script(self, *replies: Reply, route: str | None = None) -> None:
        """Answer the next requests to `route` (any route when None) with `replies`, in order.

        A scripted reply is used only for requests that pass the key and request checks: a fake
        that answered a malformed request with success would hide provider bugs.
        """
        self._queued.setdefault(route, []).extend(replies)

    def requests_to(self, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.path == path]

    # -- for subclasses ----------------------------------------------------------------------
    def app(self) -> web.Application:
        raise NotImplementedError

    def authorized(self, recorded: Recorded) -> bool:
        return self.key_header is None or recorded.headers.get(self.key_header) == self.key_value

    def error(self, status: int, message: str) -> web.StreamResponse:
        """The service's error answer (401 for a bad key, 400 for a bad request)."""
        return web.json_response({"error": message}, status=status)

    def endpoint(
        self,
        route: str,
        answer: Answer,
        *,
        fields: set[str] | None = None,
        validate: Check | None = None,
        authorized: Callable[[Recorded], bool] | None = None,
    ) -> Handler:
        """A handler that records, checks the key (401), then the request (400), then answers.

        `fields` are the only ones the JSON body may carry (the real APIs reject typos);
        `validate` returns what is wrong with the request, if anything. `answer` returns a
        response or a JSON-able body; a reply scripted for `route` wins over it.
        """
        is_authorized = authorized or self.authorized

        async def handler(request: web.Request) -> web.StreamResponse:
            recorded = await self._record(request)
            if not is_authorized(recorded):
                return self.error(401, "missing or invalid API key")
            problem = (unknown_fields(recorded.body, fields) if fields is not None else None) or (
                validate(recorded) if validate else None
            )
            if problem:
                return self.error(400, problem)
            scripted = self._next_scripted(route)
            if scripted is not None:
                if scripted.delay:
                    await asyncio.sleep(scripted.delay)
                return scripted.response()
            result = answer(recorded)
            return result if isinstance(result, web.StreamResponse) else web.json_response(result)

        return handler

    async def _record(self, request: web.Request) -> Recorded:
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

    def _next_scripted(self, route: str) -> Reply | None:
        for key in (route, None):
            queue = self._queued.get(key)
            if queue:
                return queue.pop(0)
        return None


def unknown_fields(body: Any, allowed: set[str]) -> str | None:
    """The body must be a JSON object with only known fields (the real APIs reject typos)."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    unknown = set(body) - allowed
    return f"unknown fields: {sorted(unknown)}" if unknown else None


FakeT = TypeVar("FakeT", bound=FakeService)


async def serve(fake: FakeT, aiohttp_server: Any, prefix: str = "") -> FakeT:
    """Start `fake.app()` on 127.0.0.1 and set `fake.base_url` (the server's URL + `prefix`)."""
    server = await aiohttp_server(fake.app())
    fake.base_url = str(server.make_url(prefix)).rstrip("/")
    return fake
