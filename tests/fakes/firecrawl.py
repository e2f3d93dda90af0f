"""A fake Firecrawl v2 API on 127.0.0.1: /v2/search, /v2/scrape, /v2/crawl and crawl polling.

Checks requests as Firecrawl does (bearer key unless running as a keyless self-hosted instance,
JSON bodies with known fields and ranges) and answers errors as `{"success": false, "error"}`.
Crawl jobs report `scraping` for `polls_before_done` polls, then `completed` with their pages;
`page_size` splits the finished job's pages across `next` links like the real pagination.

Follows Firecrawl's v2 API reference (docs.firecrawl.dev, "Search", "Scrape", "Crawl", "Errors")
and firecrawl-py 4.55.0 (v2 client): search `query` at most 500 characters, `limit` 1-100, no
domain-filter field; errors `{"success": false, "error"}` with 402 for spent credits, 429 for the
rate limit (`error_reply()` gives both as the service words them).
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from tests.fakes.scripted import FakeService, Recorded, Reply, serve

API_KEY = "fc-test-key"

SEARCH_FIELDS = {
    "query",
    "limit",
    "sources",
    "categories",
    "tbs",
    "location",
    "timeout",
    "ignoreInvalidURLs",
    "scrapeOptions",
}
SCRAPE_FIELDS = {
    "url",
    "formats",
    "onlyMainContent",
    "includeTags",
    "excludeTags",
    "maxAge",
    "headers",
    "waitFor",
    "mobile",
    "skipTlsVerification",
    "timeout",
    "parsers",
    "actions",
    "location",
    "removeBase64Images",
    "blockAds",
    "proxy",
    "storeInCache",
}
CRAWL_FIELDS = {
    "url",
    "prompt",
    "excludePaths",
    "includePaths",
    "maxDiscoveryDepth",
    "sitemap",
    "ignoreQueryParameters",
    "limit",
    "crawlEntireDomain",
    "allowExternalLinks",
    "allowSubdomains",
    "delay",
    "maxConcurrency",
    "webhook",
    "scrapeOptions",
    "zeroDataRetention",
}


def _is_http_url(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(("http://", "https://"))


ERRORS = {
    402: "Insufficient credits to perform this request. For more credits, you can upgrade your plan at "
         "https://firecrawl.dev/pricing.",
    429: "Rate limit exceeded. Consumed (req/min): 11, Remaining (req/min): 0. Upgrade your plan at "
         "https://firecrawl.dev/pricing for increased rate limits or please retry after 49s, resets at "
         "Tue Dec 01 2026 22:00:00 GMT+0000 (Coordinated Universal Time)",
}


def error_reply(status: int, **headers: str) -> Reply:
    return Reply(status, {"success": False, "error": ERRORS[status]}, headers=headers)


class FirecrawlFake(FakeService):
    def __init__(self) -> None:
        super().__init__()
        self.require_auth = True
        self.search_results: list[dict[str, Any]] = [
            {"url": "https://example.com/one", "title": "Result one", "description": "First.", "position": 1},
            {
                "url": "https://example.com/two",
                "title": "Result two",
                "description": "Second.",
                "position": 2,
            },
        ]
        self.page_status: dict[str, int] = {}
        self.polls_before_done = 1
        self.scraped_while_running = 1
        self.crawl_error: str | None = None  # set to make finished jobs report "failed"
        self.crawl_page_count = 3
        self.page_size = 100
        self.jobs: dict[str, dict[str, Any]] = {}
        self.cancelled: list[str] = []

    def authorized(self, recorded: Recorded) -> bool:
        if not self.require_auth:
            return True
        return recorded.headers.get("Authorization") == f"Bearer {API_KEY}"

    def app(self) -> web.Application:
        app = web.Application()
        post = app.router.add_post
        post("/v2/search", self.endpoint("search", self._search, fields=SEARCH_FIELDS, validate=self._check_search))
        post("/v2/scrape", self.endpoint("scrape", self._scrape, fields=SCRAPE_FIELDS, validate=self._check_scrape))
        post("/v2/crawl", self.endpoint("crawl", self._start_crawl, fields=CRAWL_FIELDS, validate=self._check_crawl))
        app.router.add_get("/v2/crawl/{id}", self.endpoint("crawl_status", self._crawl_status))
        app.router.add_delete("/v2/crawl/{id}", self.endpoint("crawl_cancel", self._cancel))
        return app

    def error(self, status: int, message: str) -> web.StreamResponse:
        return web.json_response({"success": False, "error": message}, status=status)

    @staticmethod
    def _check_search(recorded: Recorded) -> str | None:
        body = recorded.body
        query = body.get("query")
        if not isinstance(query, str) or not query or len(query) > 500:
            return "query must be a string of 1 to 500 characters"
        limit = body.get("limit", 5)
        if not isinstance(limit, int) or not 1 <= limit <= 100:
            return "limit must be between 1 and 100"
        return None

    @staticmethod
    def _check_scrape(recorded: Recorded) -> str | None:
        body = recorded.body
        if not _is_http_url(body.get("url")):
            return "url must be an http(s) URL"
        formats = body.get("formats", ["markdown"])
        if not isinstance(formats, list) or not formats:
            return "formats must be a non-empty list"
        return None

    @staticmethod
    def _check_crawl(recorded: Recorded) -> str | None:
        body = recorded.body
        if not _is_http_url(body.get("url")):
            return "url must be an http(s) URL"
        limit = body.get("limit", 10000)
        if not isinstance(limit, int) or limit < 1:
            return "limit must be a positive integer"
        options = body.get("scrapeOptions", {})
        if not isinstance(options, dict) or set(options) - SCRAPE_FIELDS:
            return "invalid scrapeOptions"
        return None

    def _search(self, recorded: Recorded) -> dict[str, Any]:
        return {"success": True, "data": {"web": self.search_results[: recorded.body.get("limit", 5)]}}

    def _document(self, url: str) -> dict[str, Any]:
        status = self.page_status.get(url, 200)
        return {
            "markdown": f"# {url}\n\nBody of {url}" if status < 400 else "",
            "metadata": {
                "title": f"Title of {url}",
                "description": "A page.",
                "language": "en",
                "sourceURL": url,
                "statusCode": status,
            },
        }

    def _scrape(self, recorded: Recorded) -> dict[str, Any]:
        return {"success": True, "data": self._document(recorded.body["url"])}

    def _start_crawl(self, recorded: Recorded) -> dict[str, Any]:
        job_id = f"0000000{len(self.jobs) + 1}-aaaa-bbbb-cccc-dddddddddddd"
        root = recorded.body["url"].rstrip("/")
        count = min(self.crawl_page_count, recorded.body.get("limit", 10000))
        self.jobs[job_id] = {"pages": [f"{root}/p{i}" for i in range(1, count + 1)], "polls": 0}
        return {"success": True, "id": job_id, "url": f"{self.base_url}/v2/crawl/{job_id}"}

    def _crawl_status(self, recorded: Recorded) -> web.StreamResponse:
        job_id = recorded.path.rsplit("/", 1)[-1]
        job = self.jobs.get(job_id)
        if job is None:
            return self.error(404, "Job not found")
        job["polls"] += 1
        pages = job["pages"]
        if self.crawl_error is not None:
            return web.json_response(
                {"status": "failed", "total": 0, "completed": 0, "data": [], "error": self.crawl_error}
            )
        if job["polls"] <= self.polls_before_done:
            done = pages[: self.scraped_while_running]
            return web.json_response(
                {
                    "status": "scraping",
                    "total": len(pages),
                    "completed": len(done),
                    "creditsUsed": len(done),
                    "expiresAt": "2026-12-01T00:00:00Z",
                    "data": [self._document(u) for u in done],
                }
            )
        skip = int(recorded.query.get("skip", "0"))
        chunk = pages[skip : skip + self.page_size]
        following = skip + self.page_size
        next_url = f"{self.base_url}/v2/crawl/{job_id}?skip={following}" if following < len(pages) else None
        return web.json_response(
            {
                "status": "completed",
                "total": len(pages),
                "completed": len(pages),
                "creditsUsed": len(pages),
                "expiresAt": "2026-12-01T00:00:00Z",
                "next": next_url,
                "data": [self._document(u) for u in chunk],
            }
        )

    def _cancel(self, recorded: Recorded) -> dict[str, Any]:
        self.cancelled.append(recorded.path.rsplit("/", 1)[-1])
        return {"status": "cancelled"}


@pytest.fixture
async def firecrawl_fake(aiohttp_server: Any) -> FirecrawlFake:
    return await serve(FirecrawlFake(), aiohttp_server)
