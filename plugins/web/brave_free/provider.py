"""Brave Search provider: `GET {BRAVE_SEARCH_API_URL}/web/search`, key in `X-Subscription-Token`.

Environment: BRAVE_SEARCH_API_KEY (required), BRAVE_SEARCH_API_URL (default
https://api.search.brave.com/res/v1, overridable for tests), BRAVE_SEARCH_TIMEOUT (seconds, default 15).
Errors come as `{"type": "ErrorResponse", "error": {"code", "detail", "meta"}}`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

import httpx

from providers.http import decoded_body, describe_http_error, json_body, new_client, send
from providers.web import Envelope, ProviderError, WebSearchProvider, search_result

SERVICE = "Brave Search"
DEFAULT_URL = "https://api.search.brave.com/res/v1"
MAX_QUERY_CHARS = 400
MAX_COUNT = 20
_TAG = re.compile(r"<[^>]+>")


class BraveProvider(WebSearchProvider):
    name = "brave-free"

    def __init__(self, env: Mapping[str, str]) -> None:
        self.api_key = (env.get("BRAVE_SEARCH_API_KEY") or "").strip()
        self.base_url = (env.get("BRAVE_SEARCH_API_URL") or DEFAULT_URL).strip().rstrip("/")
        self.timeout = float(env.get("BRAVE_SEARCH_TIMEOUT") or 15)
        self._client: httpx.AsyncClient | None = None

    @property
    def display_name(self) -> str:
        return "Brave Search"

    def is_available(self) -> bool:
        return bool(self.api_key)

    def unavailable_reason(self) -> str | None:
        return None if self.api_key else "set BRAVE_SEARCH_API_KEY"

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = new_client(httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)))
        return self._client

    async def search(self, query: str, limit: int = 5) -> Envelope:
        if not self.api_key:
            raise ProviderError(f"brave-free: {self.unavailable_reason()}")
        params = {"q": query[:MAX_QUERY_CHARS], "count": max(1, min(MAX_COUNT, limit))}
        headers = {"X-Subscription-Token": self.api_key, "Accept": "application/json"}
        response = await send(self._http(), SERVICE, "GET", f"{self.base_url}/web/search", params=params,
                              headers=headers)
        if response.status_code >= 400:
            raise ProviderError(_describe_error(response))
        body = json_body(SERVICE, response)
        if not isinstance(body, dict):
            raise ProviderError(f"{SERVICE} answered with an unexpected body")
        web = body.get("web") if isinstance(body.get("web"), dict) else {}
        results = web.get("results") if isinstance(web.get("results"), list) else []
        hits = [
            {"title": _plain(r.get("title")), "url": r["url"], "description": _plain(r.get("description"))}
            for r in results
            if isinstance(r, dict) and isinstance(r.get("url"), str)
        ]
        return search_result(hits[:limit])

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _plain(text: Any) -> str:
    """Brave marks matches with <strong>; the model needs plain text."""
    if not isinstance(text, str):
        return ""
    return html.unescape(_TAG.sub("", text))


def _describe_error(response: httpx.Response) -> str:
    body = decoded_body(response)
    retry_after = response.headers.get("Retry-After")
    if retry_after is None and response.status_code == 429:
        # Brave reports seconds until each rate window resets, e.g. "1, 1419704".
        reset = response.headers.get("X-RateLimit-Reset", "")
        retry_after = reset.split(",")[0].strip() or None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = error.get("code")
        detail = error.get("detail")
        text = ": ".join(str(part) for part in (code, detail) if part)
        body = {"detail": text} if text else body
    return describe_http_error(SERVICE, response.status_code, body, retry_after)
