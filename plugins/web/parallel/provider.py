"""Parallel (https://docs.parallel.ai): POST /v1/search and /v1/extract with `x-api-key`.

Search takes keyword `search_queries` (required, each <= 200 chars) plus a natural-language
`objective`; limits sit under `advanced_settings`. Extract returns excerpts always and the whole
page when `advanced_settings.full_content` is true; unreadable URLs come back in `errors`.
Allowed domains go to `advanced_settings.source_policy.include_domains` (not into the query, whose
200 characters would cut the filter off).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from providers.payload import bounded, iso_date, join_texts, optional_list, require_list, search_hits, text
from providers.service import PageSet, ServiceProvider, batches
from providers.web import Envelope, extract_result, page

SERVICE = "Parallel"
MAX_QUERY_CHARS = 200
MAX_OBJECTIVE_CHARS = 5000
MAX_EXTRACT_URLS = 20


def _error_reason(item: Mapping[str, Any]) -> str:
    kind = text(item.get("error_type")) or "error"
    code = item.get("http_status_code")
    detail = text(item.get("content"))
    reason = f"{kind}, HTTP {code}" if code else kind
    return f"{SERVICE} could not read this page ({reason}){f': {detail}' if detail else ''}"


def _page(url: str, item: Mapping[str, Any]) -> dict[str, Any]:
    content = text(item.get("full_content")) or join_texts(item.get("excerpts"), "\n\n")
    metadata = {"published_date": iso_date(item.get("publish_date"))} if item.get("publish_date") else {}
    return page(url, content, title=text(item.get("title")) or None, metadata=metadata)


class ParallelProvider(ServiceProvider):
    name = "parallel"
    service = SERVICE
    key_var = "PARALLEL_API_KEY"
    url_var = "PARALLEL_API_URL"
    default_url = "https://api.parallel.ai"

    def __init__(self, env: Mapping[str, str], *, timeout: float = 60.0) -> None:
        super().__init__(env, timeout=timeout)

    def supports_extract(self) -> bool:
        return True

    def auth_headers(self) -> dict[str, str]:
        return {"x-api-key": self._key}

    async def do_search(self, query: str, limit: int, *, allowed_domains: list[str] | None = None) -> Envelope:
        advanced: dict[str, Any] = {"max_results": bounded(limit, 20)}
        if allowed_domains:
            advanced["source_policy"] = {"include_domains": list(allowed_domains)}
        body = await self.post_json(
            "/v1/search",
            {
                "search_queries": [query[:MAX_QUERY_CHARS]],
                "objective": query[:MAX_OBJECTIVE_CHARS],
                "mode": "basic",
                "advanced_settings": advanced,
            },
        )
        items = require_list(body, "results", SERVICE)[: bounded(limit, 50)]
        return search_hits(items, lambda item: join_texts(item.get("excerpts")), lambda item: item.get("publish_date"))

    async def do_extract(self, urls: list[str], options: dict[str, Any]) -> Envelope:
        if not urls:
            return extract_result([])
        objective = text(options.get("objective")) or text(options.get("query"))

        def payload(batch: list[str]) -> dict[str, Any]:
            body: dict[str, Any] = {"urls": batch, "advanced_settings": {"full_content": True}}
            if objective:
                body["objective"] = objective[:MAX_OBJECTIVE_CHARS]
            return body

        calls = (self.post_json("/v1/extract", payload(batch)) for batch in batches(urls, MAX_EXTRACT_URLS))
        bodies = await asyncio.gather(*calls)
        pages = PageSet(urls, missing=f"{SERVICE} returned nothing for this URL")
        for body in bodies:
            for item in require_list(body, "results", SERVICE):
                url = text(item.get("url"))
                if url:
                    pages.found(url, _page(url, item))
            for item in optional_list(body, "errors"):
                url = text(item.get("url"))
                if url:
                    pages.failed(url, _error_reason(item))
        return pages.result()
