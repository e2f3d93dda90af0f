"""A fake Keenable API on 127.0.0.1: keyed and keyless search and fetch.

Keyed: `POST /v1/search`, `GET /v1/fetch?url=` with `X-API-Key`. Keyless: the same paths
under `/public`, which require an `X-Keenable-Title` header naming the caller and refuse a key.
Fetch serves only "indexed" pages: anything in `unindexed` answers 404 like the real service.

Follows Keenable's REST reference (docs.keenable.ai/api-reference, "Search" and "Fetch": fetch takes
`url` and `max_chars`, and "only URLs that Keenable indexes are supported") and the keenable 0.1.1
SDK (search `site` restricts to one domain, `mode`, the date filters; `max_results` 1-50 is
accepted but documented nowhere in the reference, so nothing relies on it being honoured).
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from tests.fakes.scripted import FakeService, Recorded, serve, unknown_fields

API_KEY = "keen_test_key"

SEARCH_FIELDS = {
    "query",
    "max_results",
    "mode",
    "site",
    "published_after",
    "published_before",
    "acquired_after",
    "acquired_before",
    "snippet_max_length",
}


def _on_site(url: str, site: str) -> bool:
    host = url.split("://", 1)[-1].split("/", 1)[0].lower()
    return host == site or host.endswith("." + site)


class KeenableFake(FakeService):
    def __init__(self) -> None:
        super().__init__()
        self.search_results: list[dict[str, Any]] = [
            {
                "title": "Result one",
                "url": "https://example.com/one",
                "description": "",
                "snippet": "Page text of the first result.",
                "published_at": "2026-05-05T08:00:00Z",
            },
            {
                "title": "Result two",
                "url": "https://example.com/two",
                "description": "A summary.",
                "snippet": "",
            },
        ]
        self.unindexed: set[str] = set()

    def app(self) -> web.Application:
        app = web.Application()
        keyed = lambda r: r.headers.get("X-API-Key") == API_KEY  # noqa: E731
        public = lambda r: "X-API-Key" not in r.headers  # noqa: E731
        for suffix, authorized in (("", keyed), ("/public", public)):
            search = self.endpoint("search", self._search, validate=self._check_search, authorized=authorized)
            fetch = self.endpoint("fetch", self._fetch, validate=self._check_fetch, authorized=authorized)
            app.router.add_post(f"/v1/search{suffix}", search)
            app.router.add_get(f"/v1/fetch{suffix}", fetch)
        return app

    def error(self, status: int, message: str) -> web.StreamResponse:
        kind = "Unauthorized" if status == 401 else "Bad Request"
        return web.json_response({"error": kind, "message": message}, status=status)

    @staticmethod
    def _check_title(recorded: Recorded) -> str | None:
        if recorded.path.endswith("/public") and not recorded.headers.get("X-Keenable-Title"):
            return "the X-Keenable-Title header is required on public endpoints"
        return None

    def _check_search(self, recorded: Recorded) -> str | None:
        body = recorded.body
        problem = self._check_title(recorded) or unknown_fields(body, SEARCH_FIELDS)
        if problem:
            return problem
        if not isinstance(body.get("query"), str) or not body["query"]:
            return "query is required"
        max_results = body.get("max_results", 10)
        if not isinstance(max_results, int) or not 1 <= max_results <= 50:
            return "max_results must be between 1 and 50"
        return None

    def _check_fetch(self, recorded: Recorded) -> str | None:
        problem = self._check_title(recorded)
        if problem:
            return problem
        if not recorded.query.get("url", "").startswith(("http://", "https://")):
            return "url query parameter is required"
        if "max_chars" in recorded.query and not recorded.query["max_chars"].isdigit():
            return "max_chars must be an integer"
        return None

    def _search(self, recorded: Recorded) -> dict[str, Any]:
        site = recorded.body.get("site")
        results = [r for r in self.search_results if not site or _on_site(r["url"], site)]
        return {"query": recorded.body["query"], "results": results[: recorded.body.get("max_results", 10)]}

    def _fetch(self, recorded: Recorded) -> web.StreamResponse | dict[str, Any]:
        url = recorded.query["url"]
        if url in self.unindexed:
            return web.json_response({"error": "Not Found", "message": "Document is not indexed"}, status=404)
        return {
            "url": url,
            "title": f"Title of {url}",
            "description": "Short summary.",
            "author": "Jane Doe",
            "published_at": 1768435200,
            "content": f"# Title\n\nMarkdown of {url}",
        }


@pytest.fixture
async def keenable_fake(aiohttp_server: Any) -> KeenableFake:
    return await serve(KeenableFake(), aiohttp_server)
