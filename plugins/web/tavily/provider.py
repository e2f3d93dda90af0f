"""Tavily (https://docs.tavily.com): POST /search, /extract and /crawl with a Bearer key.

Errors come as `{"detail": {"error": "..."}}`; 401 is a bad key, 432/433 are plan and usage
limits, 429 is the rate limit. Extract reports unreadable URLs in `failed_results`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import httpx

from providers.http import LazyClient, call_json
from providers.payload import (
    as_envelope,
    base_url,
    bounded,
    clip,
    dated,
    env_value,
    iso_date,
    optional_list,
    pages_in_order,
    require_list,
    text,
)
from providers.web import Envelope, ProviderError, WebSearchProvider, extract_result, page, search_result

SERVICE = "Tavily"
KEY_VAR = "TAVILY_API_KEY"
URL_VAR = "TAVILY_API_URL"
DEFAULT_URL = "https://api.tavily.com"
MAX_EXTRACT_URLS = 20  # Tavily's per-request cap on /extract


class TavilyProvider(WebSearchProvider):
    name = "tavily"

    def __init__(self, env: Mapping[str, str], *, timeout: float = 30.0, crawl_timeout: float = 25.0) -> None:
        self._key = env_value(env, KEY_VAR)
        self._base = base_url(env, URL_VAR, DEFAULT_URL)
        self._http = LazyClient(httpx.Timeout(timeout, connect=min(10.0, timeout)))
        # Crawls run server-side for up to minutes; they get their own, longer read timeout.
        self._crawl_timeout = crawl_timeout

    @property
    def display_name(self) -> str:
        return "Tavily"

    def is_available(self) -> bool:
        return bool(self._key)

    def unavailable_reason(self) -> str | None:
        return None if self._key else f"set {KEY_VAR}"

    def supports_extract(self) -> bool:
        return True

    def supports_crawl(self) -> bool:
        return True

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _post(self, path: str, payload: dict[str, Any], timeout: float | None = None) -> Any:
        if not self._key:
            raise ProviderError(f"{SERVICE} is not configured: set {KEY_VAR}")
        kwargs: dict[str, Any] = {"json": payload, "headers": {"Authorization": f"Bearer {self._key}"}}
        if timeout is not None:
            kwargs["timeout"] = httpx.Timeout(timeout, connect=10.0)
        return await call_json(self._http.get(), SERVICE, "POST", self._base + path, **kwargs)

    # -- search ------------------------------------------------------------------------------
    async def search(self, query: str, limit: int = 5) -> Envelope:
        return await as_envelope(self._search(query, limit))

    async def _search(self, query: str, limit: int) -> Envelope:
        body = await self._post(
            "/search",
            {
                "query": query,
                "max_results": bounded(limit, 20),
                "search_depth": "basic",
                "topic": "general",
                "include_answer": False,
                "include_raw_content": False,
            },
        )
        hits = []
        for item in require_list(body, "results", SERVICE):
            url = text(item.get("url"))
            if url:
                snippet = clip(text(item.get("content")))
                hits.append(
                    {
                        "title": text(item.get("title")),
                        "url": url,
                        "description": dated(snippet, iso_date(item.get("published_date"))),
                    }
                )
        return search_result(hits)

    # -- extract -----------------------------------------------------------------------------
    async def extract(self, urls: list[str], **kwargs: Any) -> Envelope:
        return await as_envelope(self._extract(list(urls), kwargs))

    async def _extract(self, urls: list[str], options: dict[str, Any]) -> Envelope:
        if not urls:
            return extract_result([])
        depth = "advanced" if options.get("extract_depth") == "advanced" else "basic"
        batches = [urls[i : i + MAX_EXTRACT_URLS] for i in range(0, len(urls), MAX_EXTRACT_URLS)]
        bodies = await asyncio.gather(
            *(
                self._post("/extract", {"urls": batch, "extract_depth": depth, "format": "markdown"})
                for batch in batches
            )
        )
        found: dict[str, dict[str, Any]] = {}
        errors: dict[str, str] = {}
        for body in bodies:
            for item in require_list(body, "results", SERVICE):
                url = text(item.get("url"))
                if url:
                    content = text(item.get("raw_content"))
                    found[url] = page(url, content, title=text(item.get("title")) or None)
            for item in optional_list(body, "failed_results"):
                url = text(item.get("url"))
                if url:
                    reason = text(item.get("error")) or "no reason given"
                    errors[url] = f"{SERVICE} could not extract this page: {reason}"
        entries = pages_in_order(urls, found, errors, lambda _u: f"{SERVICE} returned nothing for this URL")
        return extract_result(entries)

    # -- crawl -------------------------------------------------------------------------------
    async def crawl(self, url: str, **kwargs: Any) -> Envelope:
        return await as_envelope(self._crawl(url, kwargs))

    async def _crawl(self, url: str, options: dict[str, Any]) -> Envelope:
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
        body = await self._post("/crawl", payload, timeout=self._crawl_timeout)
        pages = []
        for item in require_list(body, "results", SERVICE)[:limit]:
            page_url = text(item.get("url"))
            if page_url:
                pages.append(page(page_url, text(item.get("raw_content")), title=text(item.get("title")) or None))
        return extract_result(pages)
