"""SearXNG provider: `GET {SEARXNG_URL}/search?q=...&format=json`, no auth.

Environment: SEARXNG_URL (required, e.g. http://127.0.0.1:8888), SEARXNG_LANGUAGE (optional, e.g.
"en"), SEARXNG_TIMEOUT (seconds, default 15). JSON output must be enabled on the instance
(`search.formats: [html, json]` in settings.yml); otherwise SearXNG answers 403.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from providers.http import decoded_body, describe_http_error, json_body, new_client, send
from providers.web import Envelope, ProviderError, WebSearchProvider, failure, search_result

SERVICE = "SearXNG"


class SearxngProvider(WebSearchProvider):
    name = "searxng"

    def __init__(self, env: Mapping[str, str]) -> None:
        self.base_url = (env.get("SEARXNG_URL") or "").strip().rstrip("/")
        self.language = (env.get("SEARXNG_LANGUAGE") or "").strip() or None
        self.timeout = float(env.get("SEARXNG_TIMEOUT") or 15)
        self._client: httpx.AsyncClient | None = None

    @property
    def display_name(self) -> str:
        return "SearXNG"

    def is_available(self) -> bool:
        return bool(self.base_url)

    def unavailable_reason(self) -> str | None:
        return None if self.base_url else "set SEARXNG_URL"

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = new_client(httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)))
        return self._client

    async def search(self, query: str, limit: int = 5) -> Envelope:
        if not self.base_url:
            return failure(f"searxng: {self.unavailable_reason()}")
        params: dict[str, Any] = {"q": query, "format": "json", "pageno": 1}
        if self.language:
            params["language"] = self.language
        response = await send(
            self._http(), SERVICE, "GET", f"{self.base_url}/search", params=params,
            headers={"Accept": "application/json"},
        )
        if response.status_code >= 400:
            raise ProviderError(self._error(response))
        body = json_body(SERVICE, response)
        if not isinstance(body, dict) or not isinstance(body.get("results"), list):
            raise ProviderError(f"{SERVICE} answered without a results list")
        hits = [
            {"title": r.get("title"), "url": r["url"], "description": r.get("content")}
            for r in body["results"]
            if isinstance(r, dict) and isinstance(r.get("url"), str)
        ][:limit]
        if not hits and body.get("unresponsive_engines"):
            engines = ", ".join(_engine_problem(e) for e in body["unresponsive_engines"])
            return failure(f"{SERVICE} found nothing because its engines did not answer: {engines}")
        return search_result(hits)

    @staticmethod
    def _error(response: httpx.Response) -> str:
        status = response.status_code
        if status == 403:
            return (
                f"{SERVICE} refused the JSON API (403): enable it on the instance with "
                "`search.formats: [html, json]` in settings.yml (and `server.limiter: false` for private use)"
            )
        if status == 429:
            wait = response.headers.get("Retry-After")
            after = f"; retry after {wait} s" if wait else ""
            return (
                f"{SERVICE} rate limit reached (429){after}: the instance's bot limiter blocks API clients; "
                "set `server.limiter: false` in settings.yml for private use"
            )
        retry_after = response.headers.get("Retry-After")
        return describe_http_error(SERVICE, status, decoded_body(response), retry_after)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _engine_problem(entry: Any) -> str:
    # SearXNG lists unresponsive engines as [name, reason] pairs.
    if isinstance(entry, list | tuple) and entry:
        return " ".join(str(part) for part in entry[:2])
    return str(entry)
