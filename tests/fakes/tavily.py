"""A fake Tavily API on 127.0.0.1: POST /search, /extract, /crawl with `Authorization: Bearer`.

It checks requests as Tavily does (bearer key, JSON body, known fields and their ranges) and
answers 401/400 in Tavily's `{"detail": {"error": ...}}` shape when they are wrong.

Follows Tavily's API reference (docs.tavily.com, "Search", "Extract", "Crawl" and "Errors") and
tavily-python 0.8.5: search `country` is one of the lowercase English names the reference lists
(general topic only; "hong kong" is not one), `max_results` 0-20, extract at most 20 URLs, crawl
`timeout` 10-150 s (default 150: the crawl answers after at most that long). `error_reply()` gives
the documented errors: 401 bad key, 432 plan limit, 433 pay-as-you-go limit, 429 rate limit.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from tests.fakes.scripted import FakeService, Recorded, Reply, serve

API_KEY = "tvly-test-key"
#: Tavily's country enum, as the API reference lists it.
COUNTRIES = frozenset({
    "afghanistan", "albania", "algeria", "andorra", "angola", "argentina", "armenia", "australia",
    "austria", "azerbaijan", "bahamas", "bahrain", "bangladesh", "barbados", "belarus", "belgium",
    "belize", "benin", "bhutan", "bolivia", "bosnia and herzegovina", "botswana", "brazil", "brunei",
    "bulgaria", "burkina faso", "burundi", "cambodia", "cameroon", "canada", "cape verde",
    "central african republic", "chad", "chile", "china", "colombia", "comoros", "congo",
    "costa rica", "croatia", "cuba", "cyprus", "czech republic", "denmark", "djibouti",
    "dominican republic", "ecuador", "egypt", "el salvador", "equatorial guinea", "eritrea",
    "estonia", "ethiopia", "fiji", "finland", "france", "gabon", "gambia", "georgia", "germany",
    "ghana", "greece", "guatemala", "guinea", "haiti", "honduras", "hungary", "iceland", "india",
    "indonesia", "iran", "iraq", "ireland", "israel", "italy", "jamaica", "japan", "jordan",
    "kazakhstan", "kenya", "kuwait", "kyrgyzstan", "latvia", "lebanon", "lesotho", "liberia", "libya",
    "liechtenstein", "lithuania", "luxembourg", "madagascar", "malawi", "malaysia", "maldives", "mali",
    "malta", "mauritania", "mauritius", "mexico", "moldova", "monaco", "mongolia", "montenegro",
    "morocco", "mozambique", "myanmar", "namibia", "nepal", "netherlands", "new zealand", "nicaragua",
    "niger", "nigeria", "north korea", "north macedonia", "norway", "oman", "pakistan", "panama",
    "papua new guinea", "paraguay", "peru", "philippines", "poland", "portugal", "qatar", "romania",
    "russia", "rwanda", "saudi arabia", "senegal", "serbia", "singapore", "slovakia", "slovenia",
    "somalia", "south africa", "south korea", "south sudan", "spain", "sri lanka", "sudan", "sweden",
    "switzerland", "syria", "taiwan", "tajikistan", "tanzania", "thailand", "togo",
    "trinidad and tobago", "tunisia", "turkey", "turkmenistan", "uganda", "ukraine",
    "united arab emirates", "united kingdom", "united states", "uruguay", "uzbekistan", "venezuela",
    "vietnam", "yemen", "zambia", "zimbabwe",
})
#: The errors Tavily's reference documents, with the sentences its API sends.
ERRORS = {
    401: "Unauthorized: missing or invalid API key.",
    429: "Your request has been blocked due to excessive requests. Please reduce rate of requests.",
    432: "This request exceeds your plan's set usage limit. Please upgrade your plan or contact support@tavily.com",
    433: "This request exceeds the pay-as-you-go limit. You can increase your limit on the Tavily dashboard.",
}


def error_reply(status: int, **headers: str) -> Reply:
    return Reply(status, {"detail": {"error": ERRORS[status]}}, headers=headers)

SEARCH_FIELDS = {
    "query",
    "max_results",
    "search_depth",
    "topic",
    "include_answer",
    "include_raw_content",
    "include_images",
    "include_domains",
    "exclude_domains",
    "time_range",
    "days",
    "country",
    "chunks_per_source",
    "start_date",
    "end_date",
    "auto_parameters",
    "include_favicon",
}
EXTRACT_FIELDS = {"urls", "extract_depth", "format", "include_images", "include_favicon", "timeout"}
CRAWL_FIELDS = {
    "url",
    "max_depth",
    "max_breadth",
    "limit",
    "instructions",
    "select_paths",
    "select_domains",
    "exclude_paths",
    "exclude_domains",
    "allow_external",
    "include_images",
    "extract_depth",
    "format",
    "include_favicon",
    "timeout",
    "categories",
}


class TavilyFake(FakeService):
    key_header = "Authorization"
    key_value = f"Bearer {API_KEY}"

    def __init__(self) -> None:
        super().__init__()
        self.search_results: list[dict[str, Any]] = [
            {
                "title": "Result one",
                "url": "https://example.com/one",
                "content": "First snippet.",
                "score": 0.9,
                "raw_content": None,
            },
            {
                "title": "Result two",
                "url": "https://example.com/two",
                "content": "Second snippet.",
                "score": 0.8,
                "raw_content": None,
                "published_date": "2026-03-01T10:00:00Z",
            },
        ]
        self.failing_urls: dict[str, str] = {}
        self.crawl_results: list[dict[str, Any]] | None = None

    def app(self) -> web.Application:
        app = web.Application()
        for route, fields, check, answer in (
            ("search", SEARCH_FIELDS, self._check_search, self._search),
            ("extract", EXTRACT_FIELDS, self._check_extract, self._extract),
            ("crawl", CRAWL_FIELDS, self._check_crawl, self._crawl),
        ):
            app.router.add_post(f"/{route}", self.endpoint(route, answer, fields=fields, validate=check))
        return app

    def error(self, status: int, message: str) -> web.StreamResponse:
        return web.json_response({"detail": {"error": message}}, status=status)

    @staticmethod
    def _check_search(recorded: Recorded) -> str | None:
        body = recorded.body
        if not isinstance(body.get("query"), str) or not body["query"]:
            return "query is required"
        max_results = body.get("max_results", 5)
        if not isinstance(max_results, int) or not 0 <= max_results <= 20:
            return "max_results must be between 0 and 20"
        if body.get("search_depth", "basic") not in ("basic", "advanced", "fast", "ultra-fast"):
            return "invalid search_depth"
        if body.get("topic", "general") not in ("general", "news", "finance"):
            return "invalid topic"
        country = body.get("country")
        if country is not None and (country not in COUNTRIES or body.get("topic", "general") != "general"):
            return f"Invalid country: {country!r}"
        return None

    @staticmethod
    def _check_extract(recorded: Recorded) -> str | None:
        body = recorded.body
        urls = body.get("urls")
        if isinstance(urls, str):
            urls = [urls]
        if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
            return "urls is required"
        if len(urls) > 20:
            return "Max 20 URLs are allowed."
        if body.get("extract_depth", "basic") not in ("basic", "advanced"):
            return "invalid extract_depth"
        if body.get("format", "markdown") not in ("markdown", "text"):
            return "invalid format"
        return None

    @staticmethod
    def _check_crawl(recorded: Recorded) -> str | None:
        body = recorded.body
        if not isinstance(body.get("url"), str) or not body["url"]:
            return "url is required"
        if not isinstance(body.get("limit", 50), int) or body.get("limit", 50) < 1:
            return "limit must be a positive integer"
        if not isinstance(body.get("max_depth", 1), int) or not 1 <= body.get("max_depth", 1) <= 5:
            return "max_depth must be between 1 and 5"
        timeout = body.get("timeout", 150)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 10 <= timeout <= 150:
            return "timeout must be between 10 and 150 seconds"
        return None

    def _search(self, recorded: Recorded) -> dict[str, Any]:
        body = recorded.body
        limit = body.get("max_results", 5)
        return {
            "query": body["query"],
            "answer": None,
            "images": [],
            "results": self.search_results[:limit],
            "response_time": 0.42,
        }

    def _extract(self, recorded: Recorded) -> dict[str, Any]:
        body = recorded.body
        urls = body["urls"] if isinstance(body["urls"], list) else [body["urls"]]
        results = [
            {"url": u, "raw_content": f"# Page\n\nContent of {u}", "images": []}
            for u in urls
            if u not in self.failing_urls
        ]
        failed = [{"url": u, "error": self.failing_urls[u]} for u in urls if u in self.failing_urls]
        return {"results": results, "failed_results": failed, "response_time": 0.1}

    def _crawl(self, recorded: Recorded) -> dict[str, Any]:
        body = recorded.body
        root = body["url"].rstrip("/")
        results = self.crawl_results
        if results is None:
            results = [{"url": f"{root}/page{i}", "raw_content": f"Page {i} text"} for i in range(1, 4)]
        return {"base_url": body["url"], "results": results[: body.get("limit", 50)], "response_time": 1.2}


@pytest.fixture
async def tavily_fake(aiohttp_server: Any) -> TavilyFake:
    return await serve(TavilyFake(), aiohttp_server)
