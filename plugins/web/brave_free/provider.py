"""Brave Search provider: `GET {BRAVE_SEARCH_API_URL}/web/search`, key in `X-Subscription-Token`.

Environment: BRAVE_SEARCH_API_KEY (required), BRAVE_SEARCH_API_URL (default
https://api.search.brave.com/res/v1, overridable for tests), BRAVE_SEARCH_TIMEOUT (seconds, default 15).
Errors come as `{"type": "ErrorResponse", "error": {"code", "detail", "meta"}}`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from providers.http import decoded_body, describe_http_error
from providers.service import ServiceProvider
from providers.web import Envelope, ProviderError, search_result

if TYPE_CHECKING:
    import httpx  # annotations only: httpx loads with the first request

SERVICE = "Brave Search"
MAX_QUERY_CHARS = 400
MAX_COUNT = 20
_TAG = re.compile(r"<[^>]+>")


class BraveProvider(ServiceProvider):
    name = "brave-free"
    service = SERVICE
    key_var = "BRAVE_SEARCH_API_KEY"
    url_var = "BRAVE_SEARCH_API_URL"
    default_url = "https://api.search.brave.com/res/v1"

    def __init__(self, env: Mapping[str, str]) -> None:
        super().__init__(env, timeout=float(env.get("BRAVE_SEARCH_TIMEOUT") or 15))

    def auth_headers(self) -> dict[str, str]:
        return {"X-Subscription-Token": self._key, "Accept": "application/json"}

    def describe_error(self, response: httpx.Response) -> str:
        body = decoded_body(response)
        retry_after = response.headers.get("Retry-After")
        if retry_after is None and response.status_code == 429:
            # Brave reports seconds until each rate window resets, e.g. "1, 1419704".
            reset = response.headers.get("X-RateLimit-Reset", "")
            retry_after = reset.split(",")[0].strip() or None
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            detail = ": ".join(str(part) for part in (error.get("code"), error.get("detail")) if part)
            body = {"detail": detail} if detail else body
        return describe_http_error(SERVICE, response.status_code, body, retry_after)

    # Service faults are raised, not returned: the gateway turns them into the failure envelope.
    async def search(self, query: str, limit: int = 5, *, country: str | None = None) -> Envelope:
        if not self._key:
            raise ProviderError(f"brave-free: {self.unavailable_reason()}")
        params: dict[str, Any] = {"q": query[:MAX_QUERY_CHARS], "count": max(1, min(MAX_COUNT, limit))}
        if country:
            params["country"] = country.upper()  # Brave takes ISO 3166-1 alpha-2 codes
        body = await self.get_json("/web/search", params)
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


def _plain(text: Any) -> str:
    """Brave marks matches with <strong>; the model needs plain text."""
    if not isinstance(text, str):
        return ""
    return html.unescape(_TAG.sub("", text))
