"""A fake Exa API on 127.0.0.1: POST /search and /contents with an `x-api-key` header.

Checks requests as Exa does (key header, camelCase fields, required `query` / `urls`) and
answers errors as `{"requestId", "error", "tag"}`. /contents reports per-URL failures in
`statuses` inside a 200, like the real service.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from tests.fakes.http_api import FakeService, endpoint, json_error, unknown_fields

API_KEY = "exa-test-key"
SEARCH_TYPES = {"auto", "neural", "keyword", "fast", "instant", "deep", "deep-lite", "deep-reasoning"}

SEARCH_FIELDS = {
    "query",
    "numResults",
    "type",
    "category",
    "includeDomains",
    "excludeDomains",
    "startPublishedDate",
    "endPublishedDate",
    "startCrawlDate",
    "endCrawlDate",
    "includeText",
    "excludeText",
    "contents",
    "userLocation",
    "moderation",
}
CONTENTS_FIELDS = {
    "urls",
    "ids",
    "text",
    "highlights",
    "summary",
    "livecrawl",
    "livecrawlTimeout",
    "subpages",
    "subpageTarget",
    "extras",
    "context",
    "maxAgeHours",
}


def _error(status: int, message: str) -> web.Response:
    tag = "INVALID_API_KEY" if status == 401 else "INVALID_REQUEST_BODY"
    return json_error(status, {"requestId": "req_fake", "error": message, "tag": tag})


class ExaFake(FakeService):
    def __init__(self) -> None:
        super().__init__()
        self.search_results: list[dict[str, Any]] = [
            {
                "id": "https://example.com/one",
                "url": "https://example.com/one",
                "title": "Result one",
                "publishedDate": "2026-02-01T00:00:00.000Z",
                "author": "Ada",
                "text": "Opening text of the first page.",
                "highlights": ["A relevant passage.", "Another passage."],
                "highlightScores": [0.5, 0.4],
            },
            {
                "id": "https://example.com/two",
                "url": "https://example.com/two",
                "title": "Result two",
                "publishedDate": None,
                "author": None,
                "text": "Only text here.",
            },
        ]
        self.failing_urls: dict[str, tuple[str, int]] = {}

    def app(self) -> web.Application:
        app = web.Application()
        authorized = lambda r: r.headers.get("x-api-key") == API_KEY  # noqa: E731
        app.router.add_post(
            "/search",
            endpoint(
                self,
                "search",
                authorized=authorized,
                validate=lambda r: unknown_fields(r.body, SEARCH_FIELDS) or self._check_search(r.body),
                answer=lambda r: self._search(r.body),
                error=_error,
            ),
        )
        app.router.add_post(
            "/contents",
            endpoint(
                self,
                "contents",
                authorized=authorized,
                validate=lambda r: unknown_fields(r.body, CONTENTS_FIELDS) or self._check_contents(r.body),
                answer=lambda r: self._contents(r.body),
                error=_error,
            ),
        )
        return app

    @staticmethod
    def _check_search(body: dict[str, Any]) -> str | None:
        if not isinstance(body.get("query"), str) or not body["query"]:
            return "query is required"
        num = body.get("numResults", 10)
        if not isinstance(num, int) or not 1 <= num <= 100:
            return "numResults must be between 1 and 100"
        if body.get("type", "auto") not in SEARCH_TYPES:
            return "invalid type"
        contents = body.get("contents", {})
        if not isinstance(contents, dict):
            return "contents must be an object"
        return None

    @staticmethod
    def _check_contents(body: dict[str, Any]) -> str | None:
        urls = body.get("urls")
        if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
            return "urls must be a non-empty list of strings"
        if "text" in body and not isinstance(body["text"], bool | dict):
            return "text must be a boolean or an object"
        return None

    def _search(self, body: dict[str, Any]) -> dict[str, Any]:
        results = self.search_results[: body.get("numResults", 10)]
        return {"requestId": "req_1", "resolvedSearchType": "neural", "results": results, "costDollars": {}}

    def _contents(self, body: dict[str, Any]) -> dict[str, Any]:
        results = []
        statuses = []
        for url in body["urls"]:
            if url in self.failing_urls:
                tag, code = self.failing_urls[url]
                statuses.append({"id": url, "status": "error", "error": {"tag": tag, "httpStatusCode": code}})
            else:
                results.append(
                    {
                        "id": url,
                        "url": url,
                        "title": f"Title of {url}",
                        "text": f"Full text of {url}",
                        "publishedDate": "2025-12-24T00:00:00.000Z",
                        "author": "Grace",
                    }
                )
                statuses.append({"id": url, "status": "success"})
        return {"requestId": "req_2", "results": results, "statuses": statuses}


@pytest.fixture
async def exa_fake(aiohttp_server: Any) -> AsyncIterator[ExaFake]:
    fake = ExaFake()
    server = await aiohttp_server(fake.app())
    fake.base_url = str(server.make_url("")).rstrip("/")
    yield fake
