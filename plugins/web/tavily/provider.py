"""Tavily (https://docs.tavily.com): POST /search, /extract and /crawl with a Bearer key.

Errors come as `{"detail": {"error": "..."}}`; 401 is a bad key, 432/433 are plan and usage
limits, 429 is the rate limit. Extract reports unreadable URLs in `failed_results`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from providers.locales import country_name
from providers.payload import bounded, optional_list, require_list, search_hits, text
from providers.service import PageSet, ServiceProvider, batches
from providers.web import Envelope, extract_result, page

MAX_EXTRACT_URLS = 20  # Tavily's per-request cap on /extract
MAX_DOMAINS = 300  # Tavily's cap on include_domains


class TavilyProvider(ServiceProvider):
    name = "tavily"
    service = "Tavily"
    key_var = "TAVILY_API_KEY"
    url_var = "TAVILY_API_URL"
    default_url = "https://api.tavily.com"

    def __init__(self, env: Mapping[str, str], *, timeout: float = 30.0, crawl_timeout: float = 25.0) -> None:
        super().__init__(env, timeout=timeout)
        # Crawls run server-side for up to minutes; they get their own, longer read timeout.
        self._crawl_timeout = crawl_timeout

    def supports_extract(self) -> bool:
        return True

    def supports_crawl(self) -> bool:
        return True

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._key}"}

    async def do_search(self, query: str, limit: int, *, allowed_domains: list[str] | None = None,
                        country: str | None = None) -> Envelope:
        payload: dict[str, Any] = {
            "query": query,
            "max_results": bounded(limit, 20),
            "search_depth": "basic",
            "topic": "general",
            "include_answer": False,
            "include_raw_content": False,
        }
        if allowed_domains:
            payload["include_domains"] = allowed_domains[:MAX_DOMAINS]
        name = country_name(country)
        if name:
            payload["country"] = name.lower()  # Tavily boosts that country, on topic "general" only
        body = await self.post_json("/search", payload)
        items = require_list(body, "results", self.service)
        return search_hits(items, lambda item: text(item.get("content")), lambda item: item.get("published_date"))

    async def do_extract(self, urls: list[str], options: dict[str, Any]) -> Envelope:
        if not urls:
            return extract_result([])
        depth = "advanced" if options.get("extract_depth") == "advanced" else "basic"
        bodies = await asyncio.gather(
            *(
                self.post_json("/extract", {"urls": batch, "extract_depth": depth, "format": "markdown"})
                for batch in batches(urls, MAX_EXTRACT_URLS)
            )
        )
        pages = PageSet(urls, missing=f"{self.service} returned nothing for this URL")
        for body in bodies:
            for item in require_list(body, "results", self.service):
                url = text(item.get("url"))
                if url:
                    pages.found(url, page(url, text(item.get("raw_content")), title=text(item.get("title")) or None))
            for item in optional_list(body, "failed_results"):
                url = text(item.get("url"))
                if url:
                    reason = text(item.get("error")) or "no reason given"
                    pages.failed(url, f"{self.service} could not extract this page: {reason}")
        return pages.result()

    async def do_crawl(self, url: str, options: dict[str, Any]) -> Envelope:
        limit = bounded(options.get("limit") or options.get("max_pages"), 100, default=10)
        payload: dict[str, Any] = {
            "url": url,
            "limit": limit,
            "max_depth": bounded(options.get("max_depth"), 5, default=1),
            "extract_depth": "basic",
            "format": "markdown",
        }
        instructions = text(options.get("instructions"))
        if instructions:
            payload["instructions"] = instructions
        import httpx  # on first use, not at start-up (providers/http.py says why)

        body = await self.post_json("/crawl", payload, timeout=httpx.Timeout(self._crawl_timeout, connect=10.0))
        pages = []
        for item in require_list(body, "results", self.service)[:limit]:
            page_url = text(item.get("url"))
            if page_url:
                pages.append(page(page_url, text(item.get("raw_content")), title=text(item.get("title")) or None))
        return extract_result(pages)
