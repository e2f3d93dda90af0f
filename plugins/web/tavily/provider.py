"""Tavily (https://docs.tavily.com): POST /search, /extract and /crawl with a Bearer key.

Errors come as `{"detail": {"error": "..."}}`; 401 is a bad key, 432/433 are plan and usage
limits, 429 is the rate limit. Extract reports unreadable URLs in `failed_results`.

Crawl: Tavily crawls for up to its `timeout` (10-150 s, default 150) before answering, so the
request says a few seconds less than the client waits: the pages come back instead of a client
timeout. Country: Tavily takes lowercase English names from a fixed list (`TAVILY_COUNTRIES`, the
API reference's enum; "hong kong" is not in it): any other country is left out, the search runs
unlocalised.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from providers.http import http_timeout
from providers.locales import country_name
from providers.payload import bounded, optional_list, require_list, search_hits, text
from providers.service import PageSet, ServiceProvider, batches
from providers.web import Envelope, extract_result, page

MAX_EXTRACT_URLS = 20  # Tavily's per-request cap on /extract
MAX_DOMAINS = 300  # Tavily's cap on include_domains
CRAWL_TIMEOUT_RANGE = (10, 150)  # what Tavily's /crawl accepts as `timeout`, in seconds
CRAWL_MARGIN = 5.0  # seconds the client waits beyond Tavily's own crawl timeout
#: The `country` values Tavily's /search accepts (API reference, tavily-python 0.8.5).
TAVILY_COUNTRIES = frozenset({
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


def tavily_country(country: str | None) -> str | None:
    """"GB" -> "united kingdom"; None for a country Tavily does not list ("HK")."""
    name = (country_name(country) or "").lower()
    return name if name in TAVILY_COUNTRIES else None


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
        name = tavily_country(country)
        if name:
            payload["country"] = name  # Tavily boosts that country, on topic "general" only
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
        low, high = CRAWL_TIMEOUT_RANGE
        service_seconds = int(max(low, min(high, self._crawl_timeout - CRAWL_MARGIN)))
        payload["timeout"] = service_seconds
        # The client outwaits Tavily's own deadline by the margin, so Tavily's answer arrives.
        waited = max(self._crawl_timeout, service_seconds + CRAWL_MARGIN)
        body = await self.post_json("/crawl", payload, timeout=http_timeout(waited))
        pages = []
        for item in require_list(body, "results", self.service)[:limit]:
            page_url = text(item.get("url"))
            if page_url:
                pages.append(page(page_url, text(item.get("raw_content")), title=text(item.get("title")) or None))
        return extract_result(pages)
