"""A fake Parallel API on 127.0.0.1: POST /v1/search and /v1/extract with `x-api-key`.

Checks requests as Parallel's V1 API does (required `search_queries`, at most 5 of at most 200
characters, no unknown fields, `advanced_settings` shape; extract takes at most 20 `urls`) and
answers errors as `{"type": "error", "error": {"ref_id", "message"}}`.

Follows Parallel's API reference (docs.parallel.ai, "Search API" and "Extract API") and
parallel-web 1.3.7: `max_results` and `full_content` go inside `advanced_settings` (elsewhere: 422),
and `advanced_settings.source_policy.include_domains` keeps results to those domains (and their
subdomains), as the service applies it.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from tests.fakes.scripted import FakeService, Recorded, serve

API_KEY = "par-test-key"

SEARCH_FIELDS = {
    "search_queries",
    "objective",
    "mode",
    "max_chars_total",
    "session_id",
    "client_model",
    "advanced_settings",
}
SEARCH_ADVANCED = {"source_policy", "fetch_policy", "excerpt_settings", "location", "max_results"}
EXTRACT_FIELDS = {
    "urls",
    "objective",
    "search_queries",
    "max_chars_total",
    "session_id",
    "client_model",
    "advanced_settings",
}
EXTRACT_ADVANCED = {"fetch_policy", "excerpt_settings", "full_content"}


def _check_advanced(body: dict[str, Any], allowed: set[str]) -> str | None:
    settings = body.get("advanced_settings", {})
    if settings is None:
        return None
    if not isinstance(settings, dict) or set(settings) - allowed:
        return "invalid advanced_settings"
    policy = settings.get("source_policy")
    if policy is not None:
        domains = policy.get("include_domains", []) if isinstance(policy, dict) else None
        if not isinstance(domains, list) or not all(isinstance(d, str) and d for d in domains):
            return "source_policy.include_domains must be a list of domains"
    return None


def _on(url: str, domains: list[str]) -> bool:
    host = url.split("://", 1)[-1].split("/", 1)[0].lower()
    return any(host == d or host.endswith("." + d) for d in domains)


class ParallelFake(FakeService):
    key_header = "x-api-key"
    key_value = API_KEY

    def __init__(self) -> None:
        super().__init__()
        self.search_results: list[dict[str, Any]] = [
            {
                "url": "https://example.com/one",
                "title": "Result one",
                "publish_date": "2026-01-15",
                "excerpts": ["First excerpt.", "Second excerpt."],
            },
            {
                "url": "https://example.com/two",
                "title": None,
                "publish_date": None,
                "excerpts": ["Only one."],
            },
        ]
        self.failing_urls: dict[str, int] = {}

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post(
            "/v1/search", self.endpoint("search", self._search, fields=SEARCH_FIELDS, validate=self._check_search)
        )
        app.router.add_post(
            "/v1/extract", self.endpoint("extract", self._extract, fields=EXTRACT_FIELDS, validate=self._check_extract)
        )
        return app

    def error(self, status: int, message: str) -> web.StreamResponse:
        error = {"ref_id": "ref_fake", "message": message}
        return web.json_response({"type": "error", "error": error}, status=status)

    @staticmethod
    def _check_search(recorded: Recorded) -> str | None:
        body = recorded.body
        problem = _check_advanced(body, SEARCH_ADVANCED)
        if problem:
            return problem
        queries = body.get("search_queries")
        if not isinstance(queries, list) or not 1 <= len(queries) <= 5:
            return "search_queries is required (1 to 5 queries)"
        if not all(isinstance(q, str) and 0 < len(q) <= 200 for q in queries):
            return "each search query must be 1 to 200 characters"
        if body.get("mode", "advanced") not in ("turbo", "fast", "basic", "advanced"):
            return "invalid mode"
        objective = body.get("objective")
        if objective is not None and (not isinstance(objective, str) or len(objective) > 5000):
            return "objective must be at most 5000 characters"
        return None

    @staticmethod
    def _check_extract(recorded: Recorded) -> str | None:
        body = recorded.body
        problem = _check_advanced(body, EXTRACT_ADVANCED)
        if problem:
            return problem
        urls = body.get("urls")
        if not isinstance(urls, list) or not 1 <= len(urls) <= 20 or not all(isinstance(u, str) for u in urls):
            return "urls is required (1 to 20 URLs)"
        return None

    def _search(self, recorded: Recorded) -> dict[str, Any]:
        settings = recorded.body.get("advanced_settings") or {}
        limit = settings.get("max_results", 10)
        domains = (settings.get("source_policy") or {}).get("include_domains") or []
        results = [r for r in self.search_results if not domains or _on(r["url"], domains)]
        return {
            "search_id": "search_fake",
            "results": results[:limit],
            "warnings": None,
            "usage": [{"name": "sku_search", "count": 1}],
        }

    def _extract(self, recorded: Recorded) -> dict[str, Any]:
        full = bool((recorded.body.get("advanced_settings") or {}).get("full_content"))
        results, errors = [], []
        for url in recorded.body["urls"]:
            if url in self.failing_urls:
                code = self.failing_urls[url]
                errors.append(
                    {
                        "url": url,
                        "error_type": "fetch_error",
                        "http_status_code": code,
                        "content": f"Error fetching content from {url}",
                    }
                )
                continue
            item: dict[str, Any] = {
                "url": url,
                "title": f"Title of {url}",
                "publish_date": "2025-11-02",
                "excerpts": [f"Excerpt of {url}"],
            }
            if full:
                item["full_content"] = f"# Full\n\nFull content of {url}"
            results.append(item)
        return {"extract_id": "extract_fake", "results": results, "errors": errors, "warnings": None}


@pytest.fixture
async def parallel_fake(aiohttp_server: Any) -> ParallelFake:
    return await serve(ParallelFake(), aiohttp_server)
