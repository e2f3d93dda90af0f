"""A fake Brave Search API: `GET /res/v1/web/search` with `X-Subscription-Token`.

Answers with Brave's `{"type": "search", "web": {"results": [...]}}` shape, and with its
`{"type": "ErrorResponse", "error": {...}}` body for a wrong token. Point BRAVE_SEARCH_API_URL at
`fake.base_url` (which ends in /res/v1). Import the fixture explicitly in the test module.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from tests.fakes.scripted import FakeService, Recorded, serve

VALID_TOKEN = "BSA-test-token"


def brave_error(status: int, code: str, detail: str, **meta: Any) -> dict[str, Any]:
    return {
        "type": "ErrorResponse",
        "error": {"id": "00000000-0000-0000-0000-000000000000", "status": status, "code": code,
                  "detail": detail, "meta": meta},
        "time": 1700000000,
    }


class FakeBrave(FakeService):
    key_header = "X-Subscription-Token"
    key_value = VALID_TOKEN

    def __init__(self) -> None:
        super().__init__()
        self.result_count = 10

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/res/v1/web/search", self.endpoint("search", self._search))
        return app

    def error(self, status: int, message: str) -> web.StreamResponse:
        if status == 401:
            detail = "The provided subscription token is invalid."
            return web.json_response(brave_error(401, "SUBSCRIPTION_TOKEN_INVALID", detail), status=401)
        return web.json_response(brave_error(status, "VALIDATION", message), status=status)

    def _search(self, recorded: Recorded) -> dict[str, Any]:
        query = recorded.query.get("q", "")
        count = int(recorded.query.get("count", "20"))
        results = [
            {
                "type": "search_result",
                "title": f"<strong>{query}</strong> result {n}",
                "url": f"https://brave.example/{n}",
                "description": f"About <strong>{query}</strong> &amp; more, number {n}",
                "age": "2 days ago",
                "language": "en",
            }
            for n in range(1, min(count, self.result_count) + 1)
        ]
        web_part = {"type": "search", "results": results}
        return {"type": "search", "query": {"original": query}, "web": web_part}


@pytest.fixture
async def brave_server(aiohttp_server: Any) -> FakeBrave:
    return await serve(FakeBrave(), aiohttp_server, "/res/v1")
