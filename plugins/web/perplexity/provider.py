"""Perplexity Search (https://docs.perplexity.ai): POST /search with a Bearer key.

Returns ranked pages `{id, results[{title, url, snippet, date, last_updated}]}`; errors come
OpenAI-style as `{"error": {"message", "type", "code"}}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from providers.http import LazyClient, call_json
from providers.payload import as_envelope, base_url, bounded, clip, dated, env_value, iso_date, require_list, text
from providers.web import Envelope, ProviderError, WebSearchProvider, search_result

SERVICE = "Perplexity"
KEY_VAR = "PERPLEXITY_API_KEY"
URL_VAR = "PERPLEXITY_API_URL"
DEFAULT_URL = "https://api.perplexity.ai"


class PerplexityProvider(WebSearchProvider):
    name = "perplexity"

    def __init__(self, env: Mapping[str, str], *, timeout: float = 30.0) -> None:
        self._key = env_value(env, KEY_VAR)
        self._base = base_url(env, URL_VAR, DEFAULT_URL)
        self._http = LazyClient(httpx.Timeout(timeout, connect=min(10.0, timeout)))

    @property
    def display_name(self) -> str:
        return "Perplexity"

    def is_available(self) -> bool:
        return bool(self._key)

    def unavailable_reason(self) -> str | None:
        return None if self._key else f"set {KEY_VAR}"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def search(self, query: str, limit: int = 5) -> Envelope:
        return await as_envelope(self._search(query, limit))

    async def _search(self, query: str, limit: int) -> Envelope:
        if not self._key:
            raise ProviderError(f"{SERVICE} is not configured: set {KEY_VAR}")
        body: Any = await call_json(
            self._http.get(),
            SERVICE,
            "POST",
            f"{self._base}/search",
            json={"query": query, "max_results": bounded(limit, 20)},
            headers={"Authorization": f"Bearer {self._key}"},
        )
        hits = []
        for item in require_list(body, "results", SERVICE):
            url = text(item.get("url"))
            if url:
                date = iso_date(item.get("date")) or iso_date(item.get("last_updated"))
                hits.append(
                    {
                        "title": text(item.get("title")),
                        "url": url,
                        "description": dated(clip(text(item.get("snippet"))), date),
                    }
                )
        return search_result(hits)
