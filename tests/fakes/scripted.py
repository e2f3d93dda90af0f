"""Shared machinery of the fake web services: recorded requests and scripted replies."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Reply:
    """One scripted answer: a status with a JSON (or raw text) body, extra headers, an optional delay."""

    status: int = 200
    json_body: Any = None
    text: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    content_type: str = "text/plain"  # for `text` bodies

    def response(self) -> web.Response:
        if self.text is not None:
            return web.Response(status=self.status, text=self.text, headers=self.headers,
                                content_type=self.content_type)
        return web.json_response(self.json_body, status=self.status, headers=self.headers)


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]


class ScriptedService:
    """Base of a fake: records every request; `script(...)` queues replies used before the default."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.queue: list[Reply] = []
        self.url = ""

    def script(self, *replies: Reply) -> None:
        self.queue.extend(replies)

    def record(self, request: web.Request) -> None:
        recorded = Recorded(request.method, request.path, dict(request.query), dict(request.headers))
        self.requests.append(recorded)

    async def reply(self, request: web.Request) -> web.StreamResponse:
        self.record(request)
        scripted = self.queue.pop(0) if self.queue else self.default(request)
        if scripted.delay:
            await asyncio.sleep(scripted.delay)
        return scripted.response()

    def default(self, request: web.Request) -> Reply:
        raise NotImplementedError
