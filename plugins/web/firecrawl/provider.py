"""Firecrawl v2 (https://docs.firecrawl.dev): /v2/search, /v2/scrape, /v2/crawl (+ polling).

Cloud needs `Authorization: Bearer fc-...`; self-hosted instances often run without auth, so
the provider is available with either FIRECRAWL_API_KEY or FIRECRAWL_API_URL. Errors come as
`{"success": false, "error": "..."}`; 402 means out of credits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from providers.payload import bounded, env_value, query_with_sites, require_list, require_object, search_hits, text
from providers.service import ServiceProvider, fetch_each
from providers.web import Envelope, ProviderError, extract_result, page

SERVICE = "Firecrawl"
KEY_VAR = "FIRECRAWL_API_KEY"
URL_VAR = "FIRECRAWL_API_URL"
MAX_QUERY_CHARS = 500
SCRAPE_CONCURRENCY = 5
TERMINAL = {"completed", "failed", "cancelled"}


def _strip_version(url: str) -> str:
    # Users paste the versioned URL from the docs; the provider adds /v2 itself.
    for suffix in ("/v2", "/v1"):
        if url.endswith(suffix):
            return url[: -len(suffix)]
    return url


def _page_from_document(doc: Mapping[str, Any], fallback_url: str) -> dict[str, Any]:
    """One extract entry from a Firecrawl document (`markdown` + `metadata`)."""
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), Mapping) else {}
    url = text(meta.get("sourceURL")) or text(meta.get("url")) or fallback_url
    status = meta.get("statusCode")
    extra = {
        k: v
        for k, v in (
            ("status_code", status),
            ("description", text(meta.get("description"))),
            ("language", text(meta.get("language"))),
            ("published_date", text(meta.get("publishedTime")) or text(meta.get("article:published_time"))),
        )
        if v
    }
    error = text(meta.get("error"))
    if not error and isinstance(status, int) and status >= 400:
        error = f"the page answered HTTP {status}"
    return page(
        url,
        text(doc.get("markdown")),
        title=text(meta.get("title")) or None,
        metadata=extra,
        error=f"{SERVICE} could not read this page: {error}" if error else None,
    )


class FirecrawlProvider(ServiceProvider):
    name = "firecrawl"
    service = SERVICE
    key_var = KEY_VAR
    url_var = URL_VAR
    default_url = "https://api.firecrawl.dev"

    def __init__(
        self,
        env: Mapping[str, str],
        *,
        timeout: float = 60.0,
        poll_interval: float = 2.0,
        crawl_timeout: float = 25.0,
        max_crawl_pages: int = 20,
    ) -> None:
        super().__init__(env, timeout=timeout)
        self._configured_url = env_value(env, URL_VAR)
        self._base = _strip_version(self._base)
        self._poll_interval = poll_interval
        self._crawl_timeout = crawl_timeout
        self._max_crawl_pages = max_crawl_pages

    def unavailable_reason(self) -> str | None:
        # Self-hosted instances often run without auth: their URL alone is enough.
        if self._key or self._configured_url:
            return None
        return f"set {KEY_VAR} (or {URL_VAR} for a self-hosted instance)"

    def supports_extract(self) -> bool:
        return True

    def supports_crawl(self) -> bool:
        return True

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._key}"} if self._key else {}

    async def _call(
        self, method: str, path: str, payload: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> Any:
        body = await self.call_json(method, path, payload=payload, timeout=timeout)
        obj = require_object(body, SERVICE)
        if obj.get("success") is False:
            raise ProviderError(f"{SERVICE} reported a failure: {text(obj.get('error')) or 'no reason given'}")
        return obj

    # -- search ------------------------------------------------------------------------------
    async def do_search(self, query: str, limit: int, *, allowed_domains: list[str] | None = None) -> Envelope:
        # /v2/search has no domain filter field: `site:` operators, kept within its 500 characters.
        sent = query_with_sites(query, allowed_domains or [], max_chars=MAX_QUERY_CHARS)
        body = await self._call("POST", "/v2/search", {"query": sent, "limit": bounded(limit, 100)})
        data = body.get("data")
        if not isinstance(data, Mapping):
            raise ProviderError(f"{SERVICE} returned an unexpected response (no 'data' object)")
        return search_hits(require_list(data, "web", SERVICE), lambda item: text(item.get("description")))

    # -- extract (one scrape per URL) --------------------------------------------------------
    async def do_extract(self, urls: list[str], options: dict[str, Any]) -> Envelope:
        return await fetch_each(urls, self._scrape, SCRAPE_CONCURRENCY)

    async def _scrape(self, url: str) -> dict[str, Any]:
        body = await self._call("POST", "/v2/scrape", {"url": url, "formats": ["markdown"], "onlyMainContent": True})
        data = body.get("data")
        if not isinstance(data, Mapping):
            raise ProviderError(f"{SERVICE} returned an unexpected response (no 'data' object)")
        return {**_page_from_document(data, url), "url": url}

    # -- crawl (job + polling, bounded by pages and time) ------------------------------------
    async def do_crawl(self, url: str, options: dict[str, Any]) -> Envelope:
        limit = bounded(options.get("limit") or options.get("max_pages"), self._max_crawl_pages, default=10)
        budget = float(options.get("timeout") or self._crawl_timeout)
        deadline = time.monotonic() + budget
        started = await self._call(
            "POST",
            "/v2/crawl",
            {"url": url, "limit": limit, "scrapeOptions": {"formats": ["markdown"], "onlyMainContent": True}},
        )
        job_id = text(started.get("id"))
        if not job_id:
            raise ProviderError(f"{SERVICE} returned an unexpected response (no crawl job id)")
        status_url = f"/v2/crawl/{job_id}"
        documents: list[dict[str, Any]] = []
        while True:
            # A hung poll must not outlive the crawl's own budget.
            remaining = max(0.5, deadline - time.monotonic())
            status = await self._call("GET", status_url, timeout=remaining)
            state = text(status.get("status"))
            if state in TERMINAL:
                documents = await self._collect(status, limit)
                break
            if time.monotonic() + self._poll_interval > deadline:
                # Take whatever the job has scraped so far and stop it, so it burns no more credits.
                documents = [d for d in status.get("data") or [] if isinstance(d, Mapping)][:limit]
                await self._cancel(status_url)
                if not documents:
                    raise ProviderError(f"{SERVICE} crawl did not finish within {budget:g} s")
                break
            await asyncio.sleep(self._poll_interval)
        if state in ("failed", "cancelled") and not documents:
            reason = text(status.get("error")) or "no reason given"
            raise ProviderError(f"{SERVICE} crawl {state}: {reason}")
        return extract_result(_page_from_document(d, url) for d in documents)

    async def _collect(self, status: Mapping[str, Any], limit: int) -> list[dict[str, Any]]:
        """Pages of a finished job, following `next` (paged above 10 MB) up to `limit`."""
        documents = [d for d in status.get("data") or [] if isinstance(d, Mapping)]
        next_url = text(status.get("next"))
        while next_url and len(documents) < limit and self._same_origin(next_url):
            more = await self._call("GET", next_url)
            documents.extend(d for d in more.get("data") or [] if isinstance(d, Mapping))
            next_url = text(more.get("next"))
        return documents[:limit]

    def _same_origin(self, url: str) -> bool:
        # Never send the key to a host the service did not come from.
        a, b = urlsplit(url), urlsplit(self._base)
        return (a.scheme, a.netloc) == (b.scheme, b.netloc)

    async def _cancel(self, status_url: str) -> None:
        try:
            await self._call("DELETE", status_url)
        except ProviderError:
            pass  # best effort: the crawl result already stands on its own
