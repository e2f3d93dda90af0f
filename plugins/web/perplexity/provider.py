"""Perplexity Search (https://docs.perplexity.ai): POST /search with a Bearer key.

Returns ranked pages `{id, results[{title, url, snippet, date, last_updated}]}`; errors come
OpenAI-style as `{"error": {"message", "type", "code"}}`.
"""

from __future__ import annotations

from typing import Any

from providers.payload import bounded, iso_date, require_list, search_hits, text
from providers.service import ServiceProvider
from providers.web import Envelope

MAX_DOMAINS = 20  # Perplexity's cap on search_domain_filter


def _date(item: Any) -> str:
    return iso_date(item.get("date")) or iso_date(item.get("last_updated"))


class PerplexityProvider(ServiceProvider):
    name = "perplexity"
    service = "Perplexity"
    key_var = "PERPLEXITY_API_KEY"
    url_var = "PERPLEXITY_API_URL"
    default_url = "https://api.perplexity.ai"

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._key}"}

    async def do_search(self, query: str, limit: int, *, allowed_domains: list[str] | None = None,
                        country: str | None = None) -> Envelope:
        payload: dict[str, Any] = {"query": query, "max_results": bounded(limit, 20)}
        if allowed_domains:
            # at most 20 domains: with more, the gateway's own check on the results does the rest
            payload["search_domain_filter"] = allowed_domains[:MAX_DOMAINS]
        if country:
            payload["country"] = country.upper()
        body = await self.post_json("/search", payload)
        items = require_list(body, "results", self.service)
        return search_hits(items, lambda item: text(item.get("snippet")), _date)
