"""A fake Perplexity Search API on 127.0.0.1: POST /search with `Authorization: Bearer`.

Checks the request as Perplexity does (`query` string or list, `max_results` 1-20, known
fields) and answers errors OpenAI-style as `{"error": {"message", "type", "code"}}`.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from tests.fakes.scripted import FakeService, Recorded, serve

API_KEY = "pplx-test-key"

SEARCH_FIELDS = {
    "query",
    "max_results",
    "max_tokens",
    "max_tokens_per_page",
    "search_domain_filter",
    "search_recency_filter",
    "search_after_date_filter",
    "search_before_date_filter",
    "country",
    "search_language_filter",
    "last_updated_after_filter",
    "last_updated_before_filter",
}


class PerplexityFake(FakeService):
    key_header = "Authorization"
    key_value = f"Bearer {API_KEY}"

    def __init__(self) -> None:
        super().__init__()
        self.search_results: list[dict[str, Any]] = [
            {
                "title": "Result one",
                "url": "https://example.com/one",
                "snippet": "First snippet.",
                "date": "2026-04-01",
                "last_updated": "2026-04-02",
            },
            {
                "title": "Result two",
                "url": "https://example.com/two",
                "snippet": "Second snippet.",
                "date": None,
            },
        ]

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post(
            "/search", self.endpoint("search", self._search, fields=SEARCH_FIELDS, validate=self._check)
        )
        return app

    def error(self, status: int, message: str) -> web.StreamResponse:
        kind = "authentication_error" if status == 401 else "invalid_request_error"
        return web.json_response({"error": {"message": message, "type": kind, "code": status}}, status=status)

    @staticmethod
    def _check(recorded: Recorded) -> str | None:
        body = recorded.body
        query = body.get("query")
        if not (isinstance(query, str) and query) and not (isinstance(query, list) and query):
            return "query must be a non-empty string or list of strings"
        max_results = body.get("max_results", 10)
        if not isinstance(max_results, int) or not 1 <= max_results <= 20:
            return "max_results must be between 1 and 20"
        return None

    def _search(self, recorded: Recorded) -> dict[str, Any]:
        return {"id": "search-fake", "results": self.search_results[: recorded.body.get("max_results", 10)]}


@pytest.fixture
async def perplexity_fake(aiohttp_server: Any) -> PerplexityFake:
    return await serve(PerplexityFake(), aiohttp_server)
