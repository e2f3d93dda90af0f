"""A fake Exa API on 127.0.0.1: POST /search and /contents with an `x-api-key` header.

Checks requests as Exa does (key header, camelCase fields, required `query` / `urls`) and
answers errors as `{"requestId", "error", "tag"}`. /contents reports per-URL failures in
`statuses` inside a 200, like the real service.

Follows Exa's API reference (docs.exa.ai, "Search", "Get contents", "Error codes") and exa-py
2.28.0: errors carry a `tag` (401 INVALID_API_KEY, 402 NO_MORE_CREDITS, 429 RATE_LIMIT_EXCEEDED);
/contents answers each URL in `statuses[{id, status, error{tag, httpStatusCode}}]`.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from tests.fakes.scripted import FakeService, Recorded, serve

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


class ExaFake(FakeService):
    key_header = "x-api-key"
    key_value = API_KEY

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
        app.router.add_post(
            "/search", self.endpoint("search", self._search, fields=SEARCH_FIELDS, validate=self._check_search)
        )
        app.router.add_post(
            "/contents",
            self.endpoint("contents", self._contents, fields=CONTENTS_FIELDS, validate=self._check_contents),
        )
        return app

    def error(self, status: int, message: str) -> web.StreamResponse:
        tag = {401: "INVALID_API_KEY", 402: "NO_MORE_CREDITS", 429: "RATE_LIMIT_EXCEEDED"}.get(
            status, "INVALID_REQUEST_BODY")
        return web.json_response({"requestId": "req_fake", "error": message, "tag": tag}, status=status)

    @staticmethod
    def _check_search(recorded: Recorded) -> str | None:
        body = recorded.body
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
    def _check_contents(recorded: Recorded) -> str | None:
        body = recorded.body
        urls = body.get("urls")
        if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
            return "urls must be a non-empty list of strings"
        if "text" in body and not isinstance(body["text"], bool | dict):
            return "text must be a boolean or an object"
        return None

    def _search(self, recorded: Recorded) -> dict[str, Any]:
        body = recorded.body
        results = self.search_results[: body.get("numResults", 10)]
        return {"requestId": "req_1", "resolvedSearchType": "neural", "results": results, "costDollars": {}}

    def _contents(self, recorded: Recorded) -> dict[str, Any]:
        body = recorded.body
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
async def exa_fake(aiohttp_server: Any) -> ExaFake:
    return await serve(ExaFake(), aiohttp_server)
