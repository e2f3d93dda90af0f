"""A fake SearXNG instance: `GET /search?q=..&format=json` answered like SearXNG's JSON output.

Like a real instance, it answers 403 when the JSON format is disabled (`json_enabled = False`).
Import the fixture explicitly: `from tests.fakes.searxng import searxng_server  # noqa: F401`.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from tests.fakes.scripted import FakeService, Recorded, serve


def searxng_result(n: int, query: str = "") -> dict[str, Any]:
    return {
        "url": f"https://example.org/{n}",
        "title": f"Result {n} for {query}",
        "content": f"Snippet {n}",
        "engine": "duckduckgo",
        "engines": ["duckduckgo"],
        "score": 1.0 / n,
        "category": "general",
    }


class FakeSearxng(FakeService):
    def __init__(self) -> None:
        super().__init__()
        self.json_enabled = True
        self.result_count = 8
        self.unresponsive_engines: list[list[str]] = []
        # The GET /search handler, public because bench/soak.py mounts it on an app of its own.
        self.reply = self.endpoint("search", self._search)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/search", self.reply)
        return app

    def _search(self, recorded: Recorded) -> web.StreamResponse | dict[str, Any]:
        if recorded.query.get("format") != "json" or not self.json_enabled:
            return web.Response(status=403, text="<html><body>403 Forbidden</body></html>", content_type="text/html")
        query = recorded.query.get("q", "")
        return {
            "query": query,
            "number_of_results": 0,
            "results": [searxng_result(n, query) for n in range(1, self.result_count + 1)],
            "answers": [],
            "corrections": [],
            "infoboxes": [],
            "suggestions": [],
            "unresponsive_engines": self.unresponsive_engines,
        }


@pytest.fixture
async def searxng_server(aiohttp_server: Any) -> FakeSearxng:
    return await serve(FakeSearxng(), aiohttp_server)
