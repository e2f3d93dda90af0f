"""Parallel (https://docs.parallel.ai): POST /v1/search and /v1/extract with `x-api-key`.

Search takes keyword `search_queries` (required, each <= 200 chars) plus a natural-language
`objective`; limits sit under `advanced_settings`. Extract returns excerpts always and the whole
page when `advanced_settings.full_content` is true; unreadable URLs come back in `errors`.
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
    join_texts,
    optional_list,
    pages_in_order,
    require_list,
    text,
)
from providers.web import Envelope, ProviderError, WebSearchProvider, extract_result, page, search_result

SERVICE = "Parallel"
KEY_VAR = "PARALLEL_API_KEY"
URL_VAR = "PARALLEL_API_URL"
DEFAULT_URL = "https://api.parallel.ai"
MAX_QUERY_CHARS = 200
MAX_OBJECTIVE_CHARS = 5000
MAX_EXTRACT_URLS = 20


def _error_reason(item: Mapping[str, Any]) -> str:
    kind = text(item.get("error_type")) or "error"
    code = item.get("http_status_code")
    detail = text(item.get("content"))
    reason = f"{kind}, HTTP {code}" if code else kind
    return f"{SERVICE} could not read this page ({reason}){f': {detail}' if detail else ''}"


class ParallelProvider(WebSearchProvider):
    name = "parallel"

    def __init__(self, env: Mapping[str, str], *, timeout: float = 60.0) -> None:
        self._key = env_value(env, KEY_VAR)
        self._base = base_url(env, URL_VAR, DEFAULT_URL)
        self._http = LazyClient(httpx.Timeout(timeout, connect=min(10.0, timeout)))

    @property
    def display_name(self) -> str:
        return "Parallel"

    def is_available(self) -> bool:
        return bool(self._key)

    def unavailable_reason(self) -> str | None:
        return None if self._key else f"set {KEY_VAR}"

    def supports_extract(self) -> bool:
        return True

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _post(self, path: str, payload: dict[str, Any]) -> Any:
        if not self._key:
            raise ProviderError(f"{SERVICE} is not configured: set {KEY_VAR}")
        headers = {"x-api-key": self._key}
        return await call_json(self._http.get(), SERVICE, "POST", self._base + path, json=payload, headers=headers)

    async def search(self, query: str, limit: int = 5) -> Envelope:
        return await as_envelope(self._search(query, limit))

    async def _search(self, query: str, limit: int) -> Envelope:
        body = await self._post(
            "/v1/search",
            {
                "search_queries": [query[:MAX_QUERY_CHARS]],
                "objective": query[:MAX_OBJECTIVE_CHARS],
                "mode": "basic",
                "advanced_settings": {"max_results": bounded(limit, 20)},
            },
        )
        hits = []
        for item in require_list(body, "results", SERVICE)[: bounded(limit, 50)]:
            url = text(item.get("url"))
            if url:
                snippet = clip(join_texts(item.get("excerpts")))
                hits.append(
                    {
                        "title": text(item.get("title")),
                        "url": url,
                        "description": dated(snippet, iso_date(item.get("publish_date"))),
                    }
                )
        return search_result(hits)

    async def extract(self, urls: list[str], **kwargs: Any) -> Envelope:
        return await as_envelope(self._extract(list(urls), kwargs))

    async def _extract(self, urls: list[str], options: Mapping[str, Any]) -> Envelope:
        if not urls:
            return extract_result([])
        objective = text(options.get("objective")) or text(options.get("query"))
        batches = [urls[i : i + MAX_EXTRACT_URLS] for i in range(0, len(urls), MAX_EXTRACT_URLS)]

        def payload(batch: list[str]) -> dict[str, Any]:
            body: dict[str, Any] = {"urls": batch, "advanced_settings": {"full_content": True}}
            if objective:
                body["objective"] = objective[:MAX_OBJECTIVE_CHARS]
            return body

        bodies = await asyncio.gather(*(self._post("/v1/extract", payload(b)) for b in batches))
        found: dict[str, dict[str, Any]] = {}
        errors: dict[str, str] = {}
        for body in bodies:
            for item in require_list(body, "results", SERVICE):
                url = text(item.get("url"))
                if not url:
                    continue
                excerpts = join_texts(item.get("excerpts"), "\n\n")
                content = text(item.get("full_content")) or excerpts
                metadata = {"published_date": iso_date(item.get("publish_date"))} if item.get("publish_date") else {}
                found[url] = page(url, content, title=text(item.get("title")) or None, metadata=metadata)
            for item in optional_list(body, "errors"):
                url = text(item.get("url"))
                if url:
                    errors[url] = _error_reason(item)
        entries = pages_in_order(urls, found, errors, lambda _u: f"{SERVICE} returned nothing for this URL")
        return extract_result(entries)
