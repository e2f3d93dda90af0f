"""A fake Brave Search API: `GET /res/v1/web/search` with `X-Subscription-Token`.

Answers with Brave's `{"type": "search", "web": {"results": [...]}}` shape, and with its
`{"type": "ErrorResponse", "error": {...}}` body for a wrong token. Point BRAVE_SEARCH_API_URL at
`fake.url` (which ends in /res/v1). Import the fixture explicitly in the test module.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from tests.fakes.scripted import Reply, ScriptedService

VALID_TOKEN = "BSA-test-token"


def brave_error(status: int, code: str, detail: str, **meta: Any) -> dict[str, Any]:
    return {
        "type": "ErrorResponse",
        "error": {"id": "00000000-0000-0000-0000-000000000000", "status": status, "code": code,
                  "detail": detail, "meta": meta},
        "time": 1700000000,
    }


class FakeBrave(ScriptedService):
    def __init__(self) -> None:
        super().__init__()
        self.result_count = 10

    def default(self, request: web.Request) -> Reply:
        if request.headers.get("X-Subscription-Token") != VALID_TOKEN:
            detail = "The provided subscription token is invalid."
            return Reply(401, brave_error(401, "SUBSCRIPTION_TOKEN_INVALID", detail))
        query = request.query.get("q", "")
        count = int(request.query.get("count", "20"))
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
        return Reply(200, {"type": "search", "query": {"original": query}, "web": web_part})


@pytest.fixture
async def brave_server(aiohttp_server: Any) -> FakeBrave:
    fake = FakeBrave()
    app = web.Application()
    app.router.add_get("/res/v1/web/search", fake.reply)
    server = await aiohttp_server(app)
    fake.url = str(server.make_url("/res/v1"))
    return fake
